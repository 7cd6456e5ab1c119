//go:build linux && (amd64 || arm64)

package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

var (
	_ sandbox.Starter       = (*Backend)(nil)
	_ sandbox.ProgramRunner = (*Backend)(nil)
)

// Start starts spec in a sandbox of its own, confined as Run confines a
// command (see Backend), with pipes to its standard input and output
// (sandbox.Starter): a fresh sandbox, never a warm one, whose init passes
// its standard input on to the command. Every cap but the wall clock
// applies; the command runs until it exits or Kill ends its PID namespace,
// and the sandbox's init is killed with the sandboxer's process, so a
// crashed sandboxer leaves nothing of it behind. Errors are Run's; a
// program the sandbox cannot find is a Process that ends at once, Ended
// saying so.
func (n *Backend) Start(ctx context.Context, spec sandbox.Spec) (*sandbox.Process, error) {
	cfg, lim, err := n.command(ctx, spec)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeSandbox, "create the sandbox's input pipe: %v", err)
	}
	sp, err := n.newShim(func(cg *cgroup) error { return cg.setLimits(lim.MemoryBytes, lim.Pids) }, inR)
	inR.Close()
	if err != nil {
		inW.Close()
		return nil, protocol.Errorf(protocol.CodeSandbox, "could not start the sandbox for %s: %v", process.Argv0(cfg.Argv), err)
	}
	pid := sp.cmd.Process.Pid
	stopNet := func() {}
	if spec.Network {
		stop, err := n.attachNetwork(pid)
		if err != nil {
			inW.Close()
			n.discard(sp)
			var pe *protocol.Error
			if errors.As(err, &pe) {
				return nil, pe
			}
			return nil, protocol.Errorf(protocol.CodeSandbox, "could not give the sandbox of %s its network: %v", process.Argv0(cfg.Argv), err)
		}
		stopNet = stop
	}
	if err := sp.configure(cfg); err != nil {
		inW.Close()
		stopNet()
		err = n.setupFailed(sp, err)
		return nil, protocol.Errorf(protocol.CodeSandbox, "could not set up the sandbox for %s: %v", process.Argv0(cfg.Argv), err)
	}

	cg := sp.cg
	// kill may come at any time, Process.Kill's included, but never once
	// the init is reaped (its pid may be another process's then) or its
	// cgroups released: watch sets ended, under mu, first.
	var mu sync.Mutex
	ended := false
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		_ = syscall.Kill(pid, syscall.SIGKILL) // the PID namespace dies with its init
		if cg != nil {
			cg.killAll()
		}
	}
	exited := func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	}
	rep := protocol.ExecReport{Backend: n.Name(), Argv: cfg.Argv, ExitCode: -1,
		Unenforced: append([]string{sandbox.CapWall}, n.unenforced...)}
	slices.Sort(rep.Unenforced)
	p, done := sandbox.NewProcess(inW, sp.outR, sp.errR, lim.OutputBytes, rep, pid, kill)
	go func() {
		defer stopNet()
		done(n.watch(sp, cfg.Argv, kill, exited))
	}()
	return p, nil
}

// watch waits for a started command's sandbox to end, killing it when the
// kernel enforced its memory or pids cap, tears it down, and says how it
// ended. It calls ended once the init has exited, before it is reaped.
func (n *Backend) watch(sp *shimProc, argv []string, kill, ended func()) string {
	exited := make(chan struct{})
	go func() {
		waitExited(sp.cmd.Process.Pid)
		ended()
		_ = sp.cmd.Wait()
		close(exited)
	}()
	cg := sp.cg
	var tick <-chan time.Time
	if cg != nil && (n.cg.has("memory") || n.cg.has("pids")) {
		t := time.NewTicker(capPollInterval)
		defer t.Stop()
		tick = t.C
	}
	capHit := ""
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-tick:
			if c := cg.capHit(); c != "" {
				capHit, tick = c, nil
				kill()
			}
		}
	}
	var report shimReport
	b, _ := io.ReadAll(sp.repR) // the shim wrote its report, if any, before it exited
	sp.repR.Close()
	reported := len(b) > 0 && json.Unmarshal(b, &report) == nil
	if cg != nil {
		if cg.populated() {
			cg.killAll()
		}
		if c := cg.capHit(); capHit == "" && c != "" {
			capHit = c
		}
	}
	n.release(cg, sp.mntNS, nil)
	sp.mntNS = nil
	switch {
	case capHit != "":
		return fmt.Sprintf("killed: it reached its %s cap", capHit)
	case reported && report.Err != "" && report.Errno == int(syscall.ENOENT):
		return fmt.Sprintf("could not start: program %q is not installed on the sandboxer, or not where the sandbox shows it (a command sees the system directories and its workspace, nothing else)", argv[0])
	case reported && report.Err != "" && report.Errno != 0:
		return "could not start: " + process.StartError(argv[0], syscall.Errno(report.Errno)).Error()
	case reported && report.Err != "":
		return "could not start: the sandbox could not be set up: " + report.Err
	case reported && report.Ran:
		ws := syscall.WaitStatus(report.Status)
		if ws.Signaled() {
			return "killed by " + sandbox.SignalName(ws.Signal())
		}
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	}
	// No report: the init itself was killed (Kill, or the sandboxer's
	// process dying), which ends the command with it.
	return "killed by SIGKILL"
}

// waitExited returns once the process pid, a child of this one, has
// exited, leaving it unreaped: until it is reaped its pid names no other
// process.
func waitExited(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, process.PPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}
