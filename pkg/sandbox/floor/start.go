//go:build unix

package floor

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

var _ sandbox.Starter = (*Backend)(nil)

// Start starts spec as a long-lived command with pipes to its standard
// input and output (sandbox.Starter), confined as little as Run confines
// one: its own process group, which Kill ends with SIGKILL; on Linux the
// CPU-seconds and open-files limits, and SIGKILL when the sandboxer's
// process dies, so a crashed sandboxer leaves no server behind; no
// wall-clock cap. It runs as the sandboxer's own user, unsandboxed
// (Report.Unsandboxed). Errors are Run's.
func (f *Backend) Start(ctx context.Context, spec sandbox.Spec) (*sandbox.Process, error) {
	if err := sandbox.CheckSpec(ctx, spec); err != nil {
		return nil, err
	}
	lim := sandbox.LimitsOf(spec.Limits)
	if fi, err := os.Stat(spec.Dir); err != nil || !fi.IsDir() {
		return nil, protocol.Errorf(protocol.CodeSandbox, "the working directory %s does not exist on the sandboxer", spec.Dir)
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	prog, err := process.LookPath(spec.Argv[0], spec.Dir, env)
	if err != nil {
		return nil, err
	}
	argv := append([]string(nil), spec.Argv...)
	// Pipes of our own, not exec.Cmd's: Wait closes those, and what the
	// command wrote last to its standard error would be lost.
	var files []*os.File
	pipe := func() (r, w *os.File) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w
	}
	inR, stdin := pipe()
	stdout, outW := pipe()
	stderr, errW := pipe()
	if len(files) != 6 {
		for _, f := range files {
			f.Close()
		}
		return nil, protocol.Errorf(protocol.CodeSandbox, "create the command's pipes: too many open files")
	}
	cmd := &exec.Cmd{Path: prog, Args: argv, Dir: spec.Dir, Env: env, Stdin: inR, Stdout: outW, Stderr: errW, SysProcAttr: startAttr()}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdin.Close()
		stdout.Close()
		stderr.Close()
		return nil, process.StartError(spec.Argv[0], err)
	}
	pid := cmd.Process.Pid
	unenforced := []string{sandbox.CapWall, sandbox.CapMemory, sandbox.CapPids}
	if !spec.Network {
		unenforced = append(unenforced, sandbox.CapNetwork)
	}
	if setLimit(pid, syscall.RLIMIT_CPU, uint64(lim.CPUSecs), uint64(lim.CPUSecs)+1) != nil {
		unenforced = append(unenforced, sandbox.CapCPU)
	}
	if setLimit(pid, syscall.RLIMIT_NOFILE, uint64(lim.OpenFiles), uint64(lim.OpenFiles)) != nil {
		unenforced = append(unenforced, sandbox.CapOpenFiles)
	}
	rep := protocol.ExecReport{Backend: f.Name(), Argv: argv, Unenforced: unenforced, Unsandboxed: true, ExitCode: -1}
	// The group is killed at any time until its leader is reaped, never
	// after: its id may be another group's then.
	var mu sync.Mutex
	reaped := false
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			killGroup(pid)
		}
	}
	p, exited := sandbox.NewProcess(stdin, stdout, stderr, lim.OutputBytes, rep, pid, kill)
	go func() {
		ld := &leader{cmd: cmd}
		ld.waitExit()
		mu.Lock()
		killGroup(pid) // what the leader left in its group goes with it
		reaped = true
		ld.reap()
		mu.Unlock()
		exited(endedBy(cmd.ProcessState))
	}()
	return p, nil
}

// endedBy says how a process ended: "exit status 1", "killed by SIGKILL".
func endedBy(ps *os.ProcessState) string {
	if ps == nil {
		return "ended, its status unknown"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + sandbox.SignalName(ws.Signal())
	}
	return ps.String()
}
