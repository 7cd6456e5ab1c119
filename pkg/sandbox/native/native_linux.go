//go:build linux && (amd64 || arm64)

package native

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

// capPollInterval is how often a running command's cgroups are checked
// for a memory or pids cap the kernel enforced, so that the whole command
// is killed rather than left to run on without the process the kernel
// killed or the fork it refused.
const capPollInterval = 50 * time.Millisecond

// probeTimeout bounds New's trial run of an empty sandbox.
const probeTimeout = 10 * time.Second

// Backend is the native Linux backend. Each command runs as PID 2 under a
// small init (the shim: this program's own binary run again, see
// RunShimIfRequested) in new mount, PID, UTS, IPC and (unless
// Spec.Network) network namespaces, plus a user namespace when the
// sandboxer is not root:
//
//   - Filesystem: a private root in which /usr, /bin, /sbin, /lib*, and
//     /etc are read-only binds of the host's, the workspace (Spec.Dir) is
//     the only writable host directory, /tmp and /dev/shm are private
//     tmpfs, /dev holds only null, zero, full, random and urandom, and
//     /proc is the sandbox's own, its kernel knobs read-only. Home
//     directories, other workspaces, the host's /tmp and the sandboxer's
//     files are not there; known secrets in /etc are masked (Config.Hide).
//     Landlock (where the kernel has it) refuses writes outside the
//     workspace, /tmp and /dev/shm a second time.
//   - Privilege: the command runs as the sandboxer's uid with no
//     capabilities (the bounding set is empty, no_new_privs is set), and a
//     seccomp filter refuses mount, namespace, keyring, module, BPF and
//     similar system calls.
//   - Network: a network namespace of its own, with a loopback interface
//     of its own, so not even the host's loopback services are reachable.
//     When Spec.Network allows the network, slirp4netns gives it a route
//     out (Config.NetworkHelper), still with no way to the host's
//     loopback; without slirp4netns such a command is refused.
//   - Caps: memory and pids through cgroups (v2, or v1 on hybrid hosts),
//     killing the whole command on an OOM kill or a refused fork; CPU
//     seconds per process through RLIMIT_CPU (SIGXCPU, then SIGKILL a
//     second later); open files through RLIMIT_NOFILE; wall clock by a
//     timer. A command whose first process exits after a cap was hit is
//     still reported as not exited, with the cap.
//   - Teardown: when the command's first process ends, the init kills
//     and reaps everything left in the PID namespace, including processes
//     that daemonised or called setsid, before it reports; Run returns
//     then, and the init's own exit, the unmounting and the removal of the
//     cgroups follow in the background. No temporary directory is created
//     on the host and every mount lives and dies in the sandbox's mount
//     namespace.
//
// A Backend has no per-command state outside Run; one value runs any number
// of commands at once.
type Backend struct {
	cfg Config
	// init is the program each sandbox's init runs: harness-sandbox-init
	// as loadInit holds it (/proc/self/fd/N), or selfExe; initPath is
	// where that harness-sandbox-init was, "" for selfExe.
	init, initPath string
	owner          string        // "<pid>-<number>", naming this Backend's cgroups
	cg             *cgroupLayout // nil without any usable cgroup hierarchy
	userns         bool
	netHelper      string // slirp4netns, "" without: no command may use the network
	// unreachable are the prefixes every sandbox routes nowhere
	// (Config.Unreachable).
	unreachable []string
	// detachHost: the sandboxer may clone mount trees (cloneTree), so
	// each sandbox gets its workspace passed and detaches the host's root
	// before its command is known (rootConfig.DetachHost).
	detachHost bool
	landlock   int // Landlock ABI, 0 without
	seccomp    bool
	readOnly   []string
	hide       []string
	enforces   []string
	unenforced []string // caps no command gets (cgroups missing)

	warm      chan *shimProc // started shims with their root ready, network denied; nil without a pool
	stopFill  context.CancelFunc
	filling   sync.WaitGroup
	closeOnce sync.Once
	// kick wakes fill when a Run begins or ends (capacity 1).
	kick chan struct{}
	// parked is set while fill holds a ready shim it cannot hand over,
	// the pool being full: the pool has nothing left to do.
	parked atomic.Bool

	reap    chan remains // what finished commands left, for the reaper to remove
	reaping sync.WaitGroup

	mu      sync.Mutex
	busy    int             // Runs under way, which fill lets go first
	closed  bool            // Close ran: no reaper, no pool
	stale   []*cgroup       // cgroups whose removal failed; retried by the reaper
	waiting map[string]bool // cgroup directories of the warm shims
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.Enforcer       = (*Backend)(nil)
	_ sandbox.LeftoverLister = (*Backend)(nil)
	_ sandbox.Closer         = (*Backend)(nil)
)

// New probes this machine once and returns the native backend.
//
// It checks that the program called RunShimIfRequested, finds the cgroup
// hierarchies (v2, v1 or hybrid) for the memory and pids controllers (and
// cpu when cfg.CPUs is set) and checks it can create cgroups there,
// removes the cgroups that earlier sandboxer processes left behind, and
// runs an empty sandbox through the whole setup (namespaces, mounts,
// Landlock, seccomp, capability drop). Errors: cfg.Validate's; otherwise
// an error wrapping ErrUnavailable that names what is missing, such
// as cgroup write access (unless cfg.AllowMissingCgroups), user namespaces,
// or the RunShimIfRequested call.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	exe, _ := os.Executable()
	path, err := findInit(cfg.Init, exe)
	if err != nil {
		return nil, err
	}
	init, initPath := selfExe, ""
	if path != selfExe {
		if loaded, err := loadInit(path); err == nil {
			init, initPath = loaded, path
		} else if !shimWired.Load() {
			return nil, err
		} else {
			// The running program can be the init itself, with its own
			// code: better than no native sandbox, and said.
			log := cfg.Logger
			if log == nil {
				log = slog.New(slog.DiscardHandler)
			}
			log.Warn("native sandbox: "+InitName+" cannot be used; each sandbox's init is this program instead, which starts more slowly", "err", err)
		}
	}
	n := &Backend{
		cfg:      cfg,
		init:     init,
		initPath: initPath,
		owner:    fmt.Sprintf("%d-%d", os.Getpid(), nativeSeq.Add(1)),
		userns:   cfg.UserNamespace || os.Geteuid() != 0,
		landlock: landlockABI(),
		seccomp:  seccompSupported(),
	}
	want := []string{"memory", "pids"}
	if cfg.CPUs > 0 {
		want = append(want, "cpu")
	}
	layout, err := detectCgroups(want)
	if err != nil && !cfg.AllowMissingCgroups {
		return nil, fmt.Errorf("%w: %w (set AllowMissingCgroups to run without the caps they enforce)", ErrUnavailable, err)
	}
	if layout.unified != "" || len(layout.v1) > 0 {
		n.cg = layout
		sweepCgroups(layout)
	}

	// A helper that is not there means no command may use the network.
	n.netHelper, _ = exec.LookPath(cmp.Or(cfg.NetworkHelper, NetworkHelperName))
	if n.unreachable, err = unreachablePrefixes(cfg.Unreachable); err != nil {
		return nil, err
	}
	n.readOnly = append(slices.Clone(systemDirs), cfg.ReadOnly...)
	for _, g := range secretPaths {
		m, _ := filepath.Glob(g)
		n.hide = append(n.hide, m...)
	}
	n.hide = append(n.hide, cfg.Hide...)

	n.enforces = []string{sandbox.CapWall, sandbox.CapCPU, sandbox.CapOpenFiles, sandbox.CapNetwork, sandbox.ConfineFilesystem, sandbox.ConfineProcesses}
	for c, label := range map[string]string{"memory": sandbox.CapMemory, "pids": sandbox.CapPids} {
		if n.cg != nil && n.cg.has(c) {
			n.enforces = append(n.enforces, label)
		} else {
			n.unenforced = append(n.unenforced, label)
		}
	}
	slices.Sort(n.enforces)
	slices.Sort(n.unenforced)

	n.detachHost = canCloneTrees()
	err = n.probe()
	if err != nil && n.detachHost {
		// The sandbox could not take a workspace passed to it: bind it
		// from the host's root instead, which keeps the host's root
		// attached until the command is known. Layers says which way is
		// in use; the reason goes to the log, or with the error.
		passErr := err
		n.detachHost = false
		if err = n.probe(); err != nil {
			err = fmt.Errorf("%w (and with the workspace passed: %w)", err, passErr)
		} else {
			log := cfg.Logger
			if log == nil {
				log = slog.New(slog.DiscardHandler)
			}
			log.Warn("native sandbox: the workspace cannot be passed to a sandbox; binding it from the host's root instead", "err", passErr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	n.reap = make(chan remains, reapQueue)
	n.reaping.Go(n.reaper)
	if warm := cmp.Or(cfg.Warm, defaultWarm); warm > 0 {
		n.warm = make(chan *shimProc, warm)
		n.kick = make(chan struct{}, 1)
		n.waiting = map[string]bool{}
		ctx, cancel := context.WithCancel(context.Background())
		n.stopFill = cancel
		n.filling.Go(func() { n.fill(ctx) })
	}
	return n, nil
}

// selfExe is the running program, as each sandbox's init.
const selfExe = "/proc/self/exe"

// loadInit copies the harness-sandbox-init at path into a sealed memory
// file, checks that it is of this program's build (sameBuild), and
// returns the path every sandbox starts it by (/proc/self/fd/N, the
// descriptor kept for the life of the process). What New checked is then
// what every sandbox runs: a later write to the file at path, or another
// file put in its place (an upgrade under a running sandboxer), changes
// nothing. Errors wrap ErrUnavailable.
func loadInit(path string) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("%w: the sandbox's init %s: %w", ErrUnavailable, path, err)
	}
	src, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	name := []byte(InitName + "\x00")
	fd, _, e := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), mfdCloexec|mfdAllowSealing, 0)
	if e != 0 {
		return fail(os.NewSyscallError("memfd_create", e))
	}
	mem := os.NewFile(fd, InitName)
	if _, err := io.Copy(mem, src); err != nil {
		mem.Close()
		return fail(err)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fAddSeals, fSealSeal|fSealShrink|fSealGrow|fSealWrite); e != 0 {
		mem.Close()
		return fail(os.NewSyscallError("seal the copy", e))
	}
	// Executed while a writable descriptor is open, the copy would be
	// busy: a read-only one is kept instead, and the writable one closed
	// before anything runs it, numbered far above the descriptors a
	// started init is given, which its start must not overwrite.
	ro, err := syscall.Open(fmt.Sprintf("/proc/self/fd/%d", fd), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	mem.Close()
	if err != nil {
		return fail(os.NewSyscallError("reopen the copy", err))
	}
	high, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(ro), syscall.F_DUPFD_CLOEXEC, initFD)
	syscall.Close(ro)
	if e != 0 {
		return fail(os.NewSyscallError("move the copy's descriptor", e))
	}
	init := fmt.Sprintf("/proc/self/fd/%d", high)
	if err := sameBuild(init, path); err != nil {
		syscall.Close(int(high))
		return "", err
	}
	return init, nil
}

// The memory file loadInit copies the init into, and its seals.
const (
	mfdCloexec      = 0x1
	mfdAllowSealing = 0x2
	fAddSeals       = 1033 // F_ADD_SEALS
	fSealSeal       = 0x1
	fSealShrink     = 0x2
	fSealGrow       = 0x4
	fSealWrite      = 0x8
	// initFD is the lowest descriptor number the copy is kept at.
	initFD = 100
)

// findInit returns the program a sandbox's init runs (Config.Init):
// path, made absolute, when it is given; else harness-sandbox-init in the
// directory of exe, the running program, when it is there; else the
// running program itself, when it called RunShimIfRequested. Errors,
// wrapping ErrUnavailable: path is not an executable file, or there is no
// init to run.
func findInit(path, exe string) (string, error) {
	if path != "" {
		abs, err := filepath.Abs(path)
		if err == nil {
			err = executable(abs)
		}
		if err != nil {
			return "", fmt.Errorf("%w: the sandbox's init %s: %w (build it with go build ./cmd/%s)", ErrUnavailable, path, err, InitName)
		}
		return abs, nil
	}
	if exe != "" {
		if p := filepath.Join(filepath.Dir(exe), InitName); executable(p) == nil {
			return p, nil
		}
	}
	if !shimWired.Load() {
		return "", fmt.Errorf("%w: there is no %s beside this program, and it does not call native.RunShimIfRequested at the start of main (or of TestMain in tests), so the sandbox's init cannot run", ErrUnavailable, InitName)
	}
	return selfExe, nil
}

// sameBuild checks that init, the harness-sandbox-init found at path,
// is of this program's build (shimBuild), by asking it. Each init checks
// it again when it starts, against the build its Backend asks for; this
// check says so once, at New, rather than at every sandbox. Errors wrap
// ErrUnavailable.
func sameBuild(init, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, init, "--build")
	cmd.Env = []string{}
	out, err := cmd.Output()
	got := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		return fmt.Errorf("%w: the sandbox's init %s does not say its build (%v): it is not a %s of this release; install the one built with this program", ErrUnavailable, path, err, InitName)
	case got != wantBuild():
		return fmt.Errorf("%w: the sandbox's init %s is of build %s and this program of build %s: a sandbox must be confined by this program's own code; install the %s built with it (or remove that one, and this program starts itself as the init)", ErrUnavailable, path, got, wantBuild(), InitName)
	}
	return nil
}

// executable reports why p is not a regular file someone may execute.
func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case fi.Mode()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}

// probe runs an empty sandbox: the whole setup, and no command.
func (n *Backend) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cfg := &shimConfig{Landlock: n.landlock, Seccomp: n.seccomp, Probe: true, TmpBytes: 1 << 20}
	if n.detachHost {
		// Pass a workspace too, as every command will: the temporary
		// directory, where the probe writes nothing. It may cover the
		// sandbox's /tmp, which is then left at its size.
		cfg.Dir, _ = filepath.EvalSymlinks(os.TempDir())
		cfg.TmpBytes = defaultTmpBytes
	}
	lim := sandbox.LimitsOf(protocol.Limits{WallSecs: int(probeTimeout / time.Second)})
	o, err := n.sandbox(ctx, cfg, lim, false)
	if err != nil {
		return fmt.Errorf("trial sandbox: %w", err)
	}
	if o.reported && o.report.Err != "" {
		return fmt.Errorf("trial sandbox: %s", o.report.Err)
	}
	if !o.reported {
		return fmt.Errorf("trial sandbox: the sandbox's init ended without reporting (%v); its output: %s", o.shimState, strings.TrimSpace(o.stderr))
	}
	return nil
}

// Name returns "native".
func (*Backend) Name() string { return "native" }

// Enforces returns every cap and confinement label, except "memory" and
// "pids" when New ran without the cgroups for them.
func (n *Backend) Enforces() []string { return slices.Clone(n.enforces) }

// Layers names the isolation layers in use, for logs and the sandboxer's
// advertisement: the namespaces, how the workspace reaches the sandbox
// ("workspace:passed", a clone of its mounts, with the host's root
// detached before the command is known; or "workspace:bound" from the
// host's root), the cgroup hierarchies, "landlock-abiN" and "seccomp"
// when the kernel has them, and last the program each sandbox's init
// runs: "init:harness-sandbox-init", or "init:self" for the running
// program (Config.Init).
func (n *Backend) Layers() []string {
	ns := "namespaces:mnt,pid,uts,ipc,net"
	if n.userns {
		ns += ",user"
	}
	out := []string{ns, "workspace:bound"}
	if n.detachHost {
		out[1] = "workspace:passed"
	}
	if n.cg != nil {
		out = append(out, n.cg.describe()...)
	}
	if n.landlock > 0 {
		out = append(out, "landlock-abi"+strconv.Itoa(n.landlock))
	}
	if n.seccomp {
		out = append(out, "seccomp")
	}
	if n.initPath == "" {
		return append(out, "init:self")
	}
	return append(out, "init:"+InitName)
}

// Programs names the harness-sandbox-init this Backend runs as each
// sandbox's init (sandbox.ProgramRunner), or nothing when that is the
// running program.
func (n *Backend) Programs() []string {
	if n.initPath == "" {
		return nil
	}
	return []string{n.initPath}
}

// Leftovers lists the cgroups of this process that exist, except those
// of the warm sandboxes: none while no command runs, unless a removal
// failed (they are retried by later runs).
func (n *Backend) Leftovers() ([]string, error) {
	if n.cg == nil {
		return nil, nil
	}
	dirs, err := ownCgroupDirs(n.cg, n.owner)
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.DeleteFunc(dirs, func(d string) bool { return n.waiting[d] }), err
}

// setWaiting records that sp waits in the pool (on true) or left it.
func (n *Backend) setWaiting(sp *shimProc, on bool) {
	if sp.cg == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range sp.cg.dirs() {
		if on {
			n.waiting[d] = true
		} else {
			delete(n.waiting, d)
		}
	}
}

// Run runs spec as described on Backend and sandbox.Backend. Errors (the command
// was not started): ctx already done (ctx.Err(), wrapped);
// CodeBadArguments for an empty argv or NUL bytes; CodeNotFound when the
// program is not installed in the sandbox's view (or a path given for it
// does not exist there); CodeSandbox when Dir does not exist or is /, the
// program is not executable, or the sandbox could not be set up.
func (n *Backend) Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error) {
	cfg, lim, err := n.command(ctx, spec)
	if err != nil {
		return nil, err
	}
	argv := cfg.Argv
	o, err := n.sandbox(ctx, cfg, lim, spec.Network)
	if err != nil {
		return nil, err
	}
	if o.reported && o.report.Err != "" {
		if o.report.Errno == int(syscall.ENOENT) {
			return nil, protocol.Errorf(protocol.CodeNotFound, "program %q is not installed on the sandboxer, or not where the sandbox shows it: a command sees the system directories (/usr, /bin, /lib, /etc) and its workspace, nothing else", argv[0])
		}
		if o.report.Errno != 0 {
			return nil, process.StartError(argv[0], syscall.Errno(o.report.Errno))
		}
		return nil, protocol.Errorf(protocol.CodeSandbox, "could not set up the sandbox for %s: %s", process.Argv0(argv), o.report.Err)
	}
	killed := o.killedBy != "" || o.cancelled
	if !o.reported && !killed && o.capHit == "" {
		return nil, protocol.Errorf(protocol.CodeSandbox, "the sandbox of %s failed: its init ended with %v without reporting; %s", process.Argv0(argv), o.shimState, strings.TrimSpace(o.stderr))
	}

	rep := protocol.ExecReport{
		Backend:    n.Name(),
		Argv:       argv,
		DurationMS: o.duration.Milliseconds(),
		Unenforced: slices.Clone(n.unenforced),
		ExitCode:   -1,
	}
	ws := syscall.WaitStatus(o.report.Status)
	capHit := o.capHit
	if capHit == "" && o.report.Ran && (ws.Signaled() && ws.Signal() == syscall.SIGXCPU || o.report.CPUNanos >= int64(lim.CPUSecs)*int64(time.Second)) {
		capHit = sandbox.CapCPU
	}
	switch {
	case capHit != "" || (killed && !o.reported):
		// A cap ended the command, or the caller did: not an exit of its
		// own, even when its first process then exited 0.
		if o.report.Ran && ws.Signaled() {
			rep.Signal = sandbox.SignalName(ws.Signal())
		} else if killed {
			rep.Signal = sandbox.SignalName(syscall.SIGKILL)
		}
	case ws.Exited():
		rep.Exited = true
		rep.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		rep.Signal = sandbox.SignalName(ws.Signal())
	}
	rep.CapHit = capHit
	res := &sandbox.Result{Report: rep, Stdout: o.stdout, Stderr: o.stderr}
	if o.escaped {
		res.Stderr += process.EscapedNote
	}
	return res, nil
}

// command checks spec and returns the shim's configuration for it, with
// its caps. Errors: those of Run before anything starts.
func (n *Backend) command(ctx context.Context, spec sandbox.Spec) (*shimConfig, protocol.Limits, error) {
	lim := sandbox.LimitsOf(spec.Limits)
	if err := sandbox.CheckSpec(ctx, spec); err != nil {
		return nil, lim, err
	}
	dir, err := filepath.EvalSymlinks(spec.Dir)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(dir); err == nil && !fi.IsDir() {
			err = syscall.ENOTDIR
		}
	}
	if err != nil {
		return nil, lim, protocol.Errorf(protocol.CodeSandbox, "the working directory %s does not exist on the sandboxer", spec.Dir)
	}
	if dir == "/" {
		return nil, lim, protocol.Errorf(protocol.CodeSandbox, "the working directory is /, which would make the whole host writable; give the workspace directory")
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	if n.cfg.GoCache != "" {
		env = withVar(env, "GOCACHE", SandboxGoCache)
	}
	return &shimConfig{
		Argv: slices.Clone(spec.Argv), Dir: dir, Env: env,
		TmpBytes: lim.MemoryBytes, CPUSecs: lim.CPUSecs, OpenFiles: lim.OpenFiles,
		Landlock: n.landlock, Seccomp: n.seccomp,
	}, lim, nil
}

// outcome is what one sandbox did, before interpretation.
type outcome struct {
	report    shimReport
	reported  bool             // the shim wrote its report
	shimState *os.ProcessState // how the shim ended
	killedBy  string           // the cap for which the backend killed the sandbox: wall, memory or pids
	cancelled bool             // the backend killed it because ctx ended
	capHit    string           // killedBy, or a memory or pids cap the kernel enforced
	duration  time.Duration    // from the start of the shim to its end
	stdout    string           // bounded
	stderr    string           // bounded
	escaped   bool             // the output pipes stayed open after the sandbox ended
}

// shimProc is a started shim waiting for its configuration, with the
// parent's ends of its pipes.
type shimProc struct {
	cmd     *exec.Cmd
	cg      *cgroup  // its cgroups; nil without any
	mntNS   *os.File // its mount namespace, held so that its teardown happens in the reaper
	inV2    bool     // placed in the v2 cgroup at clone time
	outR    *os.File // the command's stdout
	errR    *os.File // the command's stderr
	cfgW    *os.File // shimConfigFD
	repR    *os.File // shimReportFD
	treeW   *os.File // shimTreeFD; nil without detachHost
	started time.Time
}

// ended reports whether the shim has exited (it is not reaped yet).
func (sp *shimProc) ended() bool {
	var info [128]byte // siginfo_t; si_pid stays 0 while it runs
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, process.PPID, uintptr(sp.cmd.Process.Pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOHANG|syscall.WNOWAIT, 0, 0)
	return e != 0 || *(*int32)(unsafe.Pointer(&info[16])) != 0
}

func (sp *shimProc) closeAll() {
	for _, f := range []*os.File{sp.outR, sp.errR, sp.cfgW, sp.repR, sp.treeW, sp.mntNS} {
		if f != nil {
			f.Close()
		}
	}
}

// startShim starts a shim in new namespaces (a network namespace always;
// sandbox attaches the route out of a command that may use the network),
// in cg's v2 cgroup when cg is given, with stdin as the command's
// standard input (nil: /dev/null). The shim waits for its configuration
// before it does anything.
func (n *Backend) startShim(cg *cgroup, stdin *os.File) (*shimProc, error) {
	// Each pipe is checked as it is made: counting the descriptors made
	// would let a missing pipe pass, and a nil *os.File reach the shim's
	// descriptors or the readers.
	var files []*os.File
	var failed error
	pipe := func() (r, w *os.File) {
		if failed != nil {
			return nil, nil
		}
		if r, w, failed = os.Pipe(); failed != nil {
			return nil, nil
		}
		files = append(files, r, w)
		return r, w
	}
	outR, outW := pipe()
	errR, errW := pipe()
	cfgR, cfgW := pipe()
	repR, repW := pipe()
	extra := []*os.File{cfgR, repW} // shimConfigFD, shimReportFD
	var treeR, treeW *os.File
	if n.detachHost && failed == nil {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			failed = os.NewSyscallError("socketpair", err)
		} else {
			treeR, treeW = os.NewFile(uintptr(fds[0]), "tree"), os.NewFile(uintptr(fds[1]), "tree")
			files = append(files, treeR, treeW)
			extra = append(extra, treeR) // shimTreeFD
		}
	}
	if failed != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("create the sandbox's pipes: %w", failed)
	}

	// Every sandbox has a network namespace of its own; one whose command
	// may use the network gets a route out of it (attachNetwork), never
	// the host's namespace with its loopback services.
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET)
	attr := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if n.userns {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	sp := &shimProc{outR: outR, errR: errR, cfgW: cfgW, repR: repR, treeW: treeW}
	if cg != nil && cg.fd != nil {
		attr.UseCgroupFD, attr.CgroupFD, sp.inV2 = true, int(cg.fd.Fd()), true
	}
	env := shimEnviron()
	newCmd := func() *exec.Cmd {
		return &exec.Cmd{
			Path:        n.init,
			Args:        []string{InitName},
			Env:         env,
			Stdin:       stdin, // nil or an *os.File: passed to the child as is
			Stdout:      outW,
			Stderr:      errW,
			ExtraFiles:  extra,
			SysProcAttr: attr,
		}
	}
	sp.started = time.Now()
	sp.cmd = newCmd()
	err := sp.cmd.Start()
	if err != nil && sp.inV2 {
		// A kernel without CLONE_INTO_CGROUP (before 5.7): the shim is
		// placed by writing cgroup.procs instead, before it is released.
		attr.UseCgroupFD, attr.CgroupFD, sp.inV2 = false, 0, false
		sp.cmd = newCmd()
		err = sp.cmd.Start()
	}
	outW.Close()
	errW.Close()
	cfgR.Close()
	repW.Close()
	if treeR != nil {
		treeR.Close()
	}
	if err != nil {
		sp.closeAll()
		return nil, err
	}
	sp.mntNS, _ = os.Open(fmt.Sprintf("/proc/%d/ns/mnt", sp.cmd.Process.Pid)) // nil: torn down at exit instead
	// The shim assembles the root while it waits for the command.
	rc := rootConfig{ReadOnly: n.readOnly, Hide: n.hide, TmpBytes: defaultTmpBytes, GoCache: n.cfg.GoCache, Unreachable: n.unreachable, DetachHost: n.detachHost}
	b, _ := json.Marshal(rc)
	_, _ = sp.cfgW.Write(b) // a shim that died early shows in its exit status
	return sp, nil
}

// configure hands the shim its command: cfg, then, when the shim takes
// it passed (treeW), the workspace, which the shim waits for only once it
// has woken up and read cfg. Both are sent once, so their descriptors are
// closed here rather than held until the shim's teardown: a command that
// runs long would hold them all along, and one sandbox after another
// would leave them to the garbage collector. The error is the
// workspace's (the shim then waits for it: discard it); a shim that died
// early shows in its exit status instead.
func (sp *shimProc) configure(cfg *shimConfig) error {
	b, _ := json.Marshal(cfg)
	_, _ = sp.cfgW.Write(b)
	sp.cfgW.Close()
	sp.cfgW = nil
	if sp.treeW == nil {
		return nil
	}
	var err error
	if cfg.Dir != "" {
		err = sendWorkspace(sp.treeW, cfg.Dir) // queued on the shim's end: it outlives this one
	}
	sp.treeW.Close()
	sp.treeW = nil
	return err
}

// withVar returns env with key set to value, replacing any setting of it.
func withVar(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// shimEnviron returns the shim's whole environment: the marker, naming
// the build the shim must be of, one OS thread for Go code, and (for
// race-enabled builds, which tests use) no one-second sleep at exit.
func shimEnviron() []string {
	return []string{shimEnv + "=" + wantBuild(), "GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0"}
}

// wantBuild is the build a Backend asks of a sandbox's init: its own.
var wantBuild = shimBuild

// defaultTmpBytes sizes /tmp and /dev/shm of a sandbox before its command
// is known; the shim resizes them to the command's memory cap.
var defaultTmpBytes = protocol.Limits{}.WithDefaults().MemoryBytes

// sandbox runs cfg in a sandbox: a warm one when one is waiting and the
// network is denied, else a new one. It sets the caps on the sandbox's
// cgroups, hands the shim cfg, enforces the wall and cgroup caps while
// it runs, and tears everything down. It returns an error only when the
// sandbox could not be started.
func (n *Backend) sandbox(ctx context.Context, cfg *shimConfig, lim protocol.Limits, network bool) (*outcome, error) {
	n.setBusy(1)
	defer n.setBusy(-1)
	var sp *shimProc
	if !network && !cfg.Probe {
		select {
		case sp = <-n.warm: // nil when the pool is off
			n.setWaiting(sp, false)
		default:
		}
		if sp != nil && (sp.ended() || sp.cg != nil && sp.cg.setLimits(lim.MemoryBytes, lim.Pids) != nil) {
			n.discard(sp) // it died while it waited: start a new one
			sp = nil
		}
		if sp != nil {
			sp.started = time.Now()
		}
	}
	if sp == nil {
		var err error
		if sp, err = n.newShim(func(cg *cgroup) error { return cg.setLimits(lim.MemoryBytes, lim.Pids) }, nil); err != nil {
			return nil, protocol.Errorf(protocol.CodeSandbox, "could not start the sandbox for %s: %v", process.Argv0(cfg.Argv), err)
		}
	}
	// The shim waits for its configuration, so it has run nothing before
	// it is in all its cgroups with their caps set, and, when it may use
	// the network, before its route out is up.
	cg := sp.cg
	pid := sp.cmd.Process.Pid
	if network {
		stop, err := n.attachNetwork(pid)
		if err != nil {
			n.discard(sp)
			var pe *protocol.Error
			if errors.As(err, &pe) {
				return nil, pe
			}
			return nil, protocol.Errorf(protocol.CodeSandbox, "could not give the sandbox of %s its network: %v", process.Argv0(cfg.Argv), err)
		}
		defer stop()
	}
	kill := func() {
		_ = syscall.Kill(pid, syscall.SIGKILL) // the PID namespace dies with its init
		if cg != nil {
			cg.killAll()
		}
	}
	if err := sp.configure(cfg); err != nil {
		err = n.setupFailed(sp, err)
		return nil, protocol.Errorf(protocol.CodeSandbox, "could not set up the sandbox for %s: %v", process.Argv0(cfg.Argv), err)
	}

	stdout, stderr := sandbox.NewCapture(lim.OutputBytes), sandbox.NewCapture(lim.OutputBytes)
	var readers sync.WaitGroup
	readers.Go(func() { io.Copy(stdout, sp.outR) })
	readers.Go(func() { io.Copy(stderr, sp.errR) })
	reportc := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(sp.repR)
		reportc <- b
	}()
	exited := make(chan struct{})
	go func() {
		_ = sp.cmd.Wait() // a non-zero exit is an *exec.ExitError; the status is in ProcessState
		close(exited)
	}()

	o := &outcome{}
	wall := time.NewTimer(time.Duration(lim.WallSecs) * time.Second)
	defer wall.Stop()
	var tick <-chan time.Time
	if cg != nil && (n.cg.has("memory") || n.cg.has("pids")) {
		t := time.NewTicker(capPollInterval)
		defer t.Stop()
		tick = t.C
	}
	done := ctx.Done()
	var report []byte
wait:
	for {
		select {
		case <-exited:
			break wait
		case report = <-reportc:
			// The shim writes its report once nothing else runs in the
			// sandbox (endAll): the command is over, and the shim's own
			// exit is left to the reaper.
			reportc = nil
			if len(report) > 0 && json.Unmarshal(report, &o.report) == nil {
				o.reported = true
				break wait
			}
		case <-wall.C:
			o.killedBy = sandbox.CapWall
			kill()
		case <-done:
			o.cancelled = true
			done = nil
			kill()
		case <-tick:
			if c := cg.capHit(); c != "" && o.killedBy == "" {
				o.killedBy = c
				tick = nil
				kill()
			}
		}
	}
	o.duration = time.Since(sp.started)
	if !o.reported {
		// The shim ended without reporting, or reported after a kill.
		o.shimState = sp.cmd.ProcessState
		if reportc != nil {
			report = <-reportc
		}
		o.reported = len(report) > 0 && json.Unmarshal(report, &o.report) == nil
	}
	if o.reported && o.report.Ran && o.killedBy == sandbox.CapWall {
		o.killedBy = "" // the command ended on its own before the kill landed
	}
	o.capHit = o.killedBy
	if cg != nil {
		if c := cg.capHit(); o.capHit == "" && c != "" {
			o.capHit = c
		}
	}
	n.release(cg, sp.mntNS, exited)
	sp.mntNS = nil

	o.escaped = !process.WaitTimeout(&readers, process.PipeGrace)
	sp.outR.Close() // unblocks a reader still waiting on an escaped holder
	sp.errR.Close()
	readers.Wait()
	sp.repR.Close()
	o.stdout, o.stderr = stdout.String(), stderr.String()
	return o, nil
}

// newShim creates a command's cgroups, calls prepare on them (to set its
// caps), and starts a shim in them, with stdin as the command's standard
// input (nil: /dev/null).
func (n *Backend) newShim(prepare func(*cgroup) error, stdin *os.File) (*shimProc, error) {
	var cg *cgroup
	if n.cg != nil {
		c, err := newCgroup(n.cg, n.owner, n.cfg.CPUs)
		if err != nil {
			return nil, fmt.Errorf("create cgroups: %w", err)
		}
		cg = c
		if prepare != nil {
			if err := prepare(cg); err != nil {
				n.removeCgroup(cg)
				return nil, fmt.Errorf("set cgroup limits: %w", err)
			}
		}
	}
	sp, err := n.startShim(cg, stdin)
	if err != nil {
		if cg != nil {
			n.removeCgroup(cg)
		}
		return nil, err
	}
	sp.cg = cg
	if cg != nil {
		if err := cg.place(sp.cmd.Process.Pid, sp.inV2); err != nil {
			n.discard(sp)
			return nil, fmt.Errorf("place the sandbox in its cgroups: %w", err)
		}
	}
	return sp, nil
}

// setupFailed discards sp, whose configure failed with err, and returns
// why: the shim's own report, when it wrote one (an init of another build
// reports and exits before it takes the workspace, whose passing then
// fails), else err.
func (n *Backend) setupFailed(sp *shimProc, err error) error {
	_ = sp.cmd.Process.Kill()
	_ = sp.cmd.Wait() // the PID namespace is gone with it: the report pipe ends
	b, _ := io.ReadAll(sp.repR)
	var r shimReport
	if json.Unmarshal(bytes.TrimLeft(b, "\n"), &r) == nil && r.Err != "" {
		err = errors.New(r.Err)
	}
	n.discard(sp)
	return err
}

// discard kills a shim that will not be used and removes its cgroups.
func (n *Backend) discard(sp *shimProc) {
	_ = sp.cmd.Process.Kill()
	_ = sp.cmd.Wait()
	sp.closeAll()
	if sp.cg != nil {
		n.removeCgroup(sp.cg)
	}
}

// removeCgroup removes cg, or keeps it for retryStale.
func (n *Backend) removeCgroup(cg *cgroup) {
	if err := cg.remove(); err != nil {
		n.mu.Lock()
		n.stale = append(n.stale, cg)
		n.mu.Unlock()
	}
}

// refillDelay is how long fill waits at most, once a Run has taken a
// warm shim and the pool is still full (fill's spare took its place),
// for the Runs under way to end before it starts the next shim. Starting
// one (the binary's start-up, the root's mounts, the cgroup moves) costs
// several milliseconds of CPU and some of the same kernel locks a
// command's setup and teardown take; a short command should not share
// the machine with it, and a long one should not leave the pool short
// for long. Once the pool is short of one, fill refills at once.
const refillDelay = 20 * time.Millisecond

// setBusy counts a Run beginning (+1) or ending (-1), and wakes fill.
func (n *Backend) setBusy(d int) {
	if n.kick == nil {
		return
	}
	n.mu.Lock()
	n.busy += d
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// waitQuiet returns true once no Run is under way, the pool is not full,
// or refillDelay has passed; false when ctx ends first.
func (n *Backend) waitQuiet(ctx context.Context) bool {
	t := time.NewTimer(refillDelay)
	defer t.Stop()
	for {
		n.mu.Lock()
		quiet := n.busy == 0 || len(n.warm) < cap(n.warm)
		n.mu.Unlock()
		if quiet {
			return true
		}
		select {
		case <-n.kick:
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// fill keeps n.warm full of started shims, each in fresh cgroups with the
// default caps (a command with other limits sets its own) and with its
// root assembled, until ctx ends.
func (n *Backend) fill(ctx context.Context) {
	def := sandbox.LimitsOf(protocol.Limits{})
	for {
		if !n.waitQuiet(ctx) {
			return
		}
		sp, err := n.newShim(func(cg *cgroup) error { return cg.setLimits(def.MemoryBytes, def.Pids) }, nil)
		if err == nil && !sp.awaitReady(ctx) {
			n.discard(sp) // it failed to assemble its root, or ctx ended
			sp, err = nil, errors.New("not ready")
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second): // out of processes or files: try again later
				continue
			}
		}
		n.setWaiting(sp, true)
		n.parked.Store(true)
		select {
		case n.warm <- sp:
			n.parked.Store(false)
		case <-ctx.Done():
			n.parked.Store(false)
			n.setWaiting(sp, false)
			n.discard(sp)
			return
		}
	}
}

// awaitReady waits for the shim's sign that its root is assembled (a
// newline on its report pipe, before any report), and reports whether it
// came before ctx ended.
func (sp *shimProc) awaitReady(ctx context.Context) bool {
	stop := context.AfterFunc(ctx, func() { _ = sp.repR.SetReadDeadline(time.Now()) })
	var b [1]byte
	k, err := sp.repR.Read(b[:])
	return stop() && k == 1 && b[0] == '\n' && err == nil // stop false: the deadline is set
}

// Close kills the warm sandboxes and waits until the cgroups of finished
// commands are removed. It does not stop commands that are running; Run
// may still be called, and then starts every sandbox afresh and removes
// its cgroups itself. Close is idempotent and always returns nil.
func (n *Backend) Close() error {
	n.closeOnce.Do(func() {
		if n.stopFill != nil {
			n.stopFill()
			n.filling.Wait()
		drain:
			for {
				select {
				case sp := <-n.warm:
					n.setWaiting(sp, false)
					n.discard(sp)
				default:
					break drain
				}
			}
		}
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		close(n.reap)
		n.reaping.Wait()
	})
	return nil
}

// reapQueue bounds the cgroups waiting for the reaper; beyond it, Run
// removes them itself.
const reapQueue = 64

// remains are what is left of a finished command's sandbox: its empty
// cgroups and its mount namespace, which no process uses any more.
type remains struct {
	cg    *cgroup  // nil without cgroups
	mntNS *os.File // nil if it could not be held
	// exited is closed once the sandbox's init has exited and been
	// reaped; nil when it already has.
	exited <-chan struct{}
}

// release removes what is left of a finished command's sandbox once its
// init has exited (exited closed; nil if it has): through the reaper, so
// that Run waits neither for the init's exit, nor for the kernel's cgroup_mutex
// (which another sandbox's cgroup placement may hold across an RCU grace
// period) nor for the unmounting of the sandbox's mounts; here when the
// reaper is stopped or its queue is full.
func (n *Backend) release(cg *cgroup, mntNS *os.File, exited <-chan struct{}) {
	r := remains{cg, mntNS, exited}
	n.mu.Lock()
	if !n.closed {
		select {
		case n.reap <- r:
			n.mu.Unlock()
			return
		default:
		}
	}
	n.mu.Unlock()
	n.clear(r)
}

// clear waits for r's init to exit and removes r.
func (n *Backend) clear(r remains) {
	if r.exited != nil {
		<-r.exited
	}
	if r.cg != nil && r.cg.populated() {
		r.cg.killAll() // nothing should be left: the PID namespace is gone
	}
	if r.mntNS != nil {
		r.mntNS.Close() // the last reference: the kernel unmounts everything now
	}
	if r.cg != nil {
		n.removeCgroup(r.cg)
	}
}

// reaper clears released remains, and retries earlier failures to remove
// cgroups, until Close closes n.reap.
func (n *Backend) reaper() {
	for r := range n.reap {
		n.clear(r)
		n.retryStale()
	}
	n.retryStale()
}

// retryStale removes cgroups whose removal failed earlier.
func (n *Backend) retryStale() {
	n.mu.Lock()
	stale := n.stale
	n.stale = nil
	n.mu.Unlock()
	var left []*cgroup
	for _, cg := range stale {
		if cg.remove() != nil {
			left = append(left, cg)
		}
	}
	if len(left) > 0 {
		n.mu.Lock()
		n.stale = append(n.stale, left...)
		n.mu.Unlock()
	}
}
