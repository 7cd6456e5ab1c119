package sandboxer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// linkWorkspace makes a workspace whose links lead to files the policy
// denies or asks about.
func linkWorkspace(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{
		".env":           "API_KEY=SENTINEL-ENV\n",
		"calc_test.go":   "package calc // SENTINEL-TEST\n",
		"docs/readme.md": "the readme\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"notes.txt": ".env", "alias.go": "calc_test.go", "readme.lnk": "docs/readme.md"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// linkPolicy asks before a test file is written and allows the rest;
// the builtin secrets deny .env.
var linkPolicy = &protocol.Policy{
	Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
		{Act: "write", Effect: "ask", Pattern: "*_test.go"},
		{Act: "read", Effect: "ask", Pattern: "docs/*"},
	}}},
	Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"},
}

// TestToolsJudgeLinkTargets sends tool calls through links to the
// sandboxer, as the coordinator would after allowing their names: each is
// judged again by where it leads, and an approval covers only the path the
// call names.
func TestToolsJudgeLinkTargets(t *testing.T) {
	root := linkWorkspace(t)
	nc, _ := start(t, root)
	n := 0
	op := func(c *protocol.ToolCall, approval string) *protocol.Observation {
		t.Helper()
		n++
		r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.1." + string(rune('a'+n)) + ".1", Run: "r1", Kind: protocol.OpTool,
			Workspace: root, Call: c, Policy: linkPolicy, Approval: approval}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Observation == nil {
			t.Fatalf("%s = %+v, want an observation", c.Name, r)
		}
		return r.Observation
	}
	tests := []struct {
		name     string
		call     *protocol.ToolCall
		approval string
		refused  *protocol.Refusal // nil: the call goes ahead
		says     []string
	}{
		{"read through a link to a secret", call("read_file", `{"path":"notes.txt"}`), "",
			&protocol.Refusal{Act: "read", Target: ".env", Effect: "deny", Rule: ".env", Layer: "builtin-secrets"},
			[]string{`[read refused] ".env"`, "notes.txt leads to .env through a symbolic link"}},
		{"write through a link to a secret", call("write_file", `{"path":"notes.txt","content":"pwned"}`), "",
			&protocol.Refusal{Act: "write", Target: ".env", Effect: "deny", Rule: ".env", Layer: "builtin-secrets"}, []string{`".env"`}},
		{"approved write whose link leads to an ask", call("write_file", `{"path":"alias.go","content":"package calc\n"}`), "r1-1-0",
			&protocol.Refusal{Act: "write", Target: "calc_test.go", Effect: "ask", Rule: "*_test.go", Layer: "app"},
			[]string{`Name the real path "calc_test.go"`, "alias.go leads to calc_test.go"}},
		{"unapproved edit whose link leads to an ask", call("edit_file", `{"path":"alias.go","search":"package","replace":"pwned"}`), "",
			&protocol.Refusal{Act: "write", Target: "calc_test.go", Effect: "ask", Rule: "*_test.go", Layer: "app"}, []string{"calc_test.go"}},
		{"read whose link leads to an ask", call("read_file", `{"path":"readme.lnk"}`), "r1-1-0",
			&protocol.Refusal{Act: "read", Target: "docs/readme.md", Effect: "ask", Rule: "docs/*", Layer: "app"}, []string{`Name the real path "docs/readme.md"`}},
		{"grep shows nothing of a secret", call("grep", `{"pattern":"SENTINEL"}`), "", nil, []string{"SENTINEL-TEST"}},
		{"find leaves out a link to a secret", call("find", `{"name_glob":"*.txt"}`), "", nil, []string{`no paths match "*.txt"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := op(tt.call, tt.approval)
			if strings.Contains(obs.Content, "SENTINEL-ENV") {
				t.Errorf("%s = %q, shows the secret", tt.call.Name, obs.Content)
			}
			for _, s := range tt.says {
				if !strings.Contains(obs.Content, s) {
					t.Errorf("%s = %q, want it to say %q", tt.call.Name, obs.Content, s)
				}
			}
			switch {
			case tt.refused == nil && obs.IsError:
				t.Errorf("%s = %q, want it to go ahead", tt.call.Name, obs.Content)
			case tt.refused != nil && (!obs.IsError || obs.Refused == nil || *obs.Refused != *tt.refused):
				t.Errorf("%s = %+v (refused %+v), want refused %+v", tt.call.Name, obs, obs.Refused, tt.refused)
			}
		})
	}
	// An approval does cover the path the person was asked about.
	if obs := op(call("write_file", `{"path":"calc_test.go","content":"package calc\n"}`), "r1-1-0"); obs.IsError || !obs.Changed {
		t.Errorf("approved write of calc_test.go = %+v, want it written", obs)
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".env")); string(b) != "API_KEY=SENTINEL-ENV\n" {
		t.Errorf(".env = %q after writes through a link", b)
	}
}

// TestVerifyJudgesLinkTargets checks a file_contains verification through
// a link: the target must be explicitly allowed to be read, or the check
// fails saying why, without answering for the file.
func TestVerifyJudgesLinkTargets(t *testing.T) {
	root := linkWorkspace(t)
	nc, _ := start(t, root)
	tests := []struct {
		name, path, needle string
		passed             bool
		detail             string
	}{
		{"link to a secret", "notes.txt", "SENTINEL-ENV", false, `the verification reads .env, which the policy does not allow to read`},
		{"link to a file read asks about", "readme.lnk", "readme", false, `reads docs/readme.md, which the policy does not allow`},
		{"link to an allowed file", "alias.go", "SENTINEL-TEST", true, "contains the expected text"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := protocol.Verification{FileContains: &protocol.ContainsCheck{Path: tt.path, Needle: tt.needle}}
			r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "vl" + string(rune('a'+i)), Run: "r1", Kind: protocol.OpVerify,
				Workspace: root, Verification: &v, Policy: linkPolicy}, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.Check == nil || r.Check.Passed != tt.passed || !strings.Contains(r.Check.Detail, tt.detail) {
				t.Errorf("verify file_contains %s = %+v, want passed=%v with %q", tt.path, r.Check, tt.passed, tt.detail)
			}
		})
	}
}
