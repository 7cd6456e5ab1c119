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
//
// The git tools act on paths too, not on git: a call of theirs can only
// run the fixed command the tool builds, so it is judged by the files it
// reads or writes, never as an exec. git_status, git_diff and git_log read
// each path of their "paths" (the whole workspace, ".", when none is
// given); git_add writes each path it stages, since what it stages is what
// the next commit records; git_commit writes the workspace ".": a commit
// records every path staged, each of which was judged when git_add staged
// it, and the repository's own files it changes (.git, which the
// builtin-git layer denies every tool to write) are never named.
var toolActs = map[string]struct {
	act policy.Act
	arg string
	// list says arg is a list of paths, each judged, the strictest verdict
	// winning; an empty or absent list is the workspace "." unless the
	// list is required.
	list, required bool
	// at is the target of a tool that names none in its arguments.
	at string
}{
	"read_file":  {act: policy.Read, arg: "path"},
	"view_image": {act: policy.Read, arg: "path"},
	"write_file": {act: policy.Write, arg: "path"},
	"edit_file":  {act: policy.Write, arg: "path"},
	"exec":       {act: policy.Exec, arg: "argv"},
	"grep":       {act: policy.Read}, // filtered per file on the sandboxer
	"find":       {act: policy.Read},
	"git_status": {act: policy.Read, arg: "paths", list: true}, // and filtered per file on the sandboxer
	"git_diff":   {act: policy.Read, arg: "paths", list: true},
	"git_log":    {act: policy.Read, arg: "paths", list: true},
	"git_add":    {act: policy.Write, arg: "paths", list: true, required: true},
	"git_commit": {act: policy.Write, at: "."},
	// read_skill as the coordinator sends it for a skills snapshot: the
	// read of "skills/" and the skill's path in the snapshot, which the
	// sandboxer answers from its own copy (the model's read_skill names
	// the skill, and the coordinator turns the name into this path).
	"read_skill": {act: policy.Read, arg: "path"},
}

// Verdict decides one tool call under the run's policy. It returns the
// verdict and, when the call's arguments do not name what it acts on, an
// observation saying so (nothing is dispatched either way unless the
// verdict allows). A call naming several paths gets the strictest of
// their verdicts, the first of them on a tie.
func Verdict(p *policy.Policy, call *protocol.ToolCall) (policy.Verdict, string) {
	return VerdictOf(p, call, nil)
}

// VerdictOf is Verdict for a tool that may declare what its calls act on
// (g, from its ToolSpec's Gate; nil for none): a declared act is judged on
// the target its argument names, as a built-in's is. A built-in is judged
// as always, whatever g says, and a tool that declares nothing as an exec
// of its name.
func VerdictOf(p *policy.Policy, call *protocol.ToolCall, g *protocol.ToolGate) (policy.Verdict, string) {
	ta, builtin := toolActs[call.Name]
	if !builtin {
		if g == nil {
			return p.Check(policy.Exec, call.Name), ""
		}
		act, err := policy.ParseAct(g.Act)
		if err != nil || g.Arg == "" {
			return policy.Verdict{}, fmt.Sprintf("[%s failed] the tool declares an act the policy cannot judge (%q on %q); its sandboxer must be fixed", call.Name, g.Act, g.Arg)
		}
		ta.act, ta.arg = act, g.Arg
	}
	if ta.at != "" {
		return p.CheckPath(ta.act, ta.at), ""
	}
	if ta.arg == "" {
		return policy.Verdict{Effect: policy.Allow, Act: ta.act, Target: call.Name}, ""
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return policy.Verdict{}, fmt.Sprintf("[%s failed] the arguments are not a JSON object: %s", call.Name, err.Error())
	}
	if ta.list {
		paths, bad := pathList(call.Name, args[ta.arg], ta.required)
		if bad != "" {
			return policy.Verdict{}, bad
		}
		var v policy.Verdict
		for _, path := range paths {
			if pv := p.CheckPath(ta.act, path); pv.Effect > v.Effect {
				v = pv
			}
		}
		return v, ""
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
	var target string
	if err := json.Unmarshal(raw, &target); err != nil {
		return policy.Verdict{}, fmt.Sprintf("[%s failed] %q must be a string", call.Name, ta.arg)
	}
	if ta.act == policy.Net {
		host, port := hostPort(target)
		if host == "" {
			return policy.Verdict{}, fmt.Sprintf("[%s failed] %q must name a host, such as \"api.example.com\" or \"https://api.example.com/x\"", call.Name, ta.arg)
		}
		return p.CheckNet(host, port), ""
	}
	return p.CheckPath(ta.act, target), ""
}

// hostPort is the host and port a net target names: a URL or a host with
// an optional port.
func hostPort(target string) (string, string) {
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		return u.Hostname(), u.Port()
	}
	if h, p, err := net.SplitHostPort(target); err == nil {
		return h, p
	}
	if strings.ContainsAny(target, "/ ") {
		return "", ""
	}
	return target, ""
}

// pathList reads a "paths" argument: the paths it lists, or the workspace
// "." when it is absent, null or empty and not required. It returns the
// observation for arguments that are not a list of strings, or a required
// list that is empty.
func pathList(tool string, raw json.RawMessage, required bool) ([]string, string) {
	var paths []string
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &paths); err != nil {
			return nil, fmt.Sprintf(`[%s failed] "paths" must be an array of strings, workspace paths such as ["src/main.go", "docs"]`, tool)
		}
	}
	if len(paths) == 0 {
		if required {
			return nil, fmt.Sprintf(`[%s failed] "paths" is missing or empty: name the files or directories to stage, such as ["src/main.go"] (["."] for the whole workspace)`, tool)
		}
		return []string{"."}, ""
	}
	return paths, ""
}

// Named returns the workspace paths a built-in file or git tool's call
// names, the ones Verdict judged (and a person was asked about, for an
// ask): the path of a file tool, the paths of a git tool ("." for none,
// and for git_commit), or nil for a call that names none (grep, find,
// exec, a tool of an embedder's) or whose arguments do not say.
func Named(call *protocol.ToolCall) []string { return NamedOf(call, nil) }

// NamedOf is Named for a tool that may declare what its calls act on (g):
// a declared read or write names the path its argument holds.
func NamedOf(call *protocol.ToolCall, g *protocol.ToolGate) []string {
	ta, ok := toolActs[call.Name]
	if !ok && g != nil {
		if act, err := policy.ParseAct(g.Act); err == nil {
			ta.act, ta.arg, ok = act, g.Arg, true
		}
	}
	switch {
	case !ok || ta.act != policy.Read && ta.act != policy.Write:
		return nil
	case ta.at != "":
		return []string{ta.at}
	case ta.arg == "":
		return nil
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(call.Arguments, &args) != nil {
		return nil
	}
	if ta.list {
		paths, bad := pathList(call.Name, args[ta.arg], ta.required)
		if bad != "" {
			return nil
		}
		return paths
	}
	var p string
	if json.Unmarshal(args[ta.arg], &p) != nil {
		return nil
	}
	return []string{p}
}

// Covering returns the path of named (Named of the call to tool) that an
// approval of the call covers rel by: rel itself, named as it is; for a
// git tool, also a named directory rel lies beneath, since git never
// follows a symbolic link (it stages the link itself), so what lies
// beneath a directory the person saw named is what the call really
// touches. It returns "" when no named path covers rel.
func Covering(tool string, named []string, rel string) string {
	for _, n := range named {
		if path.Clean(n) == rel {
			return n
		}
	}
	if ta, ok := toolActs[tool]; !ok || !ta.list && ta.at == "" {
		return ""
	}
	for _, n := range named {
		if c := path.Clean(n); c == "." || strings.HasPrefix(rel, c+"/") {
			return rel
		}
	}
	return ""
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
