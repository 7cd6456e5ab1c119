//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

const author = "Ada Lovelace <ada@example.com>"

// newRepoEnv returns an Env over a fresh git repository with one commit
// (README.md), on the floor sandbox, committing as author.
func newRepoEnv(t *testing.T) *Env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	env := newEnv(t)
	env.GitAuthor = author
	dir := env.Workspace.Dir()
	testGit(t, dir, "init", "-q", "--template=", "-b", "main")
	writeFiles(t, dir, map[string]string{"README.md": "hello\n"})
	testGit(t, dir, "add", "README.md")
	testGit(t, dir, "-c", "user.name=Setup", "-c", "user.email=setup@example.com", "commit", "-q", "-m", "first")
	return env
}

// testGit runs the test's own git in dir, with no configuration of the
// repository's that runs anything, and returns its output.
func testGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitCall invokes one of the git tools.
func gitCall(t *testing.T, env *Env, name, args string) (*Output, error) {
	t.Helper()
	tool, ok := Git().Get(name)
	if !ok {
		t.Fatalf("Git().Get(%q) found nothing", name)
	}
	return tool.Invoke(context.Background(), env, json.RawMessage(args))
}

// mustGit invokes a git tool and fails the test on an error.
func mustGit(t *testing.T, env *Env, name, args string) string {
	t.Helper()
	out, err := gitCall(t, env, name, args)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return out.Content
}

// noScratch fails when a git directory of the harness's own is left in
// the repository.
func noScratch(t *testing.T, dir string) {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(dir, ".git", "harness-*")); len(left) > 0 {
		t.Errorf("the git tools left %v behind", left)
	}
}

// TestGitTools goes through an agent's day: see what changed, stage it,
// look at the diff, commit it under the contract's identity, read the log.
func TestGitTools(t *testing.T) {
	env := newRepoEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, map[string]string{"README.md": "hello\nworld\n", "src/new.go": "package src\n"})

	st := mustGit(t, env, "git_status", `{}`)
	for _, want := range []string{"On branch main at ", "Changed, not staged", "modified   README.md", "Untracked", "src/new.go"} {
		if !strings.Contains(st, want) {
			t.Errorf("git_status = %q, want it to contain %q", st, want)
		}
	}
	add, err := gitCall(t, env, "git_add", `{"paths":["src", "README.md"]}`)
	if err != nil || !add.Changed || !strings.Contains(add.Content, "Staged 2 file(s)") {
		t.Fatalf("git_add = %+v, %v", add, err)
	}
	st = mustGit(t, env, "git_status", `{"paths":["src"]}`)
	if !strings.Contains(st, "Staged") || !strings.Contains(st, "added      src/new.go") || strings.Contains(st, "README") {
		t.Errorf("git_status of src = %q, want src/new.go staged and nothing else", st)
	}
	diff := mustGit(t, env, "git_diff", `{}`)
	if !strings.Contains(diff, "[staged") || !strings.Contains(diff, "+world") || !strings.Contains(diff, "+package src") {
		t.Errorf("git_diff = %q, want the staged changes", diff)
	}
	out, err := gitCall(t, env, "git_commit", `{"message":"Add src and greet the world\n\nMore words."}`)
	if err != nil || !out.Changed || !strings.Contains(out.Content, "on main: Add src and greet the world") || !strings.Contains(out.Content, "Author: "+author) {
		t.Fatalf("git_commit = %+v, %v", out, err)
	}
	got := testGit(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", "main")
	if want := author + "|" + author + "|Add src and greet the world\n\nMore words."; got != want {
		t.Errorf("the commit on main is %q, want %q", got, want)
	}
	if got := testGit(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("after the commit git status says %q, want nothing", got)
	}
	if parent := testGit(t, dir, "log", "-1", "--format=%s", "main^"); parent != "first" {
		t.Errorf("the commit's parent is %q, want the first commit", parent)
	}
	log := mustGit(t, env, "git_log", `{}`)
	if !strings.Contains(log, "Author: "+author) || !strings.Contains(log, "    Add src and greet the world") || !strings.Contains(log, "    first") {
		t.Errorf("git_log = %q", log)
	}
	if log := mustGit(t, env, "git_log", `{"paths":["src"]}`); strings.Contains(log, "first") {
		t.Errorf("git_log of src shows the first commit, which did not touch it: %q", log)
	}
	if st := mustGit(t, env, "git_status", `{}`); !strings.Contains(st, "Nothing changed") {
		t.Errorf("git_status after the commit = %q", st)
	}
	if _, err := gitCall(t, env, "git_commit", `{"message":"again"}`); codeOf(err) != protocol.CodeBadArguments || !strings.Contains(err.Error(), "nothing is staged") {
		t.Errorf("git_commit with nothing staged = %v, want bad arguments saying nothing is staged", err)
	}
	// A deletion is staged as one.
	if err := os.Remove(filepath.Join(dir, "src", "new.go")); err != nil {
		t.Fatal(err)
	}
	mustGit(t, env, "git_add", `{"paths":["src/new.go"]}`)
	mustGit(t, env, "git_commit", `{"message":"Remove src/new.go"}`)
	if got := testGit(t, dir, "ls-files"); got != "README.md" {
		t.Errorf("tracked after the deletion: %q", got)
	}
	noScratch(t, dir)
	for _, name := range []string{"git_status", "git_diff", "git_log"} {
		if !Git().ReadOnly(name) {
			t.Errorf("%s is not ReadOnly; a call cut off would not be run again", name)
		}
	}
	for _, name := range []string{"git_add", "git_commit"} {
		if Git().ReadOnly(name) {
			t.Errorf("%s is ReadOnly", name)
		}
	}
}

// TestGitCommitFirstAndDetached commits on a branch with no commit yet and
// on a detached HEAD.
func TestGitCommitFirstAndDetached(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	env := newEnv(t)
	env.GitAuthor = author
	dir := env.Workspace.Dir()
	testGit(t, dir, "init", "-q", "--template=", "-b", "trunk")
	if got := mustGit(t, env, "git_log", `{}`); got != "On branch trunk, no commits yet" {
		t.Errorf("git_log of an empty repository = %q", got)
	}
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	mustGit(t, env, "git_add", `{"paths":["."]}`)
	if diff := mustGit(t, env, "git_diff", `{}`); !strings.Contains(diff, "[staged") || !strings.Contains(diff, "+a") {
		t.Errorf("git_diff before the first commit = %q", diff)
	}
	mustGit(t, env, "git_commit", `{"message":"root"}`)
	if got := testGit(t, dir, "log", "--format=%s %an", "trunk"); got != "root Ada Lovelace" {
		t.Errorf("trunk = %q", got)
	}
	testGit(t, dir, "checkout", "-q", "--detach")
	writeFiles(t, dir, map[string]string{"a.txt": "b\n"})
	mustGit(t, env, "git_add", `{"paths":["a.txt"]}`)
	out := mustGit(t, env, "git_commit", `{"message":"detached"}`)
	if !strings.Contains(out, "on detached HEAD") {
		t.Errorf("git_commit on a detached HEAD = %q", out)
	}
	if got := testGit(t, dir, "log", "-1", "--format=%s", "HEAD"); got != "detached" {
		t.Errorf("HEAD = %q", got)
	}
	if got := testGit(t, dir, "log", "-1", "--format=%s", "trunk"); got != "root" {
		t.Errorf("trunk moved to %q on a detached commit", got)
	}
}

// plantHooks writes into the repository every way its own files can make
// git run a command: hooks, a hooksPath, an fsmonitor, filters named by
// .gitattributes, a diff driver and an external diff, a pager, an editor
// and a signing program, each touching dir/pwned-<name>. It returns the
// markers' glob.
func plantHooks(t *testing.T, dir string) string {
	t.Helper()
	repo := filepath.Join(dir, ".git")
	marker := func(name string) string {
		p := filepath.Join(repo, "evil", name)
		writeFiles(t, filepath.Dir(p), map[string]string{filepath.Base(p): fmt.Sprintf("#!/bin/sh\ntouch %s\ncat\n", filepath.Join(dir, "pwned-"+name))})
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hooksPath := filepath.Join(repo, "evil-hooks")
	for _, d := range []string{filepath.Join(repo, "hooks"), hooksPath} {
		for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-index-change", "reference-transaction", "pre-auto-gc"} {
			p := filepath.Join(d, h)
			writeFiles(t, d, map[string]string{h: fmt.Sprintf("#!/bin/sh\ntouch %s\n", filepath.Join(dir, "pwned-hook-"+filepath.Base(d)+"-"+h))})
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := fmt.Sprintf("[core]\n\thooksPath = %s\n\tfsmonitor = %s\n\tpager = %s\n\teditor = %s\n"+
		"[filter \"evil\"]\n\tclean = %s\n\tsmudge = %s\n\trequired = true\n[filter \"proc\"]\n\tprocess = %s\n"+
		"[diff]\n\texternal = %s\n[diff \"evil\"]\n\ttextconv = %s\n[gpg]\n\tprogram = %s\n[commit]\n\tgpgSign = true\n[log]\n\tshowSignature = true\n",
		hooksPath, marker("fsmonitor"), marker("pager"), marker("editor"), marker("clean"), marker("smudge"), marker("process"),
		marker("diff-external"), marker("textconv"), marker("gpg"))
	f, err := os.OpenFile(filepath.Join(repo, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	f.Close()
	writeFiles(t, dir, map[string]string{".gitattributes": "*.txt filter=evil diff=evil\n*.md filter=proc diff=evil\n"})
	return filepath.Join(dir, "pwned-*")
}

// TestGitToolsRunNothingTheRepositoryNames is the must-show of issue 15:
// a commit under the contract's identity with hooks, filters and every
// other command the repository's files can name planted, none of which
// runs, through every git tool.
func TestGitToolsRunNothingTheRepositoryNames(t *testing.T) {
	env := newRepoEnv(t)
	dir := env.Workspace.Dir()
	markers := plantHooks(t, dir)
	writeFiles(t, dir, map[string]string{"notes.txt": "as the agent wrote it\n", "README.md": "changed\n"})
	for _, c := range []struct{ tool, args string }{
		{"git_status", `{}`}, {"git_diff", `{}`}, {"git_add", `{"paths":["notes.txt","README.md",".gitattributes"]}`},
		{"git_diff", `{}`}, {"git_status", `{}`}, {"git_commit", `{"message":"notes"}`}, {"git_log", `{}`},
	} {
		if _, err := gitCall(t, env, c.tool, c.args); err != nil {
			t.Fatalf("%s(%s): %v", c.tool, c.args, err)
		}
	}
	if ran, _ := filepath.Glob(markers); len(ran) > 0 {
		t.Fatalf("the git tools ran what the repository names: %v", ran)
	}
	if got := testGit(t, dir, "log", "-1", "--format=%an <%ae>", "main"); got != author {
		t.Errorf("the commit's author = %q, want %q", got, author)
	}
	// Recorded as the worktree holds it: no clean filter touched it.
	if got := testGit(t, dir, "cat-file", "blob", "main:notes.txt"); got != "as the agent wrote it" {
		t.Errorf("committed notes.txt = %q", got)
	}
	noScratch(t, dir)
}

// TestGitHostileArguments gives the git tools arguments that would be
// flags, options or pathspec magic to a git that took them so: each is
// refused, or is a file name and nothing more.
func TestGitHostileArguments(t *testing.T) {
	env := newRepoEnv(t)
	dir := env.Workspace.Dir()
	pwned := filepath.Join(dir, "pwned")
	hostile := []string{"--upload-pack=touch " + pwned, "-c", "core.pager=touch " + pwned, "--exec=touch " + pwned, ":(top)README.md", "*.md", "-p", "--output=" + "out.txt"}
	for _, tool := range []string{"git_status", "git_diff", "git_log", "git_add"} {
		for _, p := range hostile {
			args := argsJSON(t, map[string]any{"paths": []string{p}})
			out, err := gitCall(t, env, tool, args)
			if err != nil {
				continue // refused: fine
			}
			if strings.Contains(out.Content, "README.md") && tool != "git_log" {
				t.Errorf("%s(%s) treated the path as a pattern: %q", tool, args, out.Content)
			}
		}
	}
	// A file named like a flag is staged and committed as that file.
	flagFile := "--upload-pack=touch pwned"
	writeFiles(t, dir, map[string]string{flagFile: "x\n", "-c": "y\n"})
	mustGit(t, env, "git_add", argsJSON(t, map[string]any{"paths": []string{flagFile, "-c"}}))
	// Messages that would be flags are the message, verbatim.
	for i, msg := range []string{"--amend", "-m", "--author=Mallory <m@evil>", "--no-verify --exec=touch " + pwned, "-"} {
		if i > 0 {
			writeFiles(t, dir, map[string]string{"-c": fmt.Sprintf("y%d\n", i)})
			mustGit(t, env, "git_add", `{"paths":["-c"]}`)
		}
		mustGit(t, env, "git_commit", argsJSON(t, map[string]string{"message": msg}))
		if got := testGit(t, dir, "log", "-1", "--format=%an <%ae>|%B"); got != author+"|"+msg {
			t.Errorf("commit with message %q recorded %q", msg, got)
		}
	}
	if got := testGit(t, dir, "ls-files"); !strings.Contains(got, flagFile) || !strings.Contains(got, "-c") {
		t.Errorf("tracked: %q, want the flag-named files", got)
	}
	if got := testGit(t, dir, "rev-list", "--count", "main"); got != "6" {
		t.Errorf("main has %s commits, want 6: every message made one commit and no amend", got)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a hostile argument ran a command")
	}
	// Paths into .git, out of the workspace, or absolute are refused.
	if err := os.Symlink(".git/hooks", filepath.Join(dir, "hooks")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git/hooks/pre-commit", ".git", ".GIT/config", "sub/.git/config", "hooks/pre-commit", "../x", "/etc/passwd", "a/../../x", ""} {
		for _, tool := range []string{"git_add", "git_diff", "git_status", "git_log"} {
			args := argsJSON(t, map[string]any{"paths": []string{p}})
			if _, err := gitCall(t, env, tool, args); err == nil {
				t.Errorf("%s(%s) = ok, want refused", tool, args)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a hook was planted")
	}
	// No argument but paths and message is taken.
	for tool, args := range map[string]string{
		"git_add":    `{"paths":["README.md"],"flags":["--force"]}`,
		"git_commit": `{"message":"m","author":"Mallory <m@evil>"}`,
		"git_status": `{"argv":["push"]}`,
		"git_log":    `{"paths":"README.md"}`,
	} {
		if _, err := gitCall(t, env, tool, args); codeOf(err) != protocol.CodeBadArguments {
			t.Errorf("%s(%s) = %v, want bad arguments", tool, args, err)
		}
	}
	noScratch(t, dir)
}

// TestGitToolsUnderThePolicy: a write the policy denies is not staged, a
// file it hides is neither shown nor staged nor its existence told, and
// git_commit is a write of the workspace.
func TestGitToolsUnderThePolicy(t *testing.T) {
	env := newRepoEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, map[string]string{"ok.txt": "ok\n", "locked/l.txt": "l\n", "private/secret.txt": "the secret\n"})
	env.Judge = judgeBy(func(act, rel string) bool {
		switch {
		case rel == "private" || strings.HasPrefix(rel, "private/"):
			return false
		case act == ActWrite && (rel == "locked" || strings.HasPrefix(rel, "locked/")):
			return false
		}
		return true
	})
	if _, err := gitCall(t, env, "git_add", `{"paths":["locked/l.txt"]}`); codeOf(err) != protocol.CodeRefused {
		t.Errorf("git_add of a write-denied path = %v, want refused", err)
	}
	if _, err := gitCall(t, env, "git_add", `{"paths":["private/secret.txt"]}`); codeOf(err) != protocol.CodeRefused {
		t.Errorf("git_add of a hidden path = %v, want refused", err)
	}
	if _, err := gitCall(t, env, "git_diff", `{"paths":["private"]}`); codeOf(err) != protocol.CodeRefused {
		t.Errorf("git_diff of a hidden directory = %v, want refused", err)
	}
	st := mustGit(t, env, "git_status", `{}`)
	if strings.Contains(st, "private") || !strings.Contains(st, "ok.txt") || !strings.Contains(st, "locked/l.txt") {
		t.Errorf("git_status = %q, want ok.txt and locked/l.txt, and nothing of private/", st)
	}
	add := mustGit(t, env, "git_add", `{"paths":["."]}`)
	if strings.Contains(add, "private") || !strings.Contains(add, "Staged 1 file(s)") || !strings.Contains(add, "locked/l.txt: [write refused]") {
		t.Errorf("git_add . = %q, want ok.txt staged, locked/l.txt left out and named, private/ not a word", add)
	}
	if got := testGit(t, dir, "diff", "--cached", "--name-only"); got != "ok.txt" {
		t.Errorf("staged: %q, want ok.txt", got)
	}
	// Staged behind the agent's back (by the person, or a command): still
	// not shown.
	testGit(t, dir, "add", "private/secret.txt")
	if diff := mustGit(t, env, "git_diff", `{}`); strings.Contains(diff, "secret") || !strings.Contains(diff, "+ok") {
		t.Errorf("git_diff = %q, want ok.txt and nothing of private/", diff)
	}
	// The commit is a write of the workspace.
	deny := env.Judge
	env.Judge = judgeBy(func(act, rel string) bool { return !(act == ActWrite && rel == ".") })
	if _, err := gitCall(t, env, "git_commit", `{"message":"m"}`); codeOf(err) != protocol.CodeRefused {
		t.Errorf("git_commit with the workspace write-denied = %v, want refused", err)
	}
	env.Judge = deny
	out := mustGit(t, env, "git_commit", `{"message":"m"}`)
	if strings.Contains(out, "private") {
		t.Errorf("git_commit names a hidden file: %q", out)
	}
	noScratch(t, dir)
}

// TestGitToolsRefuse covers the calls that cannot go on: no identity, a
// workspace that is no repository, no git, no sandbox.
func TestGitToolsRefuse(t *testing.T) {
	env := newRepoEnv(t)
	writeFiles(t, env.Workspace.Dir(), map[string]string{"a.txt": "a\n"})
	mustGit(t, env, "git_add", `{"paths":["a.txt"]}`)
	for _, a := range []string{"", "Ada", "<ada@example.com>", "Ada <>"} {
		env.GitAuthor = a
		if _, err := gitCall(t, env, "git_commit", `{"message":"m"}`); codeOf(err) != protocol.CodeRefused || !strings.Contains(err.Error(), "git_commit refused") {
			t.Errorf("git_commit with author %q = %v, want refused", a, err)
		}
	}
	env.GitAuthor = author
	for _, m := range []string{`""`, `"  \n"`, `"a\u0000b"`} {
		if _, err := gitCall(t, env, "git_commit", `{"message":`+m+`}`); codeOf(err) != protocol.CodeBadArguments {
			t.Errorf("git_commit with message %s = %v, want bad arguments", m, err)
		}
	}
	if _, err := gitCall(t, env, "git_add", `{"paths":[]}`); codeOf(err) != protocol.CodeBadArguments {
		t.Errorf("git_add of no paths = %v, want bad arguments", err)
	}

	plain := newEnv(t)
	if _, err := gitCall(t, plain, "git_status", `{}`); codeOf(err) != protocol.CodeNotFound || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("git_status outside a repository = %v, want not found, saying so", err)
	}
	noGit := newRepoEnv(t)
	noGit.CmdEnv = []string{"PATH=/nonexistent"}
	if _, err := gitCall(t, noGit, "git_status", `{}`); codeOf(err) != protocol.CodeNotFound || !strings.Contains(err.Error(), "git is unavailable") {
		t.Errorf("git_status without git = %v, want not found, saying git is unavailable", err)
	}
	noGit.Sandbox = nil
	if _, err := gitCall(t, noGit, "git_status", `{}`); codeOf(err) != protocol.CodeUnsupported {
		t.Errorf("git_status without a sandbox = %v, want unsupported", err)
	}
	// A list of files cut by the output cap is refused, not parsed.
	many := newRepoEnv(t)
	many.Limits.OutputBytes = 4096
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("f%03d-with-a-longish-name.txt", i)] = "x\n"
	}
	writeFiles(t, many.Workspace.Dir(), files)
	if _, err := gitCall(t, many, "git_status", `{}`); codeOf(err) != protocol.CodeTooLarge || !strings.Contains(err.Error(), "narrower paths") {
		t.Errorf("git_status of a list over the cap = %v, want too large", err)
	}
	if out := mustGit(t, many, "git_status", `{"paths":["f001-with-a-longish-name.txt"]}`); !strings.Contains(out, "f001") {
		t.Errorf("git_status of one path = %q", out)
	}
	// A repository borrowing objects from elsewhere is not used.
	alt := newRepoEnv(t)
	writeFiles(t, alt.Workspace.Dir(), map[string]string{".git/objects/info/alternates": "/elsewhere/objects\n"})
	if _, err := gitCall(t, alt, "git_log", `{}`); codeOf(err) != protocol.CodeUnsupported || !strings.Contains(err.Error(), "alternates") {
		t.Errorf("git_log with alternates = %v, want unsupported", err)
	}
}
