package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// Exec is the exec tool: run one program, with its arguments, in the
// workspace through Env.Sandbox. There is no shell.
type Exec struct{}

var execParams = params{
	{name: "argv", kind: kindStringArray, required: true, example: `["go", "test", "./..."]`,
		desc: `Program and arguments as an array of strings, program first, such as ["go", "test", "./..."]. ` +
			`There is no shell: no pipes, redirections, globs or variables; to use a shell, pass ["sh", "-c", "…"] if the policy allows it.`},
}

// Spec describes exec.
func (Exec) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "exec",
		Description: "Run a program in the workspace directory and show its output and exit status. " +
			"The command runs under time and resource caps; long output is cut in the middle with a note.",
		Parameters: execParams.schema(),
	}
}

// Invoke runs the command and returns its output and status, whatever the
// exit code, as the Content; Output.Exec is the sandbox's report and
// Output.Changed is always true (a command may have changed the
// workspace). Errors: bad arguments (argv not an array of strings, empty,
// an empty program name); CodeUnsupported when Env has no sandbox; the
// sandbox's own errors when the command could not be started, notably
// CodeNotFound for a program that is not installed on this sandboxer; the
// end of ctx, returned as ctx.Err() wrapped.
func (Exec) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := execParams.decode("exec", raw)
	if err != nil {
		return nil, err
	}
	argv := a.strs("argv")
	switch {
	case len(argv) == 0:
		return nil, protocol.FieldError(protocol.CodeBadArguments, "argv", "", `argv is empty; give the program and its arguments, such as ["go", "test", "./..."]`)
	case argv[0] == "":
		return nil, protocol.FieldError(protocol.CodeBadArguments, "argv", "", "argv[0], the program, is empty; name the program to run")
	}
	w, err := env.workspace("exec")
	if err != nil {
		return nil, err
	}
	if env.Sandbox == nil {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "exec is not available: this sandboxer has no sandbox to run commands in")
	}
	res, err := env.Sandbox.Run(ctx, sandbox.Spec{
		Argv:    argv,
		Dir:     w.Dir(),
		Env:     env.CmdEnv,
		Limits:  env.Limits,
		Network: env.Network,
	})
	if err != nil {
		var pe *protocol.Error
		switch {
		case errors.Is(err, protocol.ErrNotFound):
			return nil, unavailable(argv, protocol.AsError(err))
		case errors.As(err, &pe):
			return nil, err
		case ctx.Err() != nil:
			return nil, fmt.Errorf("exec: %w", err)
		default:
			return nil, protocol.Errorf(protocol.CodeSandbox, "could not run %q: %v", argv[0], err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	rep := res.Report
	return &Output{
		Content: execContent(res, env.entryCap(), env.Limits.WithDefaults()),
		Changed: true,
		Exec:    &rep,
	}, nil
}

// unavailable is the error for a program the sandbox could not find.
func unavailable(argv []string, err *protocol.Error) *protocol.Error {
	prog := argv[0]
	switch {
	case len(argv) == 1 && strings.ContainsAny(prog, " \t"):
		return protocol.FieldError(protocol.CodeNotFound, "argv", "",
			"there is no program called %q: argv holds a whole command line in one string, but there is no shell; pass each argument as its own element, such as %s", prog, splitHint(prog))
	case strings.Contains(prog, "/"):
		return protocol.FieldError(protocol.CodeNotFound, "argv", "", "%s; it is unavailable on this sandboxer, so check the path", err.Message)
	default:
		return protocol.FieldError(protocol.CodeNotFound, "argv", "", "program %q is unavailable on this sandboxer (it is not installed there); use a program that is installed", prog)
	}
}

// splitHint suggests the argv for a command line given as one string.
func splitHint(line string) string {
	b, _ := json.Marshal(strings.Fields(line))
	return string(b)
}

// execContent renders a command's output and status for the model: each
// non-empty stream under its label, bounded head and tail to about half
// the entry cap, then a status line.
func execContent(res *sandbox.Result, limit int, lim protocol.Limits) string {
	half := (limit - 200) / 2 // 200: labels and the status line
	var b strings.Builder
	for _, s := range []struct{ label, text string }{{"[stdout]", res.Stdout}, {"[stderr]", res.Stderr}} {
		if s.text == "" {
			continue
		}
		b.WriteString(s.label + "\n")
		b.WriteString(keepHeadTail(strings.ToValidUTF8(s.text, "\uFFFD"), half, sandboxElided))
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteString("\n")
		}
	}
	if res.Stdout == "" && res.Stderr == "" {
		b.WriteString("[no output]\n")
	}
	b.WriteString(status(res.Report, lim))
	if res.Report.Unsandboxed {
		b.WriteString("\n[unsandboxed: the sandboxer's operator runs commands on the floor backend, with no isolation]")
	}
	return b.String()
}

// sandboxElided adds to the elision note the bytes the sandbox had already
// dropped from the cut middle.
func sandboxElided(middle string) string {
	if n := sandbox.ElidedBytes(middle); n > 0 {
		return fmt.Sprintf(", plus %d bytes the sandbox had already dropped", n)
	}
	return ""
}

// status is the line that ends an exec observation.
func status(r protocol.ExecReport, lim protocol.Limits) string {
	switch {
	case r.Exited:
		return fmt.Sprintf("[exit %d]", r.ExitCode)
	case r.CapHit == sandbox.CapWall:
		return fmt.Sprintf("[killed: wall clock cap %ds]", lim.WallSecs)
	case r.CapHit == sandbox.CapCPU:
		return fmt.Sprintf("[killed: CPU time cap %ds]", lim.CPUSecs)
	case r.CapHit != "":
		return fmt.Sprintf("[killed: %s cap]", r.CapHit)
	case r.Signal != "":
		return fmt.Sprintf("[killed by %s]", r.Signal)
	default:
		return "[ended without an exit status]"
	}
}
