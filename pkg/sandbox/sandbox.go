package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Cap labels, used in protocol.ExecReport.CapHit (which cap ended a command)
// and protocol.ExecReport.Unenforced (which caps a backend did not apply).
// They match the field names of protocol.Limits.
const (
	CapCPU       = "cpu"        // Limits.CPUSecs: CPU time of the process
	CapWall      = "wall"       // Limits.WallSecs: wall-clock time
	CapMemory    = "memory"     // Limits.MemoryBytes
	CapPids      = "pids"       // Limits.Pids: number of processes
	CapOpenFiles = "open_files" // Limits.OpenFiles: file descriptors per process
	CapNetwork   = "network"    // Spec.Network == false: no network access
)

// Spec describes one command to run.
type Spec struct {
	// Argv is the program and its arguments. No shell is involved. A
	// program name without a slash is looked up in the PATH of Env (or in
	// /usr/local/bin:/usr/bin:/bin when Env has no PATH); a relative path
	// with a slash is taken relative to Dir.
	Argv []string
	// Dir is the working directory. It must exist.
	Dir string
	// Env is the complete environment of the command, as "KEY=value"
	// strings. Nothing of the sandboxer's own environment is added; build
	// it with MinimalEnv.
	Env []string
	// Limits caps the command; zero (or negative) fields take the defaults
	// of protocol.Limits.WithDefaults.
	Limits protocol.Limits
	// Network allows the command to reach the network. A backend that
	// cannot deny it lists CapNetwork in Report.Unenforced.
	Network bool
}

// Result is a command that ran. Stdout and Stderr are each bounded to
// Limits.OutputBytes: when a stream was longer, its head and tail are kept
// and an elision line such as "…[elided 12345 bytes]…" stands for the
// middle (see ElidedBytes).
type Result struct {
	// Report says how the command ran. ExitCode is -1 when the command did
	// not exit on its own (Exited false); Signal then names what killed it,
	// if a signal did. Exited is false whenever a cap was hit (CapHit set),
	// even if the command's first process then exited: a command whose
	// child was killed by the memory cap and which then exited 0 did not
	// pass.
	Report protocol.ExecReport
	// Stdout is what the command wrote to its standard output, bounded.
	Stdout string
	// Stderr is what it wrote to its standard error, bounded. The floor
	// appends a note when a process that escaped the group kept the output
	// open.
	Stderr string
}

// Backend runs commands. Implementations must pass sandboxtest.Run. The
// backends of this module are in the packages floor, native and docker
// beneath this one; optional interfaces (Enforcer, LeftoverLister,
// Reconciler, Closer, Shutdowner) declare what else a backend does.
type Backend interface {
	// Name is the backend's name as reported in ExecReport.Backend.
	Name() string
	// Run runs spec to completion and returns its Result, whether the
	// command exited zero, exited non-zero, or was killed by a cap.
	//
	// Run returns an error only when the command could not be started at
	// all: a *protocol.Error with CodeNotFound when the program is not
	// installed on the sandboxer, CodeBadArguments when spec is malformed
	// (empty argv, NUL bytes), and CodeSandbox for anything else. If ctx
	// is already done Run starts nothing and returns ctx.Err(), wrapped.
	// If ctx ends while the command runs, Run kills it and returns its
	// Result (Exited false); the caller checks ctx.Err().
	Run(ctx context.Context, spec Spec) (*Result, error)
}

// CheckSpec refuses a spec that no backend could start, with the errors
// Backend.Run documents: ctx.Err() (wrapped) when ctx is done,
// CodeBadArguments for an empty argv or a NUL byte in it or in Env, and
// CodeSandbox when Dir is empty. A backend calls it before anything else.
func CheckSpec(ctx context.Context, spec Spec) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run %s: %w", argv0(spec.Argv), err)
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return protocol.Errorf(protocol.CodeBadArguments, "the command is empty; give the program first, then its arguments")
	}
	for i, a := range spec.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return protocol.Errorf(protocol.CodeBadArguments, "argument %d of the command contains a NUL byte, which no program can receive; remove it", i)
		}
	}
	for _, kv := range spec.Env {
		if strings.IndexByte(kv, 0) >= 0 {
			return protocol.Errorf(protocol.CodeBadArguments, "an environment entry contains a NUL byte")
		}
	}
	if spec.Dir == "" {
		return protocol.Errorf(protocol.CodeSandbox, "no working directory was given for %s", argv0(spec.Argv))
	}
	return nil
}

// LimitsOf returns the caps a backend applies for Spec.Limits l: l with
// every zero or negative field at its default (protocol.Limits.WithDefaults).
func LimitsOf(l protocol.Limits) protocol.Limits {
	d := protocol.Limits{}.WithDefaults()
	l = l.WithDefaults()
	if l.CPUSecs < 0 {
		l.CPUSecs = d.CPUSecs
	}
	if l.WallSecs < 0 {
		l.WallSecs = d.WallSecs
	}
	if l.MemoryBytes < 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids < 0 {
		l.Pids = d.Pids
	}
	if l.OpenFiles < 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.OutputBytes < 0 {
		l.OutputBytes = d.OutputBytes
	}
	return l
}

// argv0 is the program of argv quoted, for a message (the backends have
// process.Argv0, which is unix-only; this package is not).
func argv0(argv []string) string {
	if len(argv) == 0 {
		return `""`
	}
	return strconv.Quote(argv[0])
}

type runKey struct{}

type runOwner struct{ run, op string }

// WithRun returns a context that names the run and the op a command
// belongs to. A backend that leaves state outside the sandboxer's process
// (the docker backend's containers) labels it with them, so that a
// reconciler can remove what no live run owns.
func WithRun(ctx context.Context, run, op string) context.Context {
	return context.WithValue(ctx, runKey{}, runOwner{run, op})
}

// RunOf returns the run and op named by WithRun, or "" and "".
func RunOf(ctx context.Context) (run, op string) {
	o, _ := ctx.Value(runKey{}).(runOwner)
	return o.run, o.op
}
