package sandboxer_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
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

// TestCollectedCommitsAreTheContracts: in a snapshot the run's repository
// came with, the agent's git_commit and the end-of-run commit are both by
// the contract's git.author, and both come back as the patch's commits,
// with a series holding them.
func TestCollectedCommitsAreTheContracts(t *testing.T) {
	cfgs := gitBackends(t)
	c := startJS(t)
	snapDir := t.TempDir()
	cfg := cfgs["floor"]
	cfg.SnapshotDir = snapDir
	c.sandboxer("sb1", cfg)
	src := t.TempDir()
	cmd := exec.Command("sh", "-c", "git init -q -b main && echo one > a.txt && git add a.txt && git commit -q -m start")
	cmd.Dir = src
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=me", "GIT_AUTHOR_EMAIL=me@example.com", "GIT_COMMITTER_NAME=me", "GIT_COMMITTER_EMAIL=me@example.com"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ref := c.put(src)
	id := &protocol.GitSpec{Author: "Review Bot <bot@example.com>"}
	commit := &protocol.CommitSpec{Message: "the rest of the run"}
	pol := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}
	r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref, Commit: commit, Policy: pol}, 30*time.Second)
	if err != nil || r.Error != nil || !slices.ContainsFunc(r.Tools, func(s protocol.ToolSpec) bool { return s.Name == "git_add" }) {
		t.Fatalf("open = %+v, %v; want the git tools offered for the snapshot's repository", r, err)
	}
	for i, tc := range []struct{ name, args string }{
		{"write_file", `{"path":"b.txt","content":"two\n"}`},
		{"git_add", `{"paths":["b.txt"]}`},
		{"git_commit", `{"message":"Add b"}`},
		{"write_file", `{"path":"c.txt","content":"three\n"}`},
	} {
		r, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: fmt.Sprintf("r1.%d.0.1", i), Run: "r1", Kind: protocol.OpTool,
			Call: call(tc.name, tc.args), Policy: pol, Git: id}, 20*time.Second)
		if err != nil || r.Observation == nil || r.Observation.IsError {
			t.Fatalf("%s = %+v, %v", tc.name, r, err)
		}
	}
	r, err = do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.collect", Run: "r1", Kind: protocol.OpCollect, Snapshot: ref, Commit: commit, Git: id}, 60*time.Second)
	if err != nil || r.Error != nil || r.Patch == nil {
		t.Fatalf("collect = %+v, %v", r, err)
	}
	p := r.Patch
	if p.Error != nil || p.Commit == "" || len(p.Commits) != 2 || p.Series == "" {
		t.Fatalf("patch = %+v, want two commits and a series", p)
	}
	for i, want := range []string{"Add b", "the rest of the run"} {
		if got := p.Commits[i]; got.Subject != want || got.Author != id.Author {
			t.Errorf("commit %d = %+v, want %q by %s", i, got, want, id.Author)
		}
	}
	if p.Commits[1].ID != p.Commit {
		t.Errorf("the last commit is %s, want the end-of-run commit %s", p.Commits[1].ID, p.Commit)
	}
	series, err := c.assets.Workspaces.GetBytes(t.Context(), p.Series)
	if err != nil || strings.Count(string(series), "\nSubject: [PATCH ") != 2 || !strings.Contains(string(series), "From: Review Bot <bot@example.com>") {
		t.Errorf("series = %q, %v", series, err)
	}
	repo := filepath.Join(snapDir, "r1", "work", ".git")
	if got := gitOut(t, repo, "log", "-1", "--format=%cn <%ce>", p.Commit); got != id.Author {
		t.Errorf("the end-of-run commit's committer = %q, want %s", got, id.Author)
	}
}
