package sandboxer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
)

// TestGitToolsOnTheSandboxer: the git tools are offered for a workspace
// that is a repository and not for one that is not; the sandboxer judges
// them as the coordinator does (a deny on a path refuses git_add of it, an
// ask needs the approval, which covers what lies beneath a directory the
// call names) and commits under the identity the operation carries, the
// contract's, refusing without one.
func TestGitToolsOnTheSandboxer(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	repo, plain := t.TempDir(), t.TempDir()
	gitIn := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Dir = repo
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH"),
			"GIT_AUTHOR_NAME=P", "GIT_AUTHOR_EMAIL=p@example.com", "GIT_COMMITTER_NAME=P", "GIT_COMMITTER_EMAIL=p@example.com"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "--template=", "-b", "main")
	gitIn("commit", "-q", "--allow-empty", "-m", "start")
	for name, body := range map[string]string{"ok.txt": "ok\n", "secret/k.txt": "k\n", "docs/x.md": "x\n"} {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nc, _ := startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{repo, plain}})
	pol := &protocol.Policy{Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
		{Act: "write", Effect: "deny", Pattern: "secret/*"},
		{Act: "write", Effect: "ask", Pattern: "docs/*"},
	}}}, Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}
	sb := &protocol.SandboxSpec{Backend: "floor"}

	for dir, want := range map[string]bool{repo: true, plain: false} {
		r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "open-" + filepath.Base(dir), Run: "r" + filepath.Base(dir), Kind: protocol.OpOpen, Workspace: dir, Sandbox: sb, Policy: pol}, 10*time.Second)
		if err != nil || r.Error != nil {
			t.Fatalf("open %s = %+v, %v", dir, r, err)
		}
		got := slices.ContainsFunc(r.Tools, func(s protocol.ToolSpec) bool { return s.Name == "git_commit" })
		if got != want {
			t.Errorf("open of %s offers git_commit: %v, want %v (a repository: %v)", dir, got, want, want)
		}
	}
	n := 0
	tool := func(name, args, approval string, git *protocol.GitSpec) *protocol.Observation {
		t.Helper()
		n++
		r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.op." + string(rune('a'+n)), Run: "r1", Kind: protocol.OpTool, Workspace: repo,
			Call: call(name, args), Sandbox: sb, Policy: pol, Approval: approval, Git: git}, 20*time.Second)
		if err != nil || r.Observation == nil {
			t.Fatalf("%s(%s) = %+v, %v", name, args, r, err)
		}
		return r.Observation
	}
	if o := tool("git_add", `{"paths":["secret/k.txt"]}`, "", nil); o.State() != protocol.CallRefused || !strings.Contains(o.Content, `denied by rule "secret/*"`) {
		t.Errorf("git_add of a denied path = %+v, want refused by secret/*", o)
	}
	if o := tool("git_add", `{"paths":["docs/x.md"]}`, "", nil); o.State() != protocol.CallRefused {
		t.Errorf("git_add of an asked path without approval = %+v, want refused", o)
	}
	o := tool("git_add", `{"paths":["."]}`, "", nil)
	if o.State() != protocol.CallOK || !strings.Contains(o.Content, "Staged 1 file(s)") || !strings.Contains(o.Content, "secret/k.txt: ") || !strings.Contains(o.Content, "docs/x.md: ") {
		t.Errorf("git_add . = %+v, want ok.txt staged and the denied and asked files left out", o)
	}
	if o := tool("git_add", `{"paths":["docs"]}`, "r1.2.0", nil); o.State() != protocol.CallOK || !strings.Contains(o.Content, "docs/x.md") {
		t.Errorf("approved git_add of docs = %+v, want docs/x.md staged", o)
	}
	if got := gitIn("diff", "--cached", "--name-only"); got != "docs/x.md\nok.txt" {
		t.Errorf("staged = %q, want docs/x.md and ok.txt", got)
	}
	if o := tool("git_commit", `{"message":"m"}`, "", nil); o.State() != protocol.CallRefused || !strings.Contains(o.Content, "names no identity") {
		t.Errorf("git_commit without the contract's git = %+v, want refused", o)
	}
	if o := tool("git_commit", `{"message":"Stage and commit"}`, "", &protocol.GitSpec{Author: "Review Bot <bot@example.com>"}); o.State() != protocol.CallOK {
		t.Fatalf("git_commit = %+v", o)
	}
	if got := gitIn("log", "-1", "--format=%an <%ae>|%cn <%ce>|%s"); got != "Review Bot <bot@example.com>|Review Bot <bot@example.com>|Stage and commit" {
		t.Errorf("HEAD = %q", got)
	}
	if o := tool("git_status", `{}`, "", nil); !strings.Contains(o.Content, "secret/k.txt") || strings.Contains(o.Content, "ok.txt") {
		t.Errorf("git_status after the commit = %q", o.Content)
	}
}
