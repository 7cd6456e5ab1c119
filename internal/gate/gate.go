// Package gate maps tool calls and verifications to the policy acts they
// perform and takes the verdict: the coordinator before it dispatches a
// call, and the sandboxer again before it performs one, so an operation
// without a verdict covering it is refused where its effect would happen.
//
// Verdict and Allowed judge a call by the path it names. Only the
// sandboxer can see where that path really leads (symbolic links inside
// the workspace), so it also asks Path, for a tool call, and Reads, for a
// verification, about every path the resolution passes through: a link is
// judged by its target as well as by its name, and the strictest verdict
// wins.
package gate

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path"
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

// Named returns the workspace path a built-in file tool's call names, the
// one Verdict judged (and a person was asked about, for an ask), or "" for
// a call that names none (grep, find, exec, a tool of an embedder's) or
// whose arguments do not say.
func Named(call *protocol.ToolCall) string {
	ta, ok := toolActs[call.Name]
	if !ok || ta.arg == "" || (ta.act != policy.Read && ta.act != policy.Write) {
		return ""
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(call.Arguments, &args) != nil {
		return ""
	}
	var p string
	if json.Unmarshal(args[ta.arg], &p) != nil {
		return ""
	}
	return p
}

// Allowed checks that the verification may run: a command only under an
// explicit allow to exec it, a file_contains check only under an explicit
// allow to read its file, since a gate cannot stop to ask anyone. It
// returns the reason when it may not.
func Allowed(p *policy.Policy, v protocol.Verification) (bool, string) {
	if c := v.FileContains; c != nil {
		// The check reads the file: a file the agent may not read must not
		// answer questions about its content either.
		if why := Reads(p, c.Path); why != "" {
			return false, why
		}
		return true, ""
	}
	if v.Command == nil {
		return true, ""
	}
	vd := p.CheckExec(v.Command.Argv)
	if vd.Effect == policy.Allow {
		return true, ""
	}
	how := fmt.Sprintf("%s says %s", vd.DecidedBy(), vd.Effect)
	return false, fmt.Sprintf("the verification command `%s` is not allowed by the policy (%s); a verification runs only under an explicit allow: add exec allow rules covering %q and the whole command",
		strings.Join(v.Command.Argv, " "), how, v.Command.Argv[0])
}

// Reads decides whether a verification may read rel: the path its
// file_contains names, or one that path leads to through a symbolic link.
// Only an explicit allow lets it, as in Allowed. It returns "" when it
// may, else the reason.
func Reads(p *policy.Policy, rel string) string {
	vd := p.CheckPath(policy.Read, rel)
	if vd.Effect == policy.Allow {
		return ""
	}
	return fmt.Sprintf("the verification reads %s, which the policy does not allow to read (%s); a verification reads only under an explicit allow",
		rel, vd.Refusal())
}

// Path decides act (Read or Write) on rel, one path a file tool's call
// really reaches: named, the path the call names, or a path its
// resolution passes through (a symbolic link's target). named is "" for a
// call that names no path (grep, find). approved says a person approved
// the call: the coordinator asked them about named, so an ask is let
// through for named alone, never for a path a link leads to, and what a
// person approves is what changes. A deny is never let through. It returns
// the verdict and, when the act may not go on, the refusal the model
// reads: for an ask on a link's target, it says to name the real path, so
// that the approval is asked for what really changes.
func Path(p *policy.Policy, act policy.Act, rel, named string, approved bool) (policy.Verdict, string) {
	v := p.CheckPath(act, rel)
	target := named == "" || path.Clean(named) != rel
	switch {
	case v.Effect == policy.Allow:
		return v, ""
	case v.Effect == policy.Ask && approved && !target:
		return v, ""
	case v.Effect == policy.Ask && target && named != "":
		how := v.DecidedBy()
		return v, fmt.Sprintf("[%s refused] %q: %s asks a person first, and a person's approval is asked for the path a call names, never for where a symbolic link leads. Name the real path %q in the call, so that the person approving sees what really changes.",
			act, rel, how, rel)
	}
	return v, v.Refusal()
}

// Server decides whether the MCP server s may be started or dialled: a
// stdio server's command is run as exec of its argv is, and an HTTP
// server's URL is dialled as net to its host and port is; either only
// under an explicit allow, since nobody is asked when a run opens its
// workspace. It returns "" when it may, else the reason, written for the
// contract's author.
func Server(p *policy.Policy, s *protocol.MCPServer) string {
	if s.URL == "" {
		v := p.CheckExec(s.Command)
		if v.Effect == policy.Allow {
			return ""
		}
		return fmt.Sprintf("the MCP server %q would run `%s`, which the policy does not allow (%s says %s); a server starts only under an explicit allow: add an exec allow rule covering %q and the whole command",
			s.Name, strings.Join(s.Command, " "), v.DecidedBy(), v.Effect, s.Command[0])
	}
	host, port, ok := ServerHost(s.URL)
	if !ok {
		return fmt.Sprintf("the MCP server %q has a URL without a host: %s", s.Name, s.URL)
	}
	v := p.CheckNet(host, port)
	if v.Effect == policy.Allow {
		return ""
	}
	return fmt.Sprintf("the MCP server %q is at %s, which the policy does not allow to dial (%s says %s); a server is dialled only under an explicit allow: add a net allow rule for %q",
		s.Name, net.JoinHostPort(host, port), v.DecidedBy(), v.Effect, host)
}

// ServerHost is the host and port an MCP server's URL dials: the port
// the URL names, else 443 for https and 80 for http.
func ServerHost(raw string) (host, port string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", "", false
	}
	port = u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return u.Hostname(), port, true
}
