//go:build unix

package docker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

// Labels the docker backend puts on every container it creates. The
// reconciler finds its containers by LabelSandboxer.
const (
	LabelSandboxer = "io.harness.sandboxer" // Config.SandboxerID
	LabelRun       = "io.harness.run"       // the run named with sandbox.WithRun, or ""
	LabelOp        = "io.harness.op"        // the op named with sandbox.WithRun, or ""
)

// Defaults of Config.
const (
	DefaultHost       = "unix:///var/run/docker.sock"
	DefaultImage      = "harness-sandbox:latest"
	DefaultNetwork    = "bridge"
	DefaultCPUs       = 1.0
	DefaultTmpfs      = 512 << 20
	DefaultTimeout    = 30 * time.Second
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// Config configures the docker backend. The zero value means the
// defaults; Validate reports what is wrong with the rest.
type Config struct {
	// Host is the engine's address, such as "unix:///var/run/docker.sock"
	// or "tcp://10.0.0.2:2375". Default DefaultHost. The engine must
	// run on the sandboxer's own machine: workspaces are bind-mounted by
	// path.
	Host string
	// Image is the image commands run in, such as "golang:1.26" or
	// "harness-sandbox:latest". It must already be on the engine (built
	// or loaded there): the backend never pulls. Default
	// DefaultImage; WithImage derives a backend for another image.
	Image string
	// SandboxerID names this sandboxer in the io.harness.sandboxer label
	// of its containers. Reconcile removes every container with this
	// label that the backend is not running, so two sandboxers that share
	// an engine need distinct IDs. Default: the host name.
	SandboxerID string
	// Network is the network mode of a command whose Spec.Network allows
	// the network. Default DefaultNetwork ("bridge"). A command
	// that may not use the network always gets "none": no interface but
	// loopback.
	Network string
	// CPUs is how many CPUs a command may use at once (its CFS quota).
	// Default DefaultCPUs (1). CPU time is capped separately by
	// Limits.CPUSecs.
	CPUs float64
	// TmpfsBytes is the size of the private /tmp of each command, a tmpfs
	// that counts against its memory cap. Default DefaultTmpfs
	// (512 MiB).
	TmpfsBytes int64
	// User is "uid:gid" (or a name the image knows) that commands run as.
	// Default: the numeric owner of the working directory, so that files
	// the command writes in the workspace belong to the workspace's owner.
	User string
	// Timeout bounds each engine call other than waiting for the command
	// (create, start, kill, inspect, remove). Default DefaultTimeout.
	Timeout time.Duration
	// CgroupRoot is where the engine's cgroups can be read, to detect that
	// a command hit its pids cap and to measure its CPU time. Default
	// DefaultCgroupRoot. When they cannot be read, pids exhaustion goes
	// unreported (the cap still holds).
	CgroupRoot string
	// Logger receives what an operator needs and a caller does not: engine
	// warnings, containers that could not be removed. Default: discard.
	Logger *slog.Logger
}

// Validate reports the first invalid field as a *protocol.Error with
// CodeInvalidField.
func (c Config) Validate() error {
	switch {
	case c.CPUs < 0:
		return protocol.Errorf(protocol.CodeInvalidField, "docker CPUs %v is negative", c.CPUs)
	case c.TmpfsBytes < 0:
		return protocol.Errorf(protocol.CodeInvalidField, "docker TmpfsBytes %d is negative", c.TmpfsBytes)
	case c.Timeout < 0:
		return protocol.Errorf(protocol.CodeInvalidField, "docker Timeout %v is negative", c.Timeout)
	}
	if c.Image != "" {
		if err := checkImageRef(c.Image); err != nil {
			return err
		}
	}
	for _, l := range []string{c.SandboxerID, c.Network} {
		if strings.ContainsAny(l, "\x00\n") {
			return protocol.Errorf(protocol.CodeInvalidField, "docker SandboxerID or Network %q contains a control character", l)
		}
	}
	return nil
}

func checkImageRef(image string) error {
	if _, err := reference.ParseAnyReference(image); err != nil {
		return protocol.Errorf(protocol.CodeInvalidField, "docker image %q is not a valid image reference: %v", image, err)
	}
	return nil
}

// withDefaults returns c with every zero field at its default.
func (c Config) withDefaults() Config {
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.SandboxerID == "" {
		c.SandboxerID, _ = os.Hostname()
		if c.SandboxerID == "" {
			c.SandboxerID = "sandboxer"
		}
	}
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if c.CPUs == 0 {
		c.CPUs = DefaultCPUs
	}
	if c.TmpfsBytes == 0 {
		c.TmpfsBytes = DefaultTmpfs
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = DefaultCgroupRoot
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Backend runs each command in a container of its own, created for the
// command and removed when it ends. Every container:
//
//   - runs the image of Config.Image (or WithImage), which must be on
//     the engine already; the backend never pulls;
//   - executes argv directly (no shell) under the engine's init (tini), so
//     that the command is not PID 1 and signals behave as they do on a
//     host, with exactly Spec.Env as its environment, except that the
//     engine adds HOSTNAME, and PATH and HOME when Spec.Env lacks them;
//   - has a read-only root filesystem, the working directory bind-mounted
//     read-write at its own (symlink-resolved) path, and a private tmpfs
//     /tmp: nothing else is writable;
//   - has network mode "none" (loopback only) unless Spec.Network allows
//     the network (Config.Network, "bridge" by default);
//   - drops every capability, sets no-new-privileges, is never privileged,
//     and runs as Config.User (by default the owner of the working
//     directory);
//   - is capped: memory (cgroup, swap off), process count (pids cgroup),
//     CPU share (CFS quota of Config.CPUs), CPU time (the container
//     is killed when its processes have used Limits.CPUSecs in all, read
//     from its cgroup; RLIMIT_CPU of one second more, hard limit two,
//     backs that up for each process), open files (RLIMIT_NOFILE), wall
//     clock (the container is killed), output (each stream bounded head
//     and tail, as the floor does);
//   - carries the labels LabelSandboxer, LabelRun and LabelOp.
//
// How a command ended: the engine reports a death by signal N as status
// 128+N, so Run reports a status of 129 to 192 as death by that signal
// (Exited false) — a program that exits with such a status on its own is
// thus reported as killed, which never passes a check. CapHit is "wall"
// when the wall clock killed it; "memory" when the OOM killer killed any
// of its processes, and "pids" when the pids cap refused a fork (the
// backend reads the container's cgroup while it runs, and kills the whole
// container as soon as it sees either; the engine's own OOM flag backs the
// memory reading up); "cpu" when a process died of SIGXCPU or the
// container's processes used Limits.CPUSecs of CPU time in all. A command
// with a CapHit is reported as not exited (Exited false, ExitCode -1) even
// when its first process exited on its own afterwards. Where the cgroups
// cannot be read (another machine's engine, an unknown cgroup layout), a
// refused fork, or CPU time used up without a signal, goes unreported;
// the caps themselves still hold.
//
// Run returns as soon as the command's status is known; its container is
// removed right after, in the background (at most maxRemoving at once),
// and Shutdown waits for those removals.
//
// A Backend value is safe for concurrent use. Shutdown releases it.
type Backend struct {
	cfg   Config // with defaults
	image string
	st    *dockerState
}

// maxRemoving bounds the background removals of finished containers; a
// Run whose container would be one more removes it before returning.
const maxRemoving = 8

// dockerState is what a Backend shares with the values WithImage derives.
type dockerState struct {
	cli      *client.Client
	removing chan struct{} // a slot per background removal
	mu       sync.Mutex
	// live holds the names of the containers this process creates or runs
	// and has not removed yet; Reconcile leaves them alone.
	live   map[string]struct{}
	closed bool
	// busy counts the Runs and background removals in progress; Add only
	// under mu while !closed.
	busy sync.WaitGroup
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.Enforcer       = (*Backend)(nil)
	_ sandbox.LeftoverLister = (*Backend)(nil)
	_ sandbox.Reconciler     = (*Backend)(nil)
	_ sandbox.Shutdowner     = (*Backend)(nil)
)

// New returns the docker backend. It does not contact the engine;
// call Ping to find out whether one answers, and Reconcile at start to
// remove what a previous run of this sandboxer left behind. Errors: a
// *protocol.Error with CodeInvalidField when cfg is invalid, CodeSandbox
// when the engine address cannot be used.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cli, err := client.New(client.WithHost(cfg.Host))
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeSandbox, "docker engine address %q: %v", cfg.Host, err)
	}
	st := &dockerState{cli: cli, live: make(map[string]struct{}), removing: make(chan struct{}, maxRemoving)}
	return &Backend{cfg: cfg, image: cfg.Image, st: st}, nil
}

// WithImage returns a backend that runs commands in image and shares
// everything else (the engine connection, the record of live containers)
// with d. Shutting down either shuts down both. Errors: CodeInvalidField
// when image is not a valid reference.
func (d *Backend) WithImage(image string) (*Backend, error) {
	if err := checkImageRef(image); err != nil {
		return nil, err
	}
	dd := *d
	dd.image = image
	return &dd, nil
}

// Image returns the image commands run in.
func (d *Backend) Image() string { return d.image }

// Name returns "docker".
func (*Backend) Name() string { return "docker" }

// Enforces lists every cap, sandbox.ConfineFilesystem and sandbox.ConfineProcesses: the
// docker backend enforces them all (see Backend).
func (*Backend) Enforces() []string {
	return []string{sandbox.CapCPU, sandbox.CapWall, sandbox.CapMemory, sandbox.CapPids, sandbox.CapOpenFiles, sandbox.CapNetwork, sandbox.ConfineFilesystem, sandbox.ConfineProcesses}
}

// Leftovers waits for the background removals under way, then lists the
// containers of this sandboxer (LabelSandboxer) that exist, as "container
// NAME (STATE)"; with no command running there are none. Errors:
// CodeSandbox when the engine cannot list containers.
func (d *Backend) Leftovers() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	// Holding every removal slot means the removals that held them are
	// done; meanwhile a Run removes its container itself.
	held := 0
acquire:
	for held < maxRemoving {
		select {
		case d.st.removing <- struct{}{}:
			held++
		case <-ctx.Done():
			break acquire
		}
	}
	for range held {
		<-d.st.removing
	}
	list, err := d.st.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelSandboxer+"="+d.cfg.SandboxerID),
	})
	if err != nil {
		return nil, d.engineError("list the harness containers", err)
	}
	var out []string
	for _, c := range list.Items {
		name := shortID(c.ID)
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, fmt.Sprintf("container %s (%s)", name, c.State))
	}
	return out, nil
}

// Ping reports whether the engine answers, as a *protocol.Error with
// CodeSandbox when it does not.
func (d *Backend) Ping(ctx context.Context) error {
	if _, err := d.st.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return protocol.Errorf(protocol.CodeSandbox, "the Docker engine at %s does not answer: %v", d.cfg.Host, err)
	}
	return nil
}

// Shutdown stops taking commands (Run then returns a CodeSandbox error),
// waits until the commands in progress have ended and their containers
// are removed, or until ctx ends, and closes the connection to the engine.
// A container it did not wait for is left to Reconcile at the next start.
// It returns ctx.Err() when ctx ended first, and may be called more than
// once.
func (d *Backend) Shutdown(ctx context.Context) error {
	d.st.mu.Lock()
	d.st.closed = true
	d.st.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.st.busy.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if cerr := d.st.cli.Close(); err == nil {
		err = cerr
	}
	return err
}

// begin registers a Run, unless the backend is shut down.
func (d *Backend) begin() bool {
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	if d.st.closed {
		return false
	}
	d.st.busy.Add(1)
	return true
}

// Run runs spec in a new container as described on Backend and sandbox.Backend,
// and removes the container right after (see Backend). Errors (the command was
// not started): ctx already done (ctx.Err(), wrapped); CodeBadArguments
// for an empty argv or NUL bytes; CodeNotFound when the program is not in
// the image (or a path given for it does not exist); CodeSandbox when the
// working directory does not exist, the image is not on the engine (the
// Hint says to build or load it), the program cannot be executed, or the
// engine refused or did not answer. If the engine stops answering while
// the command runs, Run returns a Result that did not exit (ExitCode -1)
// with a note at the end of Stderr.
func (d *Backend) Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error) {
	if err := sandbox.CheckSpec(ctx, spec); err != nil {
		return nil, err
	}
	if !d.begin() {
		return nil, protocol.Errorf(protocol.CodeSandbox, "the docker sandbox is shutting down; %s was not started", process.Argv0(spec.Argv))
	}
	ended := false // the busy count passed to the background removal
	defer func() {
		if !ended {
			d.st.busy.Done()
		}
	}()
	lim := sandbox.LimitsOf(spec.Limits)
	dir, err := filepath.EvalSymlinks(spec.Dir)
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(dir)
	}
	if err != nil || !fi.IsDir() {
		return nil, protocol.Errorf(protocol.CodeSandbox, "the working directory %s does not exist on the sandboxer", spec.Dir)
	}
	if dir == "/" {
		return nil, protocol.Errorf(protocol.CodeSandbox, "the working directory is the root directory, which cannot be a workspace")
	}
	owner := ""
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	argv := slices.Clone(spec.Argv)
	run, op := sandbox.RunOf(ctx)
	cfg, hc := containerConfig(d.cfg, d.image, command{
		argv: argv, dir: dir, owner: owner, env: spec.Env, lim: lim, network: spec.Network, run: run, op: op,
	})

	// The name is tracked before the container exists, so that a
	// concurrent Reconcile never takes it for a leftover. Engine calls
	// other than the wait do not follow ctx: ending one half-way could
	// leave a container that no one knows about.
	name := "harness-" + strings.ToLower(rand.Text())
	d.track(name)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	created, err := d.st.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	cancel()
	if err != nil {
		if cctx.Err() != nil {
			d.remove(name) // it may exist all the same
		}
		d.untrack(name)
		return nil, d.engineError("create a container for "+process.Argv0(argv), err)
	}
	id := created.ID
	defer func() {
		// The result is known: remove the container in the background if
		// a slot is free, else now.
		select {
		case d.st.removing <- struct{}{}:
			ended = true
			go func() {
				defer d.st.busy.Done()
				d.remove(id)
				d.untrack(name)
				<-d.st.removing
			}()
		default:
			d.remove(id)
			d.untrack(name)
		}
	}()
	unenforced := d.warnings(id, created.Warnings)

	res, startErr := d.runContainer(ctx, id, spec, lim)
	if startErr != nil {
		return nil, startErr
	}
	res.Report.Backend = d.Name()
	res.Report.Argv = argv
	res.Report.Unenforced = unenforced
	return res, nil
}

// runContainer attaches to, starts and waits for the created container
// id. It returns an error only when the command did not start.
func (d *Backend) runContainer(ctx context.Context, id string, spec sandbox.Spec, lim protocol.Limits) (*sandbox.Result, error) {
	cli := d.st.cli
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	att, err := cli.ContainerAttach(actx, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	acancel()
	if err != nil {
		return nil, d.engineError("attach to the container of "+process.Argv0(spec.Argv), err)
	}
	defer att.Close()
	stdout, stderr := sandbox.NewCapture(lim.OutputBytes), sandbox.NewCapture(lim.OutputBytes)
	streamed := make(chan struct{}) // the output ended: the command is ending
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = stdcopy.StdCopy(stdout, stderr, att.Reader)
		close(streamed)
	}()

	// The wait is registered before the start, so that the exit cannot
	// be missed; it ends with wctx, after the kill or the exit.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer wcancel()
	waited := cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run %s: %w", process.Argv0(spec.Argv), err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	start := time.Now()
	_, err = cli.ContainerStart(sctx, id, client.ContainerStartOptions{})
	scancel()
	if err != nil {
		return nil, d.engineError("start "+process.Argv0(spec.Argv), err)
	}
	var capKill sync.Once // a cap the kernel enforced ends the whole command
	watch := d.watchCgroup(id, time.Duration(lim.CPUSecs)*time.Second, func(string) { capKill.Do(func() { go d.kill(id) }) })
	defer watch.stop()
	go func() {
		select {
		case <-streamed:
			watch.poke()
		case <-copied:
		}
	}()

	wall := time.NewTimer(time.Duration(lim.WallSecs) * time.Second)
	defer wall.Stop()
	wallHit, killed := false, false
	var status int64 = -1
	var waitErr error
	exited := false
	var giveUp <-chan time.Time // armed by a kill: how long the engine has to confirm it
	for !exited {
		select {
		case r := <-waited.Result:
			status, exited = r.StatusCode, true
			if r.Error != nil && r.Error.Message != "" {
				waitErr = errors.New(r.Error.Message)
			}
		case err := <-waited.Error:
			waitErr, exited = err, true
		case <-wall.C:
			wallHit, killed = true, true
			d.kill(id)
			giveUp = time.After(d.cfg.Timeout)
		case <-ctx.Done():
			if !killed {
				killed = true
				d.kill(id)
				giveUp = time.After(d.cfg.Timeout)
			}
			ctx = context.Background() // fire once; keep waiting for the exit
		case <-giveUp:
			waitErr, exited = errors.New("the engine did not confirm that it killed the container"), true
			wcancel()
			go func() { // let the client's wait goroutine end
				select {
				case <-waited.Result:
				case <-waited.Error:
				}
			}()
		}
	}
	dur := time.Since(start)
	usage := watch.stop()

	streamDone := true
	select {
	case <-copied:
	case <-time.After(process.PipeGrace):
		streamDone = false
		att.Close()
		<-copied
	}

	res := &sandbox.Result{}
	if waitErr != nil {
		d.kill(id)
		res.Report = protocol.ExecReport{DurationMS: dur.Milliseconds(), ExitCode: -1}
		if wallHit {
			res.Report.CapHit = sandbox.CapWall
		}
		res.Stdout = stdout.String()
		res.Stderr = stderr.String() + "\n…[the sandbox lost track of the command: " + waitErr.Error() + "]…\n"
		return res, nil
	}

	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	info, ierr := cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{})
	icancel()
	var state *container.State
	if ierr == nil {
		state = info.Container.State
	}
	rep := attribute(ending{status: status, wallHit: wallHit, killed: killed, usage: usage, state: state, stderr: stderr.String()}, lim)
	rep.DurationMS = dur.Milliseconds()
	res.Report = rep
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	if !streamDone {
		res.Stderr += "\n…[the sandbox stopped reading here: the engine kept the output open after the command ended]…\n"
	}
	if e := notStarted(spec.Argv[0], d.image, res); e != nil {
		return nil, e
	}
	return res, nil
}

// engineError turns an error of the engine into a *protocol.Error.
func (d *Backend) engineError(what string, err error) error {
	switch {
	case cerrdefs.IsNotFound(err) && strings.Contains(err.Error(), "image"):
		e := protocol.Errorf(protocol.CodeSandbox, "the sandbox image %s is not on the sandboxer's Docker engine", d.image)
		e.Hint = "build or load the image on the sandboxer's engine (docker build, docker load or docker import); the sandboxer never pulls images"
		return e
	case client.IsErrConnectionFailed(err):
		return protocol.Errorf(protocol.CodeSandbox, "%s: the Docker engine at %s does not answer: %v", what, d.cfg.Host, err)
	default:
		return protocol.Errorf(protocol.CodeSandbox, "%s: %v", what, err)
	}
}

// warnings logs the engine's warnings on creating id and returns the caps
// they say were discarded.
func (d *Backend) warnings(id string, warnings []string) []string {
	for _, w := range warnings {
		d.cfg.Logger.Warn("docker engine warning", "container", shortID(id), "warning", w)
	}
	return discarded(warnings)
}

// kill sends SIGKILL to the container's init, which ends every process in
// it. A container that already stopped is not an error.
func (d *Backend) kill(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	if _, err := d.st.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil && !cerrdefs.IsConflict(err) && !cerrdefs.IsNotFound(err) {
		d.cfg.Logger.Warn("docker kill", "container", shortID(id), "err", err)
	}
}

// track records that this process runs the container named name.
func (d *Backend) track(name string) {
	d.st.mu.Lock()
	d.st.live[name] = struct{}{}
	d.st.mu.Unlock()
}

// untrack forgets name, once its container is removed (or left to the
// reconciler).
func (d *Backend) untrack(name string) {
	d.st.mu.Lock()
	delete(d.st.live, name)
	d.st.mu.Unlock()
}

// trackedAny reports whether one of names (as the engine lists them, with
// a leading slash) is a container this process runs.
func (d *Backend) trackedAny(names []string) bool {
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	for _, n := range names {
		if _, ok := d.st.live[strings.TrimPrefix(n, "/")]; ok {
			return true
		}
	}
	return false
}

// remove force-removes the container id. A container that cannot be
// removed now is left to Reconcile.
func (d *Backend) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	_, err := d.st.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		d.cfg.Logger.Warn("docker remove; the reconciler will retry", "container", shortID(id), "err", err)
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
