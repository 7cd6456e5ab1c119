package sandbox

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Starter is an optional interface of a Backend that can start a command
// which lives on, with pipes to its standard input and output, rather than
// run one to completion: an MCP server spoken to over stdio. The command
// is confined as Run confines one (filesystem, processes, network,
// memory, pids, CPU seconds, open files), except that no wall-clock cap
// ends it: it runs until it exits or Process.Kill is called, and the
// sandboxer kills it when the run that started it ends. The native and
// floor backends are Starters; the docker backend is not, and a sandboxer
// refuses to start a server on a backend that is not.
type Starter interface {
	// Start starts spec and returns at once. Errors are those of
	// Backend.Run: the command could not be started at all. A command
	// that starts and then fails (a program the sandbox cannot find, on
	// the native backend, where the lookup happens inside it) is a
	// Process that ends at once, Ended saying why. ctx bounds the start
	// only, never the process's life.
	Start(ctx context.Context, spec Spec) (*Process, error)
}

// Process is a command a Starter started. Write to Stdin, read from
// Stdout; Kill ends it with everything it started, and Done is closed
// once it has ended and its sandbox is torn down.
type Process struct {
	// Stdin is the command's standard input; closing it is the polite way
	// to ask a stdio server to exit.
	Stdin io.WriteCloser
	// Stdout is the command's standard output, unbounded: it is a stream,
	// not a result.
	Stdout io.ReadCloser
	// Report says which backend runs it and what it does not enforce
	// (Backend, Argv, Unenforced, Unsandboxed); the rest is unset.
	Report protocol.ExecReport
	// Pid is the host's process id of what the backend started: the
	// command itself on the floor, the sandbox's init on the native
	// backend. For logs.
	Pid int

	errMu    sync.Mutex // guards stderr, written by the copy of the command's standard error
	stderr   *Capture
	kill     func()
	killOnce sync.Once
	done     chan struct{}
	mu       sync.Mutex
	ended    string
}

// NewProcess returns a Process for a backend's Start: stdin and stdout
// are the command's pipes; stderr, its standard error (may be nil), is
// read until it closes and kept bounded to limit bytes (head and tail);
// kill ends the command and everything it started, at once. The backend
// calls the returned function exactly once, when the command has ended
// and its sandbox is torn down, saying how it ended ("exit status 1",
// "killed by SIGKILL", why it could not run).
func NewProcess(stdin io.WriteCloser, stdout io.ReadCloser, stderr io.ReadCloser, limit int, report protocol.ExecReport, pid int, kill func()) (*Process, func(ended string)) {
	p := &Process{Stdin: stdin, Stdout: stdout, Report: report, Pid: pid, stderr: NewCapture(limit), kill: kill, done: make(chan struct{})}
	drained := make(chan struct{})
	if stderr == nil {
		close(drained)
	} else {
		go func() {
			defer close(drained)
			defer stderr.Close()
			buf := make([]byte, 4096)
			for {
				n, err := stderr.Read(buf)
				if n > 0 {
					p.errMu.Lock()
					_, _ = p.stderr.Write(buf[:n])
					p.errMu.Unlock()
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return p, func(ended string) {
		// What the command wrote last is read before Done says it ended;
		// a process that left the command's group may hold the pipe open
		// for ever, so the reading stops after a grace.
		select {
		case <-drained:
		case <-time.After(stderrGrace):
			_ = stderr.Close()
		}
		p.mu.Lock()
		p.ended = ended
		p.mu.Unlock()
		close(p.done)
	}
}

// stderrGrace is how long a Process's standard error is read after the
// command ended.
const stderrGrace = time.Second

// Kill ends the command and everything it started, and waits until it has
// ended (Done). It is idempotent and safe to call at any time.
func (p *Process) Kill() {
	p.killOnce.Do(func() {
		_ = p.Stdin.Close()
		p.kill()
	})
	<-p.done
}

// Done is closed once the command has ended, by itself or by Kill, and its
// sandbox is torn down: nothing of it is left, and Stderr holds what it
// wrote.
func (p *Process) Done() <-chan struct{} { return p.done }

// Ended says how the command ended, once Done is closed; "" before.
func (p *Process) Ended() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// Stderr is what the command wrote to its standard error so far, bounded
// as a Result's streams are (head and tail).
func (p *Process) Stderr() string {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.stderr.String()
}
