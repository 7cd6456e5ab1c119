package gate

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

func TestVerdicts(t *testing.T) {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{
		{Act: "write", Effect: "allow", Pattern: "*.go"},
		{Act: "exec", Effect: "allow", Pattern: "go"},
		{Act: "exec", Effect: "allow", Pattern: "go test*"},
	}}}, Defaults: &protocol.Defaults{Write: "deny", Exec: "deny"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, args string
		want       policy.Effect
		bad        bool
	}{
		{"read_file", `{"path":"a.go"}`, policy.Allow, false},
		{"read_file", `{"path":".env"}`, policy.Deny, false},
		{"write_file", `{"path":"a.go","content":""}`, policy.Allow, false},
		{"write_file", `{"path":"a.txt","content":""}`, policy.Deny, false},
		{"edit_file", `{"path":"../a.go"}`, policy.Deny, false},
		{"exec", `{"argv":["go","test","./..."]}`, policy.Allow, false},
		{"exec", `{"argv":["go","build"]}`, policy.Deny, false},
		// A program given by path is checked as given and by its base name, and
		// the stricter wins: an allow for go is not an allow for ./go, which
		// the agent may have written.
		{"exec", `{"argv":["./go","test"]}`, policy.Deny, false},
		{"exec", `{"argv":"go test"}`, 0, true},
		{"exec", `{}`, 0, true},
		{"write_file", `{"path":7}`, 0, true},
		{"grep", `{"pattern":"x"}`, policy.Allow, false},
		{"my_tool", `{}`, policy.Deny, false},
	}
	for _, tt := range tests {
		v, bad := Verdict(pol, &protocol.ToolCall{Name: tt.tool, Arguments: json.RawMessage(tt.args)})
		if (bad != "") != tt.bad || (!tt.bad && v.Effect != tt.want) {
			t.Errorf("verdict(%s %s) = %v %q, want %v (bad arguments: %v)", tt.tool, tt.args, v.Effect, bad, tt.want, tt.bad)
		}
	}
	if ok, why := Allowed(pol, protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"go", "test", "./..."}}}); !ok {
		t.Errorf("gate go test refused: %s", why)
	}
	if ok, why := Allowed(pol, protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"make", "check"}}}); ok || !strings.Contains(why, "explicit allow") {
		t.Errorf("gate make check = %v %q, want refused with a reason", ok, why)
	}
}

// TestPathOfALinkTarget checks the verdict the sandboxer takes on each
// path a call's resolution passes through: an approval covers the path
// the call names and no other, a deny is never covered, and an ask on a
// link's target tells the model to name the real path.
func TestPathOfALinkTarget(t *testing.T) {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
		{Act: "write", Effect: "ask", Pattern: "*_test.go"},
		{Act: "read", Effect: "deny", Pattern: "private/*"},
	}}}, Defaults: &protocol.Defaults{Read: "allow", Write: "allow"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		act            policy.Act
		rel, named     string
		approved, want bool
		says           string
	}{
		{"allowed target", policy.Write, "calc.go", "alias.go", false, true, ""},
		{"approved named path", policy.Write, "calc_test.go", "calc_test.go", true, true, ""},
		{"approved named path, spelled another way", policy.Write, "calc_test.go", "./calc_test.go", true, true, ""},
		{"approval does not cover a link's target", policy.Write, "calc_test.go", "alias.go", true, false, `Name the real path "calc_test.go"`},
		{"ask on a target without approval", policy.Write, "calc_test.go", "alias.go", false, false, `rule "*_test.go" in layer "app" asks a person first`},
		{"ask on the named path without approval", policy.Write, "calc_test.go", "calc_test.go", false, false, "requires a person's approval"},
		{"grep and find name nothing", policy.Write, "calc_test.go", "", true, false, "requires a person's approval"},
		{"deny on a target", policy.Read, "private/k", "notes.txt", true, false, `denied by rule "private/*"`},
		{"deny on the approved named path", policy.Read, "private/k", "private/k", true, false, "denied"},
	}
	for _, tt := range tests {
		_, why := Path(pol, tt.act, tt.rel, tt.named, tt.approved)
		if (why == "") != tt.want || !strings.Contains(why, tt.says) {
			t.Errorf("%s: Path(%s %q, named %q, approved %v) = %q, want allowed %v saying %q", tt.name, tt.act, tt.rel, tt.named, tt.approved, why, tt.want, tt.says)
		}
	}
	if why := Reads(pol, "private/k"); !strings.Contains(why, "explicit allow") {
		t.Errorf("Reads(private/k) = %q, want refused", why)
	}
	askRead, _ := policy.FromProtocol(&protocol.Policy{Defaults: &protocol.Defaults{Read: "ask"}})
	if why := Reads(askRead, "a.txt"); why == "" {
		t.Error("Reads under an ask default = allowed, want refused: a verification cannot ask")
	}
	for call, want := range map[*protocol.ToolCall][]string{
		{Name: "write_file", Arguments: json.RawMessage(`{"path":"a/b.go","content":""}`)}: {"a/b.go"},
		{Name: "view_image", Arguments: json.RawMessage(`{"path":"p.png"}`)}:               {"p.png"},
		{Name: "grep", Arguments: json.RawMessage(`{"pattern":"x"}`)}:                      nil,
		{Name: "exec", Arguments: json.RawMessage(`{"argv":["ls"]}`)}:                      nil,
		{Name: "read_file", Arguments: json.RawMessage(`{"path":7}`)}:                      nil,
		{Name: "git_add", Arguments: json.RawMessage(`{"paths":["a.go","docs"]}`)}:         {"a.go", "docs"},
		{Name: "git_add", Arguments: json.RawMessage(`{"paths":[]}`)}:                      nil,
		{Name: "git_status", Arguments: json.RawMessage(`{}`)}:                             {"."},
		{Name: "git_commit", Arguments: json.RawMessage(`{"message":"m"}`)}:                {"."},
	} {
		if got := Named(call); !slices.Equal(got, want) {
			t.Errorf("Named(%s %s) = %q, want %q", call.Name, call.Arguments, got, want)
		}
	}
}

// TestDeclaredVerdicts: a tool of an embedder's that declares what its
// calls act on is judged on the target its argument names, as a built-in
// is; one that declares nothing, as an exec of its name; and a built-in is
// judged as always, whatever a declaration says.
func TestDeclaredVerdicts(t *testing.T) {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{
		{Act: "read", Effect: "deny", Pattern: "secret/*"},
		{Act: "exec", Effect: "allow", Pattern: "page_rank"},
		{Act: "net", Effect: "allow", Pattern: "api.example.com"},
	}}}, Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}})
	if err != nil {
		t.Fatal(err)
	}
	read := &protocol.ToolGate{Act: "read", Arg: "path"}
	tests := []struct {
		tool, args string
		g          *protocol.ToolGate
		want       policy.Effect
		bad        bool
	}{
		{"word_count", `{"path":"notes.txt"}`, read, policy.Allow, false},
		{"word_count", `{"path":"secret/key"}`, read, policy.Deny, false},
		{"word_count", `{"path":"notes.txt"}`, nil, policy.Deny, false}, // undeclared: exec word_count
		{"page_rank", `{}`, nil, policy.Allow, false},
		{"save", `{"to":"out.txt"}`, &protocol.ToolGate{Act: "write", Arg: "to"}, policy.Deny, false},
		{"run", `{"cmd":["page_rank"]}`, &protocol.ToolGate{Act: "exec", Arg: "cmd"}, policy.Allow, false},
		{"fetch", `{"url":"https://api.example.com/v1"}`, &protocol.ToolGate{Act: "net", Arg: "url"}, policy.Allow, false},
		{"fetch", `{"url":"https://evil.example.net/"}`, &protocol.ToolGate{Act: "net", Arg: "url"}, policy.Deny, false},
		{"word_count", `{}`, read, 0, true},
		{"word_count", `{"path":3}`, read, 0, true},
		{"odd", `{"x":"y"}`, &protocol.ToolGate{Act: "delete", Arg: "x"}, 0, true},
		{"read_file", `{"path":"secret/key"}`, &protocol.ToolGate{Act: "exec", Arg: "path"}, policy.Deny, false},
	}
	for _, tt := range tests {
		v, bad := VerdictOf(pol, &protocol.ToolCall{Name: tt.tool, Arguments: json.RawMessage(tt.args)}, tt.g)
		if (bad != "") != tt.bad || (!tt.bad && v.Effect != tt.want) {
			t.Errorf("VerdictOf(%s %s, %+v) = %v %q, want %v (bad %v)", tt.tool, tt.args, tt.g, v.Effect, bad, tt.want, tt.bad)
		}
	}
	if got := NamedOf(&protocol.ToolCall{Name: "word_count", Arguments: json.RawMessage(`{"path":"notes.txt"}`)}, read); len(got) != 1 || got[0] != "notes.txt" {
		t.Errorf("NamedOf = %q, want notes.txt", got)
	}
}

// TestGitTools checks the acts the git tools are judged as: reads of each
// path they name (the workspace when none), a write of each path git_add
// stages, a write of the workspace for git_commit, the strictest verdict
// of a list winning; and never an exec, whatever the arguments hold.
func TestGitTools(t *testing.T) {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
		{Act: "write", Effect: "allow", Pattern: "src/*"},
		{Act: "write", Effect: "ask", Pattern: "docs/*"},
		{Act: "write", Effect: "deny", Pattern: "secret/*"},
		{Act: "read", Effect: "deny", Pattern: "private/*"},
		{Act: "exec", Effect: "deny", Pattern: "git*"},
	}}}, Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "allow"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, args string
		act        policy.Act
		want       policy.Effect
		target     string
		bad        string
	}{
		{"git_status", `{}`, policy.Read, policy.Allow, ".", ""},
		{"git_status", `{"paths":[]}`, policy.Read, policy.Allow, ".", ""},
		{"git_diff", `{"paths":["src/a.go","private/k"]}`, policy.Read, policy.Deny, "private/k", ""},
		{"git_log", `{"paths":["src"]}`, policy.Read, policy.Allow, "src", ""},
		{"git_add", `{"paths":["src/a.go"]}`, policy.Write, policy.Allow, "src/a.go", ""},
		{"git_add", `{"paths":["src/a.go","docs/x.md"]}`, policy.Write, policy.Ask, "docs/x.md", ""},
		{"git_add", `{"paths":["docs/x.md","secret/k","src/a.go"]}`, policy.Write, policy.Deny, "secret/k", ""},
		{"git_add", `{"paths":[".git/hooks/pre-commit"]}`, policy.Write, policy.Deny, ".git/hooks/pre-commit", ""},
		// A flag is a path like any other here: judged as a file name.
		{"git_add", `{"paths":["--upload-pack=x"]}`, policy.Write, policy.Deny, "--upload-pack=x", ""},
		{"git_commit", `{"message":"--amend"}`, policy.Write, policy.Deny, ".", ""},
		{"git_add", `{}`, 0, 0, "", `"paths" is missing or empty`},
		{"git_add", `{"paths":[]}`, 0, 0, "", `"paths" is missing or empty`},
		{"git_add", `{"paths":"src/a.go"}`, 0, 0, "", "must be an array of strings"},
		{"git_diff", `{"paths":[1]}`, 0, 0, "", "must be an array of strings"},
	}
	for _, tt := range tests {
		v, bad := Verdict(pol, &protocol.ToolCall{Name: tt.tool, Arguments: json.RawMessage(tt.args)})
		if tt.bad != "" {
			if !strings.Contains(bad, tt.bad) {
				t.Errorf("Verdict(%s %s) = %v %q, want bad arguments saying %q", tt.tool, tt.args, v, bad, tt.bad)
			}
			continue
		}
		if bad != "" || v.Act != tt.act || v.Effect != tt.want || v.Target != tt.target {
			t.Errorf("Verdict(%s %s) = %s %s %q (%q), want %s %s %q", tt.tool, tt.args, v.Act, v.Effect, v.Target, bad, tt.act, tt.want, tt.target)
		}
	}
	allowAll, err := policy.FromProtocol(&protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Verdict(allowAll, &protocol.ToolCall{Name: "git_commit", Arguments: json.RawMessage(`{"message":"m"}`)}); v.Effect != policy.Allow {
		t.Errorf("git_commit under write allow = %v, want allow", v)
	}
	// An approval of a git call covers what lies beneath a directory it
	// names; a file tool's covers its one path.
	for _, tt := range []struct {
		tool  string
		named []string
		rel   string
		want  string
	}{
		{"git_add", []string{"docs"}, "docs/x.md", "docs/x.md"},
		{"git_add", []string{"."}, "docs/x.md", "docs/x.md"},
		{"git_add", []string{"docs"}, "docsx/y.md", ""},
		{"git_add", []string{"./docs/x.md"}, "docs/x.md", "./docs/x.md"},
		{"write_file", []string{"docs"}, "docs/x.md", ""},
		{"write_file", []string{"docs/x.md"}, "docs/x.md", "docs/x.md"},
	} {
		if got := Covering(tt.tool, tt.named, tt.rel); got != tt.want {
			t.Errorf("Covering(%s, %q, %q) = %q, want %q", tt.tool, tt.named, tt.rel, got, tt.want)
		}
	}
}

func TestServer(t *testing.T) {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{
		{Act: "exec", Effect: "allow", Pattern: "mcp-server-git*"},
		{Act: "exec", Effect: "ask", Pattern: "npx*"},
		{Act: "net", Effect: "allow", Pattern: "mcp.example.com"},
		{Act: "net", Effect: "allow", Pattern: "127.0.0.1:8080"},
		{Act: "exec", Effect: "allow", Pattern: "mcp__github__*"},
		{Act: "exec", Effect: "deny", Pattern: "mcp__github__delete_*"},
	}}}, Defaults: &protocol.Defaults{Exec: "deny", Net: "deny"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		srv  protocol.MCPServer
		ok   bool
	}{
		{"allowed command", protocol.MCPServer{Name: "git", Command: []string{"mcp-server-git", "--repository", "."}}, true},
		{"command asked about", protocol.MCPServer{Name: "n", Command: []string{"npx", "server"}}, false},
		{"command by default", protocol.MCPServer{Name: "x", Command: []string{"other"}}, false},
		{"allowed host", protocol.MCPServer{Name: "w", URL: "https://mcp.example.com/mcp"}, true},
		{"allowed host and port", protocol.MCPServer{Name: "w", URL: "http://127.0.0.1:8080/mcp"}, true},
		{"another port", protocol.MCPServer{Name: "w", URL: "http://127.0.0.1:9090/mcp"}, false},
		{"another host", protocol.MCPServer{Name: "w", URL: "https://evil.example.com/mcp"}, false},
	}
	for _, tt := range tests {
		if why := Server(pol, &tt.srv); (why == "") != tt.ok {
			t.Errorf("%s: Server() = %q, want allowed %v", tt.name, why, tt.ok)
		}
	}
	// A call of an MCP tool is an exec of its name: the deny means what it
	// reads.
	for name, want := range map[string]policy.Effect{"mcp__github__list_issues": policy.Allow, "mcp__github__delete_repo": policy.Deny, "mcp__other__x": policy.Deny} {
		if v, _ := Verdict(pol, &protocol.ToolCall{Name: name, Arguments: json.RawMessage(`{}`)}); v.Effect != want {
			t.Errorf("Verdict(%s) = %s, want %s", name, v.Effect, want)
		}
	}
}
