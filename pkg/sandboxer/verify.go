package sandboxer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/tools"
)

// verify runs the contract's check. A command killed by a cap or a signal
// never passes, whatever it printed.
func (s *Sandboxer) verify(ctx context.Context, w *workspace, op *protocol.SandboxOp) *protocol.CheckResult {
	defer fault.During(fault.DuringVerification)()
	v := op.Verification
	res := &protocol.CheckResult{Kind: v.Kind()}
	switch {
	case v.Command != nil:
		pol, err := compilePolicy(orEmpty(op.Policy))
		if op.Policy == nil || err != nil {
			res.Detail = "the verification was refused by the sandboxer: no policy verdict covers it"
			return res
		}
		if ok, why := gate.Allowed(pol, *v); !ok {
			res.Detail = why
			return res
		}
		env := s.env(op, w)
		r, err := env.Sandbox.Run(sandbox.WithRun(ctx, op.Run, op.OpID), sandbox.Spec{Argv: v.Command.Argv, Dir: w.dir, Env: env.CmdEnv, Limits: env.Limits})
		cmd := "`" + strings.Join(v.Command.Argv, " ") + "`"
		if err != nil {
			res.Detail = fmt.Sprintf("%s could not start: %s", cmd, protocol.AsError(err).Message)
			return res
		}
		rep := r.Report
		res.Exec = &rep
		res.Output = boundBoth(r.Stdout+r.Stderr, 4000)
		switch {
		case rep.CapHit != "":
			res.Detail = fmt.Sprintf("%s was killed by the %s cap; a killed command never passes.", cmd, rep.CapHit)
		case !rep.Exited:
			res.Detail = fmt.Sprintf("%s was killed by %s; a killed command never passes.", cmd, orWord(rep.Signal, "a signal"))
		case rep.ExitCode == v.Command.ExpectExit:
			res.Passed = true
			res.Detail = fmt.Sprintf("%s exited %d as expected.", cmd, rep.ExitCode)
		default:
			res.Detail = fmt.Sprintf("%s exited %d (expected %d).", cmd, rep.ExitCode, v.Command.ExpectExit)
		}
	case v.FileContains != nil, v.FileEquals != nil:
		path := v.CheckedFile()
		pol, err := compilePolicy(orEmpty(op.Policy))
		if op.Policy == nil || err != nil {
			res.Detail = "the verification was refused by the sandboxer: no policy verdict covers it"
			return res
		}
		// The file is read as the agent's read_file would find it, and
		// every path its resolution passes through must be explicitly
		// allowed: a link must not let the check answer questions about a
		// file the policy hides.
		data, err := (&tools.Env{Workspace: w.ws, Judge: verifyJudge(pol)}).ReadFile(path)
		switch {
		case errors.Is(err, protocol.ErrRefused):
			res.Detail = protocol.AsError(err).Message
		case errors.Is(err, protocol.ErrNotFound):
			res.Detail = fmt.Sprintf("%s does not exist yet.", path)
		case err != nil:
			res.Detail = fmt.Sprintf("%s cannot be checked: %s", path, protocol.AsError(err).Message)
		case v.FileContains != nil && strings.Contains(string(data), v.FileContains.Needle):
			res.Passed = true
			res.Detail = fmt.Sprintf("%s contains the expected text.", path)
		case v.FileContains != nil:
			res.Detail = fmt.Sprintf("%s does not contain the expected text.", path)
		case string(data) == v.FileEquals.Content:
			res.Passed = true
			res.Detail = fmt.Sprintf("%s holds exactly the expected text.", path)
		default:
			res.Detail = fmt.Sprintf("%s does not hold exactly the expected text (%d bytes, expected %d).", path, len(data), len(v.FileEquals.Content))
		}
	case v.DocumentContains != nil:
		s.documentContains(ctx, w, op, res)
	default:
		res.Detail = "this sandboxer cannot run a " + v.Kind() + " verification"
	}
	return res
}

// documentContains checks that the text extracted from a document holds
// the needle. The file is read as file_contains reads it; a file that is
// not of its kind, or cannot be read within the document tools' limits,
// fails the check saying why, never passes or fails on an empty text.
func (s *Sandboxer) documentContains(ctx context.Context, w *workspace, op *protocol.SandboxOp, res *protocol.CheckResult) {
	path := op.Verification.CheckedFile()
	kind := protocol.DocumentKind(path)
	pol, err := compilePolicy(orEmpty(op.Policy))
	if op.Policy == nil || err != nil {
		res.Detail = "the verification was refused by the sandboxer: no policy verdict covers it"
		return
	}
	if !documents.Holds(kind) {
		res.Detail = fmt.Sprintf("this sandboxer cannot read %s: it was built without the %s document tools (go build -tags %s, or -tags documents)", path, kind, kind)
		return
	}
	data, err := (&tools.Env{Workspace: w.ws, Judge: verifyJudge(pol)}).ReadFile(path)
	switch {
	case errors.Is(err, protocol.ErrRefused):
		res.Detail = protocol.AsError(err).Message
		return
	case errors.Is(err, protocol.ErrNotFound):
		res.Detail = fmt.Sprintf("%s does not exist yet.", path)
		return
	case err != nil:
		res.Detail = fmt.Sprintf("%s cannot be checked: %s", path, protocol.AsError(err).Message)
		return
	}
	text, err := documents.Text(ctx, kind, data)
	switch {
	case err != nil:
		res.Detail = fmt.Sprintf("%s cannot be read as a %s document: %s", path, kind, protocol.AsError(err).Message)
	case strings.Contains(text, op.Verification.DocumentContains.Needle):
		res.Passed = true
		res.Detail = fmt.Sprintf("the text of %s contains the expected text.", path)
	default:
		res.Detail = fmt.Sprintf("the text of %s (%d characters) does not contain the expected text.", path, len([]rune(text)))
	}
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// boundBoth keeps the head and the tail of s within n bytes.
func boundBoth(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := n / 2
	return s[:h] + fmt.Sprintf("\n…[elided %d bytes]…\n", len(s)-n) + s[len(s)-(n-h):]
}
