package protocol

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// MCPSpec names the MCP servers whose tools a run is offered: stdio
// servers the sandboxer holding the workspace starts inside its sandbox,
// and HTTP servers it dials (streamable HTTP). See docs/contract.md.
type MCPSpec struct {
	Servers []MCPServer `json:"servers"`
}

// MCPServer is one MCP server. Exactly one of Command (a stdio server,
// started in the workspace) and URL (a streamable HTTP endpoint) is set.
type MCPServer struct {
	// Name is what its tools are offered under: mcp__<name>__<tool>.
	Name string `json:"name"`
	// Command is the program and its arguments, no shell.
	Command []string `json:"command,omitempty"`
	// Env is added to a stdio server's environment. The values are
	// secrets: they go to the server alone, and the trace keeps only the
	// keys (Contract.Redacted).
	Env map[string]string `json:"env,omitempty"`
	// URL is an http or https URL: https anywhere, plain http only to the
	// loopback.
	URL string `json:"url,omitempty"`
}

// Transport is "stdio" or "http".
func (s *MCPServer) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// MCPToolPrefix begins the name of every tool an MCP server offers, so no
// server's tool can take the name of a built-in one: no built-in begins
// with it, and a toolbox refuses a tool of its own that does.
const MCPToolPrefix = "mcp__"

// MaxMCPServers bounds the servers of one contract.
const MaxMCPServers = 16

// maxServerName bounds a server's name, so that mcp__<server>__<tool>
// leaves room for the tool under the 64 bytes providers take.
const maxServerName = 32

// MCPToolName is the name the tool of server is offered under.
func MCPToolName(server, tool string) string {
	return MCPToolPrefix + server + "__" + tool
}

// SplitMCPTool splits an offered name into its server and the server's
// own name of the tool; ok is false for a name that is not an MCP tool's.
// A server's name holds no "__", so the first one after the prefix ends
// it.
func SplitMCPTool(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, MCPToolPrefix)
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// RedactedValue stands for an MCP server's env value in the trace, which
// keeps the keys alone. A server whose env holds it cannot be started
// again (the sandboxer refuses, CodeMCP): its values were not kept.
const RedactedValue = "[redacted]"

// Server returns the server called name, or nil.
func (m *MCPSpec) Server(name string) *MCPServer {
	if m == nil {
		return nil
	}
	for i := range m.Servers {
		if m.Servers[i].Name == name {
			return &m.Servers[i]
		}
	}
	return nil
}

// Redacted returns c itself when no MCP server of it has env values, else
// a copy whose servers' env values are RedactedValue: what the trace, the
// run index and every reader of a run's contract see. The run's first
// coordinator keeps the values in memory, to start the servers and to pass
// them to the run's sub-agents.
func (c *Contract) Redacted() *Contract {
	if c == nil || c.MCP == nil {
		return c
	}
	secret := false
	for _, s := range c.MCP.Servers {
		secret = secret || len(s.Env) > 0
	}
	if !secret {
		return c
	}
	out := *c
	mcp := MCPSpec{Servers: make([]MCPServer, len(c.MCP.Servers))}
	for i, s := range c.MCP.Servers {
		if len(s.Env) > 0 {
			env := make(map[string]string, len(s.Env))
			for k := range s.Env {
				env[k] = RedactedValue
			}
			s.Env = env
		}
		mcp.Servers[i] = s
	}
	out.MCP = &mcp
	return &out
}

// validate checks the servers: named with distinct simple names, each
// with exactly one of a command and a URL.
func (m *MCPSpec) validate() error {
	if len(m.Servers) == 0 {
		return FieldError(CodeMissingField, "mcp.servers", `name at least one server, or leave "mcp" out`, "mcp has no servers")
	}
	if len(m.Servers) > MaxMCPServers {
		return FieldError(CodeInvalidField, "mcp.servers", fmt.Sprintf("name at most %d servers", MaxMCPServers), "%d servers", len(m.Servers))
	}
	seen := map[string]bool{}
	for i, s := range m.Servers {
		at := fmt.Sprintf("mcp.servers[%d]", i)
		if err := validServerName(s.Name, at+".name"); err != nil {
			return err
		}
		if seen[s.Name] {
			return FieldError(CodeInvalidField, at+".name", "give every server a name of its own; its tools are offered under it", "a server named %q comes twice", s.Name)
		}
		seen[s.Name] = true
		switch {
		case len(s.Command) == 0 && s.URL == "":
			return FieldError(CodeMissingField, at, `give "command" (a stdio server) or "url" (a streamable HTTP server)`, "server %q has neither a command nor a url", s.Name)
		case len(s.Command) > 0 && s.URL != "":
			return FieldError(CodeInvalidField, at, `give "command" or "url", not both`, "server %q has both a command and a url", s.Name)
		case s.URL != "":
			if len(s.Env) > 0 {
				return FieldError(CodeInvalidField, at+".env", `leave "env" out: it is the environment of a server the sandboxer starts, and an HTTP server runs elsewhere`, "server %q has a url and an env", s.Name)
			}
			if err := validServerURL(s.URL, at+".url"); err != nil {
				return err
			}
		default:
			if s.Command[0] == "" {
				return FieldError(CodeMissingField, at+".command", `give the program first, then its arguments, e.g. ["mcp-server-git", "--repository", "."]`, "the command of server %q has no program", s.Name)
			}
			for j, a := range s.Command {
				if strings.ContainsRune(a, 0) {
					return FieldError(CodeInvalidField, fmt.Sprintf("%s.command[%d]", at, j), "remove the NUL byte", "argument contains a NUL byte")
				}
			}
			for k, v := range s.Env {
				if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
					return FieldError(CodeInvalidField, at+".env", "use names without '=' or NUL bytes, and values without NUL bytes", "an env entry of server %q cannot be passed to a program", s.Name)
				}
			}
		}
	}
	return nil
}

// validServerName: a simple token whose underscores stand alone between
// other characters, at most maxServerName bytes: "__" ends the server's
// part of a tool's name, so a name may neither hold it nor end with "_".
func validServerName(name, field string) error {
	const hint = "use letters, digits, '-' and single '_' between them, at most 32 in all, such as \"github\""
	if name == "" {
		return FieldError(CodeMissingField, field, hint, "the server has no name")
	}
	if len(name) > maxServerName || !ValidToken(name) || strings.Contains(name, "__") || strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_") {
		return FieldError(CodeInvalidField, field, hint, "server name %q cannot stand in a tool name mcp__<server>__<tool>", name)
	}
	return nil
}

// validServerURL: https, or plain http to a loopback host, which is the
// only place a request in the clear stays on the machine.
func validServerURL(raw, field string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return FieldError(CodeInvalidField, field, "give an absolute URL such as https://mcp.example.com/mcp", "%q is not an absolute URL", raw)
	}
	if u.User != nil {
		return FieldError(CodeInvalidField, field, "leave credentials out of the URL; it is kept in the trace", "the URL of an MCP server carries a user name or password")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !LoopbackHost(u.Hostname()) {
			return FieldError(CodeInvalidField, field, "use https, or http only to 127.0.0.1, ::1 or localhost", "plain http to %s would carry the run's tool calls in the clear", u.Hostname())
		}
	default:
		return FieldError(CodeInvalidField, field, "use an https URL (or http to the loopback)", "scheme %q is not http or https", u.Scheme)
	}
	return nil
}

// LoopbackHost reports whether host is localhost or a loopback address
// (an IPv4 one written as IPv6 too; not one with a zone).
func LoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	// netip, not net: the sandbox's init links this package, and net
	// would make it a cgo program, started through the dynamic loader.
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// MCPSession is how one MCP server of a run's tree stands on the sandboxer
// holding it, on the reply of an operation: on an open, every server
// connected, with the tools it offers; on a tool call or a verification,
// the servers that died (Error says how); on a close, the servers
// disconnected because the tree's last run let go of them.
type MCPSession struct {
	Server    string `json:"server"`
	Transport string `json:"transport"`
	// Backend runs a stdio server ("native", "floor"); Unsandboxed is set
	// when it runs with no isolation (the floor).
	Backend     string `json:"backend,omitempty"`
	Unsandboxed bool   `json:"unsandboxed,omitempty"`
	// ConnectMS is how long starting (or dialling) and initialising took.
	ConnectMS int64 `json:"connect_ms,omitempty"`
	// Tools are the names offered (mcp__<server>__<tool>); Skipped the
	// server's tools not offered, each with why.
	Tools   []string `json:"tools,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// Error is why the server is gone (CodeMCP).
	Error *Error `json:"error,omitempty"`
}
