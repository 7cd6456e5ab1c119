//go:build linux && (amd64 || arm64)

package native

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

// shimEnv marks the sandbox's init process (harness-sandbox-init, or the
// sandboxer's own binary run again), started by a Backend in fresh
// namespaces with shimEnv set to the Backend's shimBuild and nothing else
// in its environment.
const shimEnv = "HARNESS_SANDBOX_SHIM"

// The shim's inherited descriptors besides stdio: it reads its shimConfig
// from shimConfigFD (the parent writes it once the shim is in its
// cgroups, then closes the pipe) and writes to shimReportFD a newline
// once its root is assembled, then one shimReport.
//
// With rootConfig.DetachHost, shimTreeFD is a socket on which the parent
// passes the workspace, a clone of its mounts (cloneTree), just before
// the command's configuration.
const (
	shimConfigFD = 3
	shimReportFD = 4
	shimTreeFD   = 5
)

// newRootDir is where the shim assembles the sandbox's root filesystem
// before pivoting into it. The tmpfs is mounted in the sandbox's own mount
// namespace, so the host's directory of that name is only hidden there.
var newRootDirs = []string{"/tmp", "/mnt", "/run", "/var/tmp"}

// shimWired records that RunShimIfRequested ran in this process and found
// no shim request: the binary is wired, and re-executing it for a sandbox
// will run the shim rather than the program's main.
var shimWired atomic.Bool

// RunShimIfRequested turns the process into a sandbox's init when a Backend
// started it, and never returns then; otherwise it returns at once.
//
// Without harness-sandbox-init beside it (see Config.Init), a Backend runs
// every command through a re-executed copy of the current binary
// (/proc/self/exe), so every program that uses New must call
// RunShimIfRequested first thing in main, before flags are parsed or
// anything else starts, and a test package that uses it must do the same
// in TestMain:
//
//	func main() {
//		native.RunShimIfRequested()
//		...
//	}
//
// New refuses to work (ErrUnavailable) in a process that has not called
// it and has no harness-sandbox-init to start instead.
func RunShimIfRequested() {
	if os.Getenv(shimEnv) == "" {
		shimWired.Store(true)
		return
	}
	if os.Getpid() != 1 {
		// Not started by a Backend (which makes the shim PID 1 of a new PID
		// namespace): the variable leaked in from elsewhere.
		os.Unsetenv(shimEnv)
		shimWired.Store(true)
		return
	}
	os.Exit(runShim())
}

// InitMain is the whole of harness-sandbox-init (cmd/harness-sandbox-init):
// a program that is nothing but a sandbox's init, which a Backend starts
// for each sandbox instead of the running program (Config.Init). Its
// start-up is a small program's, where the running program (a sandboxer,
// the harness command line) first initialises every package it holds:
// most of a sandbox's cost, without it. With the one argument --build it
// prints the build of its code (New compares it with its own) and exits 0;
// run any other way than by a Backend, it says what it is and exits 2.
func InitMain() {
	if len(os.Args) == 2 && os.Args[1] == "--build" {
		fmt.Println(shimBuild())
		os.Exit(0)
	}
	if os.Getenv(shimEnv) == "" || os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "harness-sandbox-init is the init of a native sandbox: a sandboxer starts it, in a sandbox of its own, for each command; it does nothing run by hand")
		os.Exit(2)
	}
	os.Exit(runShim())
}

// rootConfig is the first of the two JSON values the parent writes on
// shimConfigFD, at once: what the sandbox's filesystem looks like, the
// same for every command of a Backend. The shim assembles that root before
// a command is known (prepareRoot), so that a warm shim has it ready.
type rootConfig struct {
	ReadOnly []string `json:"read_only"` // host paths shown read-only at the same path
	Hide     []string `json:"hide"`      // paths inside ReadOnly masked with an empty file or directory
	TmpBytes int64    `json:"tmp_bytes"` // size of the private /tmp and /dev/shm
	GoCache  string   `json:"go_cache"`  // host Go build cache shown through an overlay at SandboxGoCache; "" for none
	// Unreachable are the prefixes the sandbox's network namespace routes
	// nowhere: the host's own addresses and the cluster's (NATS, Redis), so
	// a command that may use the network reaches neither through its route
	// out.
	Unreachable []string `json:"unreachable,omitempty"`
	// DetachHost: the parent passes the workspace on shimTreeFD, so the
	// host's root is detached with the rest of the root's assembly,
	// before the command is known, rather than kept to bind the
	// workspace from.
	DetachHost bool `json:"detach_host,omitempty"`
}

// shimConfig is the second JSON value on shimConfigFD, written once the
// shim is in its cgroups with their caps set: the command.
type shimConfig struct {
	Argv      []string `json:"argv"`
	Dir       string   `json:"dir"` // the workspace, a real path; the working directory
	Env       []string `json:"env"` // the command's complete environment
	TmpBytes  int64    `json:"tmp_bytes"`
	CPUSecs   int      `json:"cpu_secs"`
	OpenFiles int      `json:"open_files"`
	Landlock  int      `json:"landlock"` // Landlock ABI to use; 0: none
	Seccomp   bool     `json:"seccomp"`
	Probe     bool     `json:"probe"` // set everything up, then exit without running anything
}

// shimReport is what the shim tells the parent, as JSON on shimReportFD:
// either why the command could not start (Err, with Errno when the start
// itself failed), or how it ended.
type shimReport struct {
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"` // the errno of the failed execve, 0 for a setup failure
	Ran   bool   `json:"ran,omitempty"`
	// Status is the command's wait status; CPUNanos its own CPU time (user
	// plus system, not counting its children).
	Status   uint32 `json:"status,omitempty"`
	CPUNanos int64  `json:"cpu_ns,omitempty"`
}

// runShim is the shim's main: set the sandbox up, start the command as
// PID 2 and reap every process until the command ends; then kill and reap
// whatever else still runs in the namespace and let go of the command's
// output (endAll), report, and exit. The report, not the exit, tells the
// parent the command is over: nothing of it runs by then, and the shim's
// exit, with its mounts' teardown, is left to the parent's reaper.
func runShim() int {
	syscall.CloseOnExec(shimConfigFD)
	syscall.CloseOnExec(shimReportFD)
	syscall.CloseOnExec(shimTreeFD)
	report := func(r shimReport) int {
		endAll()
		b, _ := json.Marshal(r)
		_, _ = syscall.Write(shimReportFD, b)
		// The report is the parent's sign that the sandbox is over: it
		// does not wait for the shim's own exit.
		syscall.Close(shimReportFD)
		if r.Err != "" {
			return 1
		}
		return 0
	}
	// Everything the shim does at the end relies on its being PID 1 of a
	// new PID namespace (endAll): refuse to run anything otherwise.
	if pid := syscall.Getpid(); pid != 1 {
		return report(shimReport{Err: fmt.Sprintf("the sandbox's init is PID %d, not 1 of a PID namespace of its own", pid)})
	}
	if v := os.Getenv(shimEnv); v != shimBuild() {
		return report(shimReport{Err: fmt.Sprintf("the sandbox's init is of build %s and the sandboxer of build %s: they are of different builds, and a sandbox is confined only by the sandboxer's own code; install the %s built with the sandboxer beside it (or remove it, and the sandboxer starts itself instead)", shimBuild(), v, InitName)})
	}
	// The command runs as the shim's uid, without capabilities. Without
	// this, it could ptrace the shim's thread that dropped them too, and so
	// reach the threads that did not; non-dumpable, the shim can be traced
	// (or its /proc files read) only with CAP_SYS_PTRACE.
	if err := prctl(prSetDumpable, 0); err != nil {
		return report(shimReport{Err: "make the sandbox's init non-dumpable: " + err.Error()})
	}
	// As PID 1 the shim receives only the signals it handles. Handle, and
	// drop, every one, so that a process in the sandbox cannot end it
	// early (SIGTERM would, and a SIGABRT sent with kill makes the Go
	// runtime crash). The command gets the default handlers back.
	signal.Notify(make(chan os.Signal, 1))

	dec := json.NewDecoder(os.NewFile(shimConfigFD, "config"))
	var rc rootConfig
	if err := dec.Decode(&rc); err != nil {
		return report(shimReport{Err: "read the sandbox's root configuration: " + err.Error()})
	}
	if err := prepareRoot(&rc); err != nil {
		return report(shimReport{Err: err.Error()})
	}
	// The root is ready: a newline, which the report's JSON may follow,
	// tells the pool so.
	_, _ = syscall.Write(shimReportFD, []byte{'\n'})
	var cfg shimConfig
	if err := dec.Decode(&cfg); err != nil {
		return report(shimReport{Err: "read the command's configuration: " + err.Error()})
	}
	// The rlimits first: with rc.DetachHost the workspace follows the
	// configuration, and is on its way meanwhile.
	if err := setRlimits(&cfg); err != nil {
		return report(shimReport{Err: err.Error()})
	}
	if err := finishRoot(&rc, &cfg); err != nil {
		return report(shimReport{Err: err.Error()})
	}
	prog, errno := "", 0
	if !cfg.Probe {
		if prog, errno = findProgram(cfg.Argv[0], cfg.Dir, cfg.Env); errno != 0 {
			return report(shimReport{Err: "look up the program", Errno: errno})
		}
	}

	// Everything below changes the calling thread only (no_new_privs,
	// Landlock, seccomp, capabilities): the command is forked from this
	// thread and inherits it; the shim's other threads need none of it.
	runtime.LockOSThread()
	if err := confineThread(&cfg); err != nil {
		return report(shimReport{Err: err.Error()})
	}
	if cfg.Probe {
		return report(shimReport{})
	}
	pid, err := syscall.ForkExec(prog, cfg.Argv, &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		var en syscall.Errno
		if !errors.As(err, &en) {
			en = syscall.EINVAL
		}
		return report(shimReport{Err: "start the command", Errno: int(en)})
	}
	r := shimReport{Ran: true}
	r.Status, r.CPUNanos = reapUntil(pid)
	return report(r)
}

// reapUntil reaps every process that ends in the namespace (orphans are
// re-parented to the shim) until pid ends, and returns pid's wait status
// and its own CPU time, read while it is a zombie.
func reapUntil(pid int) (uint32, int64) {
	for {
		var info [128]byte // siginfo_t
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, 0 // ECHILD: cannot happen before pid is reaped
		}
		// si_pid follows si_signo, si_errno, si_code, aligned to 8 bytes
		// on 64-bit systems.
		off := 12
		if unsafe.Sizeof(uintptr(0)) == 8 {
			off = 16
		}
		who := int(*(*int32)(unsafe.Pointer(&info[off])))
		var cpu int64
		if who == pid {
			cpu = int64(process.CPUTime(pid))
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(who, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		if who == pid {
			return uint32(ws), cpu
		}
	}
}

// endAll kills and reaps every process left in the sandbox (daemons,
// orphans: all of them descendants of the shim, PID 1 of the namespace),
// then closes the shim's standard streams, the last holders of the
// command's pipes. Once it returns, nothing of the command runs and its
// output has ended, so the parent may return the result before the shim
// has exited.
//
// kill(-1) is what ends them, and it is safe only from PID 1 of a PID
// namespace of the sandbox's own: from any other process it would reach
// every process the shim's uid may signal, root's being all of the
// host's. Elsewhere endAll kills nothing (and runShim has refused to run
// anything).
func endAll() {
	killRest()
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	for fd := range 3 {
		if err == nil {
			_ = syscall.Dup3(null, fd, 0)
		} else {
			syscall.Close(fd)
		}
	}
	if err == nil {
		syscall.Close(null)
	}
}

// killRest kills and reaps every process of the shim's PID namespace but
// the shim, when the shim is its PID 1; otherwise it does nothing (see
// endAll).
func killRest() {
	if syscall.Getpid() != 1 {
		return
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|wALL, nil); err == syscall.ECHILD {
		return // none left
	}
	// kill(-1) from PID 1 reaches every other process of its PID
	// namespace, those being forked included.
	_ = syscall.Kill(-1, syscall.SIGKILL)
	for {
		if _, err := syscall.Wait4(-1, &ws, wALL, nil); err != nil && err != syscall.EINTR {
			return // ECHILD: none left
		}
	}
}

// wALL is __WALL for wait4(2): children of any kind, clones included.
const wALL = 0x40000000

// pAll is P_ALL for waitid(2).
const pAll = 0

// findProgram resolves name as lookPath does, inside the sandbox's view,
// and returns the errno to report when it is not there.
func findProgram(name, dir string, env []string) (string, int) {
	p, err := process.LookPath(name, dir, env)
	if err != nil {
		return "", int(syscall.ENOENT)
	}
	return p, 0
}

// setRlimits applies the CPU-time and open-file caps and disables core
// dumps. They are process-wide and inherited by the command: RLIMIT_CPU
// sends SIGXCPU at CPUSecs and SIGKILL a second later.
func setRlimits(cfg *shimConfig) error {
	set := func(res int, name string, soft, hard uint64) error {
		var old syscall.Rlimit
		if err := syscall.Getrlimit(res, &old); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		hard = min(hard, old.Max) // raising needs CAP_SYS_RESOURCE
		soft = min(soft, hard)
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		return nil
	}
	if cfg.Probe {
		return nil
	}
	if err := set(syscall.RLIMIT_CPU, "RLIMIT_CPU", uint64(cfg.CPUSecs), uint64(cfg.CPUSecs)+1); err != nil {
		return err
	}
	if err := set(syscall.RLIMIT_NOFILE, "RLIMIT_NOFILE", uint64(cfg.OpenFiles), uint64(cfg.OpenFiles)); err != nil {
		return err
	}
	return set(rlimitCore, "RLIMIT_CORE", 0, 0)
}

// rlimitCore is RLIMIT_CORE.
const rlimitCore = 4

// Flags of mount_setattr(2).
const (
	sysMountSetattr  = 442
	atFDCWD          = -100
	atRecursive      = 0x8000
	mountAttrRdonly  = 0x1
	mountAttrNosuid  = 0x2
	mountAttrNodev   = 0x4
	mountAttrNoexec  = 0x8
	attrReadOnly     = mountAttrRdonly | mountAttrNosuid | mountAttrNodev
	attrWritable     = mountAttrNosuid | mountAttrNodev
	attrDevDirectory = mountAttrRdonly | mountAttrNosuid | mountAttrNoexec
)

// setAttr sets mount attributes on the mount at path (and, recursive, on
// every mount below it).
func setAttr(path string, attr uint64, recursive bool) error {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	a := struct{ set, clr, prop, userns uint64 }{set: attr}
	flags := uintptr(0)
	if recursive {
		flags = atRecursive
	}
	dirfd := atFDCWD
	_, _, e := syscall.Syscall6(sysMountSetattr, uintptr(dirfd), uintptr(unsafe.Pointer(p)), flags, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0)
	if e == syscall.ENOSYS {
		// Before Linux 5.12: remount the top mount only.
		var st syscall.Statfs_t
		if err := syscall.Statfs(path, &st); err != nil {
			return err
		}
		keep := uintptr(st.Flags) & (syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_RDONLY)
		return syscall.Mount("", path, "", syscall.MS_REMOUNT|syscall.MS_BIND|keep|uintptr(attr&0xf), "")
	}
	if e != 0 {
		return e
	}
	return nil
}

// mountErr wraps a failed mount step.
func mountErr(what, path string, err error) error {
	return fmt.Errorf("%s %s: %w", what, path, err)
}

// hostRoot is where prepareRoot leaves the host's root inside the new
// one, for finishRoot to bind the workspace from and then detach.
const hostRoot = "/.host"

// prepareRoot builds the sandbox's filesystem view, all but the workspace,
// and pivots into it:
//
//   - a tmpfs root holding only mount points and symlinks (made read-only
//     by finishRoot);
//   - rc.ReadOnly (the system directories) bound read-only, nosuid,
//     nodev, at their host paths, symlinks (/bin -> usr/bin) recreated;
//   - a private tmpfs /tmp (mode 1777, size rc.TmpBytes);
//   - /dev: a read-only tmpfs with null, zero, full, random and urandom
//     bound from the host, the fd/stdin/stdout/stderr links, and a
//     private /dev/shm; no terminals;
//   - a fresh /proc for the new PID namespace, with /proc/sys and the
//     other kernel knobs read-only and the kernel's memory and keys masked;
//   - rc.Hide masked with an empty file or directory;
//   - the host's root at hostRoot, until finishRoot detaches it.
//
// Then the hostname is "sandbox" and, with the network denied, the new
// network namespace's loopback is up.
func prepareRoot(rc *rootConfig) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return mountErr("make private", "/", err)
	}
	root := ""
	for _, d := range newRootDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			root = d
			break
		}
	}
	if root == "" {
		return errors.New("no directory to mount the sandbox's root on")
	}
	// Open every source while the host's tree is still in view: the new
	// root hides what is below its mount point.
	var srcs []mountSource
	defer func() {
		for _, s := range srcs {
			if s.fd > 0 {
				syscall.Close(s.fd)
			}
		}
	}()
	for _, p := range rc.ReadOnly {
		s, err := openSource(p)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return mountErr("open", p, err)
		}
		srcs = append(srcs, s)
	}
	nRO := len(srcs)
	goCache := -1 // the index in srcs of the Go cache, if any
	if rc.GoCache != "" {
		if s, err := openSource(rc.GoCache); err == nil && s.dir {
			goCache = len(srcs)
			srcs = append(srcs, s)
		} else if err == nil {
			syscall.Close(s.fd)
		}
	}
	nBefore := len(srcs)
	devNodes := []string{"null", "zero", "full", "random", "urandom"}
	for _, n := range devNodes {
		s, err := openSource("/dev/" + n)
		if err != nil {
			return mountErr("open", "/dev/"+n, err)
		}
		srcs = append(srcs, s)
	}

	if err := syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return mountErr("mount the root tmpfs on", root, err)
	}
	in := func(p string) string { return filepath.Join(root, p) }
	for _, s := range srcs[:nRO] {
		if s.link != "" {
			if err := os.MkdirAll(filepath.Dir(in(s.path)), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(s.link, in(s.path)); err != nil {
				return mountErr("create symlink", s.path, err)
			}
			continue
		}
		if err := s.bind(in(s.path), attrReadOnly); err != nil {
			return err
		}
	}
	tmpOpts := "mode=1777,size=" + strconv.FormatInt(max(rc.TmpBytes, 1<<20), 10)
	if err := os.MkdirAll(in("/tmp"), 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", in("/tmp"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpOpts); err != nil {
		return mountErr("mount tmpfs on", "/tmp", err)
	}

	dev := in("/dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dev, "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return mountErr("mount tmpfs on", "/dev", err)
	}
	if goCache >= 0 {
		overlayGoCache(in, srcs[goCache].fd)
	}
	for i, n := range devNodes {
		if err := srcs[nBefore+i].bind(filepath.Join(dev, n), 0); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpOpts); err != nil {
		return mountErr("mount tmpfs on", "/dev/shm", err)
	}
	if err := setAttr(dev, attrDevDirectory, false); err != nil {
		return mountErr("make read-only", "/dev", err)
	}

	proc := in("/proc")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return mountErr("mount proc on", "/proc", err)
	}
	for _, p := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs"} {
		t := filepath.Join(proc, p)
		if _, err := os.Lstat(t); err != nil {
			continue
		}
		if err := syscall.Mount(t, t, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return mountErr("bind", "/proc/"+p, err)
		}
		if err := setAttr(t, attrReadOnly|mountAttrNoexec, true); err != nil {
			return mountErr("make read-only", "/proc/"+p, err)
		}
	}
	hide := append([]string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/acpi", "/proc/scsi"}, rc.Hide...)
	for _, h := range hide {
		if err := mask(in(h), filepath.Join(dev, "null")); err != nil {
			return mountErr("hide", h, err)
		}
	}

	// Pivot, keeping the host's root at hostRoot for finishRoot.
	if err := os.Mkdir(in(hostRoot), 0o700); err != nil {
		return err
	}
	if err := syscall.Chdir(root); err != nil {
		return err
	}
	if err := syscall.PivotRoot(".", hostRoot[1:]); err != nil {
		return mountErr("pivot_root into", root, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	if err := syscall.Sethostname([]byte("sandbox")); err != nil {
		return fmt.Errorf("set the hostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bring up the loopback interface: %w", err)
	}
	if err := unreachableRoutes(rc.Unreachable); err != nil {
		return err
	}
	if rc.DetachHost {
		return detachHost()
	}
	return nil
}

// detachHost detaches the host's root, left at hostRoot by the pivot.
func detachHost() error {
	if err := syscall.Unmount(hostRoot, syscall.MNT_DETACH); err != nil {
		return mountErr("detach the host's root from", hostRoot, err)
	}
	return os.Remove(hostRoot)
}

// finishRoot completes the root for one command: /tmp and /dev/shm
// resized to cfg.TmpBytes; the workspace cfg.Dir (none when it is empty)
// read-write, nosuid, nodev, at its host path, received from the parent
// (rc.DetachHost) or bound from the host's root, which is then detached;
// the root made read-only.
func finishRoot(rc *rootConfig, cfg *shimConfig) error {
	if cfg.TmpBytes != rc.TmpBytes {
		opts := "size=" + strconv.FormatInt(max(cfg.TmpBytes, 1<<20), 10)
		for _, p := range []string{"/tmp", "/dev/shm"} {
			if err := syscall.Mount("", p, "", syscall.MS_REMOUNT|syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
				return mountErr("resize", p, err)
			}
		}
	}
	if rc.DetachHost && cfg.Dir != "" {
		if err := receiveWorkspace(cfg.Dir); err != nil {
			return err
		}
	} else if cfg.Dir != "" {
		ws, err := openSource(hostRoot + cfg.Dir)
		if err != nil {
			return mountErr("open the workspace", cfg.Dir, err)
		}
		defer syscall.Close(ws.fd)
		if !ws.dir {
			return fmt.Errorf("the workspace %s is not a directory", cfg.Dir)
		}
		if err := ws.bind(cfg.Dir, attrWritable); err != nil {
			return err
		}
	}
	if !rc.DetachHost {
		if err := detachHost(); err != nil {
			return err
		}
	}
	if err := setAttr("/", attrReadOnly, false); err != nil {
		return mountErr("make read-only", "/", err)
	}
	return nil
}

// SandboxGoCache is where a native sandbox's GOCACHE is when the sandboxer
// shares a Go build cache with it (Config.GoCache).
const SandboxGoCache = "/tmp/harness-gocache"

// overlayGoCache mounts, at SandboxGoCache in the new root (in maps a
// sandbox path to where it is now), an overlay whose lower layer is the
// host's Go build cache, open as lower, and whose upper layer is in the
// sandbox's private /tmp: a command's builds reuse what the cache holds
// and write only to its own tmpfs, so nothing it writes reaches the host's
// cache or another sandbox. It is only a speed-up: where the kernel will
// not mount the overlay (an old kernel, a user namespace that may not),
// the command gets an empty cache instead.
func overlayGoCache(in func(string) string, lower int) {
	upper, work, merged := in("/tmp/.harness-gocache/upper"), in("/tmp/.harness-gocache/work"), in(SandboxGoCache)
	for _, d := range []string{upper, work, merged} {
		if os.MkdirAll(d, 0o755) != nil {
			return
		}
	}
	opts := "lowerdir=/proc/self/fd/" + strconv.Itoa(lower) + ",upperdir=" + upper + ",workdir=" + work
	_ = syscall.Mount("overlay", merged, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV, opts)
}

// mountSource is a host path opened (O_PATH) before the new root hides it,
// or the target of the symlink it is.
type mountSource struct {
	path, link string
	fd         int
	dir        bool
}

// openSource opens p, without following a final symlink.
func openSource(p string) (mountSource, error) {
	s := mountSource{path: p, fd: -1}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return s, err
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		l, err := os.Readlink(p)
		s.link = l
		return s, err
	}
	s.dir = st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	fd, err := syscall.Open(p, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	s.fd = fd
	return s, err
}

// bind mounts s on target (created, as a directory or an empty file) and
// sets attr on the new mounts.
func (s mountSource) bind(target string, attr uint64) error {
	if s.dir {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return mountErr("create mount point", target, err)
		}
	} else if err := touch(target); err != nil {
		return mountErr("create mount point", target, err)
	}
	if err := syscall.Mount("/proc/self/fd/"+strconv.Itoa(s.fd), target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return mountErr("bind "+s.path+" on", target, err)
	}
	if attr != 0 {
		if err := setAttr(target, attr, true); err != nil {
			return mountErr("set the mount flags of", target, err)
		}
	}
	return nil
}

// mask hides path, if it exists, under an empty read-only directory or
// (for anything else) the null device.
func mask(path, null string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil // nothing to hide
	}
	if fi.IsDir() {
		return syscall.Mount("tmpfs", path, "tmpfs", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=0555,size=4k")
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil // its target is what would need hiding
	}
	if err := syscall.Mount(null, path, "", syscall.MS_BIND, ""); err != nil {
		return err
	}
	return setAttr(path, mountAttrRdonly|mountAttrNosuid|mountAttrNoexec, false)
}

// touch creates an empty file at path (a mount point for a file), and its
// parent directories.
func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// loopbackUp sets the IFF_UP flag of "lo" in the current network namespace.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: name[16], then the flags (short)
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	*(*uint16)(unsafe.Pointer(&ifr[16])) |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	return nil
}

// confineThread restricts the calling (locked) thread, from which the
// command is then forked: no_new_privs, Landlock (writes only to the
// workspace, /tmp and /dev/shm; the null devices), seccomp (see
// seccompDenied), and no capabilities, with an empty bounding set so that
// executing a program as uid 0 grants none back.
func confineThread(cfg *shimConfig) error {
	if err := prctl(prSetNoNewPrivs, 1); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if cfg.Landlock > 0 {
		writable := []string{"/tmp", "/dev/shm"}
		if !cfg.Probe {
			writable = append(writable, cfg.Dir)
		}
		if err := landlockRestrict(cfg.Landlock, writable); err != nil {
			return fmt.Errorf("apply Landlock: %w", err)
		}
	}
	if cfg.Seccomp {
		if err := seccompInstall(); err != nil {
			return fmt.Errorf("install the seccomp filter: %w", err)
		}
	}
	return dropCapabilities()
}

// prctl options.
const (
	prSetNoNewPrivs = 38
	prCapbsetDrop   = 24
	prCapAmbient    = 47
	prCapAmbientClr = 4
	prGetSeccomp    = 21
	prSetDumpable   = 4
)

func prctl(op int, arg uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, uintptr(op), arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// dropCapabilities empties the calling thread's bounding, ambient,
// effective, permitted and inheritable capability sets.
func dropCapabilities() error {
	for c := 0; ; c++ {
		err := prctl(prCapbsetDrop, uintptr(c))
		if err == syscall.EINVAL {
			break // past the last capability
		}
		if err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClr, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", e)
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("clear capabilities: %w", e)
	}
	return nil
}
