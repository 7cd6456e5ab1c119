package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/snapshot"
)

// agentAuthor is the identity the contracts below commit under.
const agentAuthor = "Harness Agent <agent@example.com>"

// hostGit runs the test's own git in dir, reading no configuration that
// runs anything, and returns its output.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=Person", "GIT_AUTHOR_EMAIL=person@example.com", "GIT_COMMITTER_NAME=Person", "GIT_COMMITTER_EMAIL=person@example.com"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// hookedRepo makes dir a repository with one commit whose own files name
// commands for git to run (hooks in .git/hooks and under a hooksPath, a
// clean filter, an fsmonitor), each leaving a marker in .git, and a remote
// that a push would reach: a bare repository beside it. It returns the
// markers' glob and the remote's path.
func hookedRepo(t *testing.T, dir string) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	remote := filepath.Join(t.TempDir(), "remote.git")
	hostGit(t, filepath.Dir(remote), "init", "-q", "--bare", "--template=", remote)
	hostGit(t, dir, "init", "-q", "--template=", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, dir, "add", "README.md")
	hostGit(t, dir, "commit", "-q", "-m", "start")
	repo := filepath.Join(dir, ".git")
	script := func(name string) string {
		p := filepath.Join(repo, "evil", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("#!/bin/sh\ntouch %s\ncat\n", filepath.Join(repo, "pwned-"+name))), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, d := range []string{"hooks", "evil-hooks"} {
		for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "pre-push", "reference-transaction"} {
			if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf("#!/bin/sh\ntouch %s\n", filepath.Join(repo, "pwned-"+d+"-"+h))
			if err := os.WriteFile(filepath.Join(repo, d, h), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := fmt.Sprintf("[core]\n\thooksPath = %s\n\tfsmonitor = %s\n[filter \"evil\"]\n\tclean = %s\n\trequired = true\n"+
		"[remote \"origin\"]\n\turl = %s\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[push]\n\tdefault = current\n",
		filepath.Join(repo, "evil-hooks"), script("fsmonitor"), script("clean"), remote)
	f, err := os.OpenFile(filepath.Join(repo, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.md filter=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, dir, "-c", "filter.evil.clean=cat", "add", ".gitattributes")
	hostGit(t, dir, "-c", "filter.evil.clean=cat", "commit", "-q", "-m", "attributes")
	return filepath.Join(repo, "pwned-*"), remote
}

// gitBackendsHere are the backends the end-to-end runs go through: the
// floor, and the native sandbox where this machine has one.
func gitBackendsHere(t *testing.T) map[string][]sandbox.Backend {
	t.Helper()
	out := map[string][]sandbox.Backend{"floor": nil}
	bs, _, err := backends.Build(t.Context(), "native", backends.Options{}, slog.New(slog.DiscardHandler))
	switch {
	case err == nil && len(bs) > 0:
		out["native"] = bs
	case os.Getenv("HARNESS_REQUIRE_NATIVE") == "1":
		t.Fatalf("no native sandbox (HARNESS_REQUIRE_NATIVE=1): %v", err)
	default:
		t.Logf("native sandbox not tried (HARNESS_REQUIRE_NATIVE=1 makes this a failure): %v", err)
	}
	return out
}

// committingAgent writes notes.md, tries every way to reach push or a hook
// through the git tools' arguments (and exec), then stages and commits
// notes.md and stops. It records the tools its first request offered.
func committingAgent(offered *[]string, mu *sync.Mutex) *provider.Scripted {
	call := func(id, name, args string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	turns := []*protocol.Turn{
		{ToolCalls: []protocol.ToolCall{call("w", "write_file", `{"path":"notes.md","content":"# Notes\nwritten by the agent\n"}`)}},
		{ToolCalls: []protocol.ToolCall{call("s", "git_status", `{}`)}},
		{ToolCalls: []protocol.ToolCall{
			call("h1", "git_add", `{"paths":[".git/hooks/pre-commit"]}`),
			call("h2", "git_status", `{"paths":[".git/hooks"]}`),
			call("h3", "git_add", `{"paths":["--receive-pack=touch pwned-receive-pack"]}`),
			call("h4", "git_log", `{"paths":["--exec=git push origin main"]}`),
			call("h5", "git_commit", `{"message":"m","argv":["push","origin","main"]}`),
			call("h6", "git_add", `{"paths":["notes.md"],"subcommand":"push"}`),
			call("h7", "exec", `{"argv":["git","push","origin","main"]}`),
			call("h8", "git_push", `{}`),
		}},
		{ToolCalls: []protocol.ToolCall{call("a", "git_add", `{"paths":["notes.md"]}`)}},
		{ToolCalls: []protocol.ToolCall{call("c", "git_commit", `{"message":"Add the agent's notes\n\nWritten, staged and committed through the git tools."}`)}},
		{ToolCalls: []protocol.ToolCall{call("l", "git_log", `{}`)}},
		{Text: "Committed."},
	}
	return provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		if n == 1 {
			mu.Lock()
			for _, s := range req.Tools {
				*offered = append(*offered, s.Name)
			}
			mu.Unlock()
		}
		if n > len(turns) {
			return &protocol.Turn{Text: "done"}, nil
		}
		return turns[n-1], nil
	})
}

// gitContract is a contract whose agent may read and write files (the
// built-in layers keep .git from it), run nothing, and commits as
// agentAuthor.
func gitContract(ws protocol.Workspace, backend string) *protocol.Contract {
	return &protocol.Contract{Schema: protocol.ContractSchema, Task: "write notes and commit them", Workspace: ws,
		Verification: protocol.Verification{None: &struct{}{}}, Sandbox: protocol.SandboxSpec{Backend: backend},
		Budget: protocol.Budget{MaxSteps: 12},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}},
		Git:    &protocol.GitSpec{Author: agentAuthor}}
}

// TestAgentCommitsUnderTheContractsIdentity is issue 15's must-show: a run
// on the embedded default whose agent writes a file, git_add's it and
// git_commit's it, the commit's author and committer the contract's, with
// none of the repository's hooks or filters run; and every attempt to
// reach push or a hook through an argument refused or inert, the remote
// untouched. On the floor and, where this machine has it, in the native
// sandbox.
func TestAgentCommitsUnderTheContractsIdentity(t *testing.T) {
	for name, bs := range gitBackendsHere(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			ws := t.TempDir()
			markers, remote := hookedRepo(t, ws)
			start := hostGit(t, ws, "rev-parse", "HEAD")
			var offered []string
			var mu sync.Mutex
			cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: committingAgent(&offered, &mu), AllowFloor: true, Backends: bs, NoTakeover: true})
			h, err := cl.Submit(ctx, gitContract(protocol.Workspace{Root: ws}, name), harness.WithRunID("commits-"+name))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFinished {
				t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
			}
			mu.Lock()
			for _, want := range []string{"git_status", "git_diff", "git_log", "git_add", "git_commit"} {
				if !slices.Contains(offered, want) {
					t.Errorf("the model was offered %v, without %s", offered, want)
				}
			}
			mu.Unlock()
			recs, err := h.Trace(ctx)
			if err != nil {
				t.Fatal(err)
			}
			obs := map[string]protocol.Observation{}
			for _, r := range recs {
				for _, o := range r.Observations {
					obs[o.CallID] = o
				}
			}
			for _, id := range []string{"h1", "h2", "h5", "h6", "h7", "h8"} {
				if o := obs[id]; o.State() == protocol.CallOK {
					t.Errorf("hostile call %s = ok: %q; want it refused or failed", id, o.Content)
				}
			}
			for _, id := range []string{"h3", "h4"} { // a file of that name: there is none, and nothing ran
				if o := obs[id]; o.State() == protocol.CallOK && !strings.Contains(o.Content, "Nothing to stage") && !strings.Contains(o.Content, "No commits touch") {
					t.Errorf("call %s = %q; want it inert", id, o.Content)
				}
			}
			if o := obs["h7"]; o.State() != protocol.CallRefused {
				t.Errorf("exec git push = %s %q, want refused by the policy", o.State(), o.Content)
			}
			if o := obs["c"]; o.State() != protocol.CallOK || !strings.Contains(o.Content, "Author: "+agentAuthor) {
				t.Fatalf("git_commit = %s %q", o.State(), o.Content)
			}
			if ran, _ := filepath.Glob(markers); len(ran) > 0 {
				t.Fatalf("the run ran what the repository names: %v", ran)
			}
			if _, err := os.Stat(filepath.Join(ws, "pwned-receive-pack")); err == nil {
				t.Fatal("an argument ran a command")
			}
			if got := hostGit(t, ws, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", "main"); got != agentAuthor+"|"+agentAuthor+"|Add the agent's notes" {
				t.Errorf("the commit on main = %q, want the agent's commit under %s", got, agentAuthor)
			}
			if got := hostGit(t, ws, "rev-parse", "main^"); got != start {
				t.Errorf("the commit's parent = %s, want %s", got, start)
			}
			if got := hostGit(t, ws, "cat-file", "blob", "main:notes.md"); got != "# Notes\nwritten by the agent" {
				t.Errorf("committed notes.md = %q", got)
			}
			if got := hostGit(t, remote, "for-each-ref"); got != "" {
				t.Errorf("the remote has refs %q: something pushed", got)
			}
			if left, _ := filepath.Glob(filepath.Join(ws, ".git", "harness-*")); len(left) > 0 {
				t.Errorf("the git tools left %v in the repository", left)
			}
		})
	}
}

// TestSnapshotRunsCommitsComeBack carries a repository as a snapshot; the
// agent commits there, and the run's commit comes back beside the diff as
// a patch series, under the contract's identity, that git am applies to
// the directory the snapshot was made of.
func TestSnapshotRunsCommitsComeBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	src := t.TempDir()
	markers, _ := hookedRepo(t, src)
	var offered []string
	var mu sync.Mutex
	cl := clustertest.Start(t, harness.Config{Provider: committingAgent(&offered, &mu), AllowFloor: true, NoTakeover: true})
	ref, err := cl.UploadWorkspace(ctx, src, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := cl.Submit(ctx, gitContract(protocol.Workspace{Snapshot: ref}, "floor"), harness.WithRunID("snapshot-commits"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
	}
	p, diff, err := h.Patch(ctx)
	if err != nil || !strings.Contains(string(diff), "+written by the agent") {
		t.Fatalf("Patch = %+v, %q, %v; want the diff of notes.md", p, diff, err)
	}
	if len(p.Commits) != 1 || p.Commits[0].Author != agentAuthor || p.Commits[0].Subject != "Add the agent's notes" || p.Series == "" {
		t.Fatalf("patch commits = %+v, series %q; want the agent's one commit", p.Commits, p.Series)
	}
	commits, series, err := h.Series(ctx)
	if err != nil || len(commits) != 1 || !strings.Contains(string(series), "From: Harness Agent <agent@example.com>") || !strings.Contains(string(series), "Subject: [PATCH] Add the agent's notes") {
		t.Fatalf("Series = %+v, %q, %v", commits, series, err)
	}
	if ran, _ := filepath.Glob(markers); len(ran) > 0 {
		t.Fatalf("the test's own setup ran something: %v", ran)
	}
	// The series applies where the snapshot came from, as the same commit.
	mbox := filepath.Join(t.TempDir(), "run.mbox")
	if err := os.WriteFile(mbox, series, 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, src, "-c", "filter.evil.clean=cat", "-c", "filter.evil.smudge=cat", "am", "-q", mbox)
	if got := hostGit(t, src, "log", "-1", "--format=%an <%ae>|%s"); got != agentAuthor+"|Add the agent's notes" {
		t.Errorf("after git am, HEAD = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "notes.md")); string(got) != "# Notes\nwritten by the agent\n" {
		t.Errorf("after git am, notes.md = %q", got)
	}
}
