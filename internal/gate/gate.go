// Package gate maps tool calls and verifications to the policy acts they
// perform and takes the verdict: the coordinator before it dispatches a
// call, and the sandboxer again before it performs one, so an operation
// without a verdict covering it is refused where its effect would happen.
package gate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// The acts the built-in tools perform, and the argument that names what
// they act on. A tool not listed here (an embedder's own) is checked as an
// exec of its name, as io-harness does.
var toolActs = map[string]struct {
	act policy.Act
	arg string
}{
	"read_file":  {policy.Read, "path"},
	"view_image": {policy.Read, "path"},
	"write_file": {policy.Write, "path"},
	"edit_file":  {policy.Write, "path"},
	"exec":       {policy.Exec, "argv"},
	"grep":       {policy.Read, ""}, // filtered per file on the sandboxer
	"find":       {policy.Read, ""},
}

// Verdict decides one tool call under the run's policy. It returns the
// verdict and, when the call's arguments do not name what it acts on, an
// observation saying so (nothing is dispatched either way unless the
// verdict allows).
func Verdict(p *policy.Policy, call *protocol.ToolCall) (policy.Verdict, string) {
	ta, builtin := toolActs[call.Name]
	if !builtin {
		return p.Check(policy.Exec, call.Name), ""
	}
	if ta.arg == "" {
		return policy.Verdict{Effect: policy.Allow, Act: ta.act, Target: call.Name}, ""
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return policy.Verdict{}, fmt.Sprintf("[%s failed] the arguments are not a JSON object: %s", call.Name, err.Error())
	}
	raw, ok := args[ta.arg]
	if !ok {
		return policy.Verdict{}, fmt.Sprintf("[%s failed] the %q argument is missing", call.Name, ta.arg)
	}
	if ta.act == policy.Exec {
		var argv []string
		if err := json.Unmarshal(raw, &argv); err != nil || len(argv) == 0 {
			return policy.Verdict{}, fmt.Sprintf(`[%s failed] "argv" must be a non-empty array of strings, program first, such as ["go", "test", "./..."]; a shell string is not accepted`, call.Name)
		}
		return p.CheckExec(argv), ""
	}
	var path string
	if err := json.Unmarshal(raw, &path); err != nil {
		return policy.Verdict{}, fmt.Sprintf("[%s failed] %q must be a string", call.Name, ta.arg)
	}
	return p.CheckPath(ta.act, path), ""
}

// Allowed checks that the verification may run: a command only under an
// explicit allow to exec it, a file_contains check only under an explicit
// allow to read its file, since a gate cannot stop to ask anyone. It
// returns the reason when it may not.
func Allowed(p *policy.Policy, v protocol.Verification) (bool, string) {
	if c := v.FileContains; c != nil {
		// The check reads the file: a file the agent may not read must not
		// answer questions about its content either.
		vd := p.CheckPath(policy.Read, c.Path)
		if vd.Effect == policy.Allow {
			return true, ""
		}
		return false, fmt.Sprintf("the verification reads %s, which the policy does not allow to read (%s); a verification reads only under an explicit allow",
			c.Path, vd.Refusal())
	}
	if v.Command == nil {
		return true, ""
	}
	vd := p.CheckExec(v.Command.Argv)
	if vd.Effect == policy.Allow {
		return true, ""
	}
	how := "the default for exec is " + vd.Effect.String()
	if vd.Rule != "" {
		how = fmt.Sprintf("rule %q in layer %q says %s", vd.Rule, vd.Layer, vd.Effect)
	}
	return false, fmt.Sprintf("the verification command `%s` is not allowed by the policy (%s); a verification runs only under an explicit allow: add exec allow rules covering %q and the whole command",
		strings.Join(v.Command.Argv, " "), how, v.Command.Argv[0])
}
