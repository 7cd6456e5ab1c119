package sandboxer_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/native"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// noExec is the policy of the attack in issue 12: the agent may read and
// write files, and run nothing.
var noExec = &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}

// gitBackends are the backends the harness's own git is tried on: the
// floor (where the attack ran as the sandboxer's user, root in the report)
// and native where this machine has it (where it ran inside the sandbox).
func gitBackends(t *testing.T) map[string]sandboxer.Config {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	out := map[string]sandboxer.Config{"floor": {AllowFloor: true}}
	n, err := native.New(native.Config{})
	switch {
	case err == nil:
		t.Cleanup(func() { n.Close() })
		out["native"] = sandboxer.Config{Backends: []sandbox.Backend{n}}
	case os.Getenv("HARNESS_REQUIRE_NATIVE") == "1":
		t.Fatalf("native.New: %v (HARNESS_REQUIRE_NATIVE=1)", err)
	default:
		t.Logf("native sandbox not tried (set HARNESS_REQUIRE_NATIVE=1 to fail instead): %v", err)
	}
	return out
}

// plantHostileRepo writes into the repository of work every way a
// repository's own files can make git run a command, each command
// touching a marker file pwned-<name> in the repository: filters named by
// .gitattributes or .git/info/attributes (clean and smudge, a long-running
// process, and one defined in a file pulled in by include.path), hooks (in .git/hooks and under a
// core.hooksPath), core.fsmonitor, a pager, an editor, an ssh command,
// diff.external, a credential helper and a signing program. It is what a
// command the policy allowed, or the snapshot itself, could leave behind;
// write_file cannot (builtin-git). It returns the markers' glob.
func plantHostileRepo(t *testing.T, work string) string {
	t.Helper()
	repo := filepath.Join(work, ".git")
	script := func(name string) string {
		p := filepath.Join(repo, "evil", name)
		body := fmt.Sprintf("#!/bin/sh\ntouch %s\ncat\n", filepath.Join(repo, "pwned-"+name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hooks := filepath.Join(repo, "evil-hooks")
	for _, dir := range []string{filepath.Join(repo, "hooks"), hooks} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "reference-transaction", "post-index-change", "pre-auto-gc"} {
			name := "hook-" + filepath.Base(dir) + "-" + h
			if err := os.WriteFile(filepath.Join(dir, h), []byte(fmt.Sprintf("#!/bin/sh\ntouch %s\n", filepath.Join(repo, "pwned-"+name))), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	included := filepath.Join(repo, "included.cfg")
	if err := os.WriteFile(included, []byte(fmt.Sprintf("[filter \"inc\"]\n\tclean = %s\n\tsmudge = %s\n[core]\n\tfsmonitor = %s\n",
		script("include-clean"), script("include-smudge"), script("include-fsmonitor"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
[core]
	hooksPath = %s
	fsmonitor = %s
	pager = %s
	editor = %s
	sshCommand = %s
	askPass = %s
[filter "evil"]
	clean = %s
	smudge = %s
	required = true
[filter "proc"]
	process = %s
[filter "info"]
	clean = %s
[diff]
	external = %s
[diff "evil"]
	textconv = %s
[credential]
	helper = %s
[gpg]
	program = %s
[commit]
	gpgSign = true
[include]
	path = %s
[includeIf "gitdir:/"]
	path = %s
`, hooks, script("fsmonitor"), script("pager"), script("editor"), script("ssh"), script("askpass"),
		script("clean"), script("smudge"), script("process"), script("info-clean"), script("diff-external"), script("textconv"),
		script("credential"), script("gpg"), included, included)
	f, err := os.OpenFile(filepath.Join(repo, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "info"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "info", "attributes"), []byte("e.dat filter=info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		".gitattributes": "*.txt filter=evil diff=evil\n*.md filter=proc\n*.go filter=inc\n",
		"a.txt":          "changed by the run\n",
		"b.md":           "# added\n",
		"c.go":           "package c\n",
		"e.dat":          "data\n",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(repo, "pwned-*")
}

// gitOut runs the test's own git, read-only, on a repository.
func gitOut(t *testing.T, repo string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + repo, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestCommitRunsNothingTheRepositoryNames is issue 12's "exec deny
// bypassed through git": a run whose policy denies exec leaves a
// .git/config with a clean filter and a .gitattributes naming it (and every
// other command the repository can name), and the end-of-run commit must
// run none of them, on the floor or in the native sandbox, while still
// committing the run's changes, unfiltered, on the workspace's branch.
func TestCommitRunsNothingTheRepositoryNames(t *testing.T) {
	for name, cfg := range gitBackends(t) {
		t.Run(name, func(t *testing.T) {
			c := startJS(t)
			snapDir := t.TempDir()
			cfg.SnapshotDir = snapDir
			c.sandboxer("sb1", cfg)
			src := t.TempDir()
			if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("as it came\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ref := c.put(src)
			commit := &protocol.CommitSpec{Message: "the run's changes"}
			r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref, Commit: commit, Policy: noExec}, 30*time.Second)
			if err != nil || r.Error != nil {
				t.Fatalf("open = %+v, %v", r, err)
			}
			work := filepath.Join(snapDir, "r1", "work")
			repo := filepath.Join(work, ".git")
			first := gitOut(t, repo, "rev-parse", "HEAD")

			// write_file cannot plant any of it: the built-in layers refuse.
			for i, w := range []struct{ path, layer string }{{".git/config", "builtin-secrets"}, {".git/hooks/pre-commit", "builtin-git"}} {
				r, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: fmt.Sprintf("r1.1.%d.1", i), Run: "r1", Kind: protocol.OpTool,
					Call: call("write_file", fmt.Sprintf(`{"path":%q,"content":"[core]\n\tfsmonitor = /bin/false\n"}`, w.path)), Policy: noExec}, 10*time.Second)
				if err != nil || r.Observation == nil || !r.Observation.IsError || !strings.Contains(r.Observation.Content, `layer "`+w.layer+`"`) {
					t.Errorf("write_file %s = %+v, %v; want it refused by %s", w.path, r, err, w.layer)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(repo, "hooks", "pre-commit")); b != nil {
				t.Fatalf("write_file planted a hook: %q", b)
			}

			markers := plantHostileRepo(t, work)
			r, err = do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.collect", Run: "r1", Kind: protocol.OpCollect, Snapshot: ref, Commit: commit}, 60*time.Second)
			if err != nil || r.Error != nil || r.Patch == nil {
				t.Fatalf("collect = %+v, %v", r, err)
			}
			if ran, _ := filepath.Glob(markers); len(ran) > 0 {
				for i := range ran {
					ran[i] = strings.TrimPrefix(filepath.Base(ran[i]), "pwned-")
				}
				t.Fatalf("the harness's commit ran what the repository names: %v", ran)
			}
			p := r.Patch
			if p.Error != nil || p.Commit == "" {
				t.Fatalf("patch commit = %q, error %v; want a commit", p.Commit, p.Error)
			}
			branch := strings.TrimPrefix(gitOut(t, repo, "symbolic-ref", "HEAD"), "refs/heads/")
			if got := gitOut(t, repo, "rev-parse", "refs/heads/"+branch); got != p.Commit {
				t.Errorf("branch %s is at %s, want the run's commit %s", branch, got, p.Commit)
			}
			if got := gitOut(t, repo, "rev-parse", p.Commit+"^"); got != first {
				t.Errorf("the commit's parent is %s, want the snapshot's commit %s", got, first)
			}
			if got := gitOut(t, repo, "log", "-1", "--format=%s%n%an <%ae>", p.Commit); got != "the run's changes\nharness <harness@localhost>" {
				t.Errorf("commit message and author = %q", got)
			}
			// Committed as the worktree has them: no filter touched them.
			for name, want := range map[string]string{"a.txt": "changed by the run", "b.md": "# added", "c.go": "package c", "e.dat": "data"} {
				if got := gitOut(t, repo, "cat-file", "blob", p.Commit+":"+name); got != want {
					t.Errorf("committed %s = %q, want %q", name, got, want)
				}
			}
			if got := gitOut(t, repo, "ls-tree", "--name-only", p.Commit); got != ".gitattributes\na.txt\nb.md\nc.go\ne.dat" {
				t.Errorf("committed tree = %q; want the workspace, without .git", got)
			}
			// The workspace repository's index is the commit's, so its own
			// git status shows nothing staged.
			if got := gitOut(t, repo, "diff-index", "--cached", "--name-only", p.Commit); got != "" {
				t.Errorf("the workspace index differs from the commit: %q", got)
			}
		})
	}
}

// TestCommitIntoTheSnapshotsRepository commits into a repository the
// snapshot brought (its branch in packed-refs, its config hostile), and
// refuses, with a typed reason in the patch, a .git that points elsewhere.
func TestCommitIntoTheSnapshotsRepository(t *testing.T) {
	cfgs := gitBackends(t)
	c := startJS(t)
	snapDir := t.TempDir()
	cfg := cfgs["floor"]
	cfg.SnapshotDir = snapDir
	c.sandboxer("sb1", cfg)

	src := t.TempDir()
	gitIn := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH"),
			"GIT_AUTHOR_NAME=me", "GIT_AUTHOR_EMAIL=me@example.com", "GIT_COMMITTER_NAME=me", "GIT_COMMITTER_EMAIL=me@example.com"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git := func(args ...string) { t.Helper(); gitIn(src, args...) }
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "my history")
	git("pack-refs", "--all")
	mine := gitOut(t, filepath.Join(src, ".git"), "rev-parse", "HEAD")
	ref := c.put(src)
	commit := &protocol.CommitSpec{Message: "on top of mine"}
	open := func(run, ref string) string {
		t.Helper()
		r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: run + ".open", Run: run, Kind: protocol.OpOpen, Snapshot: ref, Commit: commit, Policy: noExec}, 30*time.Second)
		if err != nil || r.Error != nil {
			t.Fatalf("open %s = %+v, %v", run, r, err)
		}
		return filepath.Join(snapDir, run, "work")
	}
	collect := func(run, ref string) *protocol.Patch {
		t.Helper()
		r, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: run + ".collect", Run: run, Kind: protocol.OpCollect, Snapshot: ref, Commit: commit}, 60*time.Second)
		if err != nil || r.Error != nil || r.Patch == nil {
			t.Fatalf("collect %s = %+v, %v", run, r, err)
		}
		return r.Patch
	}

	work := open("r1", ref)
	markers := plantHostileRepo(t, work)
	p := collect("r1", ref)
	if ran, _ := filepath.Glob(markers); len(ran) > 0 {
		t.Fatalf("the harness's commit ran what the repository names: %v", ran)
	}
	repo := filepath.Join(work, ".git")
	if p.Error != nil || p.Commit == "" {
		t.Fatalf("patch commit = %q, error %v; want a commit", p.Commit, p.Error)
	}
	if got := gitOut(t, repo, "rev-parse", "refs/heads/main"); got != p.Commit {
		t.Errorf("main is at %s, want the run's commit %s", got, p.Commit)
	}
	if got := gitOut(t, repo, "rev-parse", p.Commit+"^"); got != mine {
		t.Errorf("the commit's parent is %s, want the snapshot's own HEAD %s", got, mine)
	}

	// A run that changed nothing commits nothing; a detached HEAD moves.
	git("checkout", "-q", "--detach")
	ref3 := c.put(src)
	open("r3", ref3)
	if p3 := collect("r3", ref3); p3.Commit != "" || p3.Error != nil {
		t.Errorf("collect of an unchanged workspace = commit %q, error %v; want no commit", p3.Commit, p3.Error)
	}
	work4 := open("r4", ref3)
	if err := os.WriteFile(filepath.Join(work4, "a.txt"), []byte("detached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p4 := collect("r4", ref3)
	if p4.Error != nil || p4.Commit == "" {
		t.Fatalf("collect on a detached HEAD = %q, %v; want a commit", p4.Commit, p4.Error)
	}
	if got := gitOut(t, filepath.Join(work4, ".git"), "rev-parse", "HEAD"); got != p4.Commit {
		t.Errorf("detached HEAD is at %s, want the run's commit %s", got, p4.Commit)
	}
	if got := gitOut(t, filepath.Join(work4, ".git"), "rev-parse", p4.Commit+"^"); got != mine {
		t.Errorf("the detached commit's parent is %s, want %s", got, mine)
	}

	// A repository with no commit yet gets its first: the workspace, on
	// the branch HEAD names.
	unborn := t.TempDir()
	if err := os.WriteFile(filepath.Join(unborn, "a.txt"), []byte("never committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(unborn, "init", "-q", "-b", "trunk")
	ref5 := c.put(unborn)
	work5 := open("r5", ref5)
	p5 := collect("r5", ref5)
	if p5.Error != nil || p5.Commit == "" {
		t.Fatalf("collect on an unborn branch = %q, %v; want a first commit", p5.Commit, p5.Error)
	}
	if got := gitOut(t, filepath.Join(work5, ".git"), "rev-list", "--parents", "refs/heads/trunk"); got != p5.Commit {
		t.Errorf("trunk's history = %q, want the one root commit %s", got, p5.Commit)
	}

	// A .git that is a gitdir file pointing out of the workspace is not
	// followed: the patch says why there is no commit.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "a.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, ".git"), []byte("gitdir: "+repo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref2 := c.put(other)
	work2 := open("r2", ref2)
	if err := os.WriteFile(filepath.Join(work2, "a.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p2 := collect("r2", ref2)
	if p2.Commit != "" || !errors.Is(p2.Error, protocol.ErrUnsupported) || !strings.Contains(p2.Error.Message, "not a directory") {
		t.Errorf("commit through a gitdir file = %q, %v; want none, unsupported", p2.Commit, p2.Error)
	}
	if p2.Ref == "" {
		t.Errorf("the patch was not stored though the commit was refused: %+v", p2)
	}
	if got := gitOut(t, repo, "rev-parse", "refs/heads/main"); got != p.Commit {
		t.Errorf("the other run moved r1's branch to %s", got)
	}
}
