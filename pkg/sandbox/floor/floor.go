//go:build unix

package floor

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

// Backend is the floor, the portable backend: a plain child process with
// no isolation beyond what is listed here.
//
//   - argv is executed directly, never through a shell;
//   - the environment is exactly Spec.Env (nothing is inherited);
//   - stdin is /dev/null; stdout and stderr are captured, each bounded;
//   - the command runs in its own process group; the wall-clock cap, the
//     end of ctx, and the end of the command itself each SIGKILL the whole
//     group, so background children do not outlive the command (a child
//     that called setsid(2) has left the group and is not killed);
//   - on Linux, RLIMIT_CPU (soft = CPUSecs, hard = CPUSecs+1) and
//     RLIMIT_NOFILE (OpenFiles) are applied with prlimit(2) right after the
//     child starts. The child runs for a moment before that, so a process
//     it forks in that moment keeps the sandboxer's limits; both limits
//     are per process, not per process tree.
//
// Memory, process count and network are not enforced: Report.Unenforced
// always lists "memory" and "pids", lists "network" unless Spec.Network
// allows it, and lists "cpu" or "open_files" when prlimit failed or is not
// available (non-Linux systems). Every report has Unsandboxed set.
//
// The command runs as the sandboxer's user and sees what it sees: every
// file that user can read (the data directory and what lies beside it),
// every address the host reaches, and, when the user is root, the
// sandboxer's own /proc (its environment, its memory). The harness
// binaries mark themselves non-dumpable (internal/procguard), which keeps
// an unprivileged command out of their /proc/PID/environ and ptrace, but
// not a command running as root. That is why a sandboxer runs commands on
// the floor only when its operator allows it (sandboxer.Config.AllowFloor).
// The floor has no state; one value may run any number of commands at once.
type Backend struct{}

var (
	_ sandbox.Backend  = (*Backend)(nil)
	_ sandbox.Enforcer = (*Backend)(nil)
)

// New returns the floor backend.
func New() *Backend { return &Backend{} }

// Name returns "floor".
func (*Backend) Name() string { return "floor" }

// Enforces returns the caps the floor enforces: "wall" everywhere, and on
// Linux "cpu" and "open_files" too. It enforces no memory, pids or network
// cap and no filesystem or process isolation.
func (*Backend) Enforces() []string {
	if floorRlimits {
		return []string{sandbox.CapWall, sandbox.CapCPU, sandbox.CapOpenFiles}
	}
	return []string{sandbox.CapWall}
}

// Run runs spec as described on Backend and sandbox.Backend. Errors (the command was
// not started): ctx already done (ctx.Err(), wrapped); CodeBadArguments
// for an empty argv or NUL bytes; CodeNotFound when the program is not
// installed on the sandboxer (or a path given for it does not exist);
// CodeSandbox when Dir does not exist, the program is not executable, or
// the start failed otherwise.
func (f *Backend) Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error) {
	if err := sandbox.CheckSpec(ctx, spec); err != nil {
		return nil, err
	}
	lim := sandbox.LimitsOf(spec.Limits)
	if fi, err := os.Stat(spec.Dir); err != nil || !fi.IsDir() {
		return nil, protocol.Errorf(protocol.CodeSandbox, "the working directory %s does not exist on the sandboxer", spec.Dir)
	}
	env := spec.Env
	if env == nil {
		env = []string{} // nil would mean "inherit the sandboxer's environment"
	}
	prog, err := process.LookPath(spec.Argv[0], spec.Dir, env)
	if err != nil {
		return nil, err
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeSandbox, "create output pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, protocol.Errorf(protocol.CodeSandbox, "create output pipe: %v", err)
	}
	argv := append([]string(nil), spec.Argv...)
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        argv,
		Dir:         spec.Dir,
		Env:         env,
		Stdout:      outW, // *os.File: passed to the child as is, no copying goroutine
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, process.StartError(spec.Argv[0], err)
	}
	pid := cmd.Process.Pid

	unenforced := []string{sandbox.CapMemory, sandbox.CapPids}
	if !spec.Network {
		unenforced = append(unenforced, sandbox.CapNetwork)
	}
	cpuEnforced := setLimit(pid, syscall.RLIMIT_CPU, uint64(lim.CPUSecs), uint64(lim.CPUSecs)+1) == nil
	if !cpuEnforced {
		unenforced = append(unenforced, sandbox.CapCPU)
	}
	if setLimit(pid, syscall.RLIMIT_NOFILE, uint64(lim.OpenFiles), uint64(lim.OpenFiles)) != nil {
		unenforced = append(unenforced, sandbox.CapOpenFiles)
	}

	stdout, stderr := sandbox.NewCapture(lim.OutputBytes), sandbox.NewCapture(lim.OutputBytes)
	var readers sync.WaitGroup
	readers.Go(func() { io.Copy(stdout, outR) })
	readers.Go(func() { io.Copy(stderr, errR) })

	ld := &leader{cmd: cmd}
	exited := make(chan struct{})
	go func() {
		ld.waitExit()
		close(exited)
	}()
	wall := time.NewTimer(time.Duration(lim.WallSecs) * time.Second)
	defer wall.Stop()
	capHit, killed := "", false
	select {
	case <-exited:
	case <-wall.C:
		capHit, killed = sandbox.CapWall, true
		killGroup(pid)
	case <-ctx.Done():
		killed = true
		killGroup(pid)
	}
	<-exited
	// The leader has exited but is not reaped yet, so its pid, which is
	// the group's id, cannot be reused: sweep the group. Its own CPU time
	// is still readable.
	killGroup(pid)
	cpuUsed := process.CPUTime(pid)
	ld.reap()
	dur := time.Since(start)

	escaped := !process.WaitTimeout(&readers, process.PipeGrace)
	outR.Close() // unblocks a reader still waiting on an escaped holder
	errR.Close()
	readers.Wait()

	rep := protocol.ExecReport{
		Backend:     f.Name(),
		Argv:        argv,
		DurationMS:  dur.Milliseconds(),
		Unenforced:  unenforced,
		Unsandboxed: true,
	}
	var ws syscall.WaitStatus
	if cmd.ProcessState != nil { // nil only if the reap itself failed
		ws, _ = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	switch {
	case cmd.ProcessState == nil:
		rep.ExitCode = -1
	case ws.Exited() && cpuEnforced && cpuUsed >= time.Duration(lim.CPUSecs)*time.Second:
		// It reached its CPU limit, caught SIGXCPU and exited: the cap
		// ended it, whatever its status says.
		rep.ExitCode = -1
		capHit = sandbox.CapCPU
	case ws.Exited():
		rep.Exited = true
		rep.ExitCode = ws.ExitStatus()
		capHit = "" // it ended on its own before the kill landed
	case ws.Signaled():
		rep.ExitCode = -1
		sig := ws.Signal()
		rep.Signal = sandbox.SignalName(sig)
		if !killed && cpuEnforced && hitCPU(sig, cmd.ProcessState, lim.CPUSecs) {
			capHit = sandbox.CapCPU
		}
	default:
		rep.ExitCode = -1
	}
	rep.CapHit = capHit

	res := &sandbox.Result{Report: rep, Stdout: stdout.String(), Stderr: stderr.String()}
	if escaped {
		res.Stderr += process.EscapedNote
	}
	return res, nil
}

// hitCPU reports whether a process that died of sig was ended by its CPU
// limit: SIGXCPU at the soft limit, or SIGKILL at the hard limit (for
// programs, such as Go ones, that ignore SIGXCPU).
func hitCPU(sig syscall.Signal, ps *os.ProcessState, cpuSecs int) bool {
	if sig == syscall.SIGXCPU {
		return true
	}
	used := ps.UserTime() + ps.SystemTime()
	return sig == syscall.SIGKILL && used >= time.Duration(cpuSecs)*time.Second
}

// killGroup sends SIGKILL to every process in the group led by pid.
// ESRCH (the group is already empty) is the normal case after a command
// that left nothing behind.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
