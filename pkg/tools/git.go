package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ioharness/harness/internal/git"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// The git tools: git_status, git_diff, git_log, git_add and git_commit.
//
// Each runs one fixed git command the tool builds, never one the model
// writes: the model gives paths and a message, and no argument of theirs
// is ever a subcommand or a flag. Every path goes after "--" and is a
// literal file name (GIT_LITERAL_PATHSPECS), so "--upload-pack=x" or
// ":(top)" is a file of that name; a path inside a .git directory is
// refused. Push, fetch, reset, rebase, config and hooks are not reachable
// by construction, and git reads no configuration but the harness's own
// (see internal/git): no hook, filter, pager, editor or fsmonitor of the
// repository runs. The commands run through Env.Sandbox, as exec's do,
// with the run's caps and no network.
//
// The tools judge what they touch as the file tools do: git_status,
// git_diff and git_log read each path they are given (the whole workspace
// when none), and what git_status and git_diff show is left out, without
// a word, for every file the policy does not let the agent read; git_add
// writes each path it stages, and leaves out a file beneath a named
// directory that the policy does not let it write; git_commit writes the
// workspace "." and signs with Env.GitAuthor, the contract's, never the
// model's.

// maxGitLog is the most commits git_log shows.
const maxGitLog = 30

// maxGitDiffFiles is the most files one section of git_diff shows.
const maxGitDiffFiles = 500

// maxCommitMessage bounds git_commit's message, in bytes.
const maxCommitMessage = 64 << 10

var gitPathsParam = param{name: "paths", kind: kindStringArray, example: `["src/main.go", "docs"]`,
	desc: `Workspace paths (files or directories) to limit it to, such as ["src/main.go", "docs"]; leave it out for the whole workspace.`}

var (
	gitStatusParams = params{gitPathsParam}
	gitDiffParams   = params{gitPathsParam}
	gitLogParams    = params{gitPathsParam}
	gitAddParams    = params{{name: "paths", kind: kindStringArray, required: true, example: `["src/main.go"]`,
		desc: `Workspace paths (files or directories) whose changes to stage for the next git_commit, such as ["src/main.go"]; ["."] stages every change in the workspace.`}}
	gitCommitParams = params{{name: "message", kind: kindString, required: true,
		desc: "The commit message: a short first line, then, after a blank line, more if needed."}}
)

// Git returns the git tools, in this order: git_status, git_diff,
// git_log, git_add, git_commit. They are not among Builtins: a sandboxer
// offers them for a workspace that is a git repository.
func Git() *Set {
	s, err := NewSet(GitStatus{}, GitDiff{}, GitLog{}, GitAdd{}, GitCommit{})
	if err != nil {
		panic(err) // the names above are fixed and distinct
	}
	return s
}

// GitStatus is the git_status tool: what changed in the workspace, staged
// and not, and what git does not track yet.
type GitStatus struct{}

// ReadOnly marks git_status as changing nothing.
func (GitStatus) ReadOnly() {}

// Spec describes git_status.
func (GitStatus) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "git_status",
		Description: "Show the workspace repository's branch and which files changed: staged for the next commit, changed but not staged, and untracked. " +
			"Files the policy hides are not listed.",
		Parameters: gitStatusParams.schema(),
	}
}

// Invoke runs git status on the paths given (or the whole workspace) and
// lists the changes, leaving out every file Judge refuses to let be read.
// Errors: those of every git tool (see gitRepo and gitPaths); CodeSandbox
// when git fails; the end of ctx, wrapped.
func (GitStatus) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	const tool = "git_status"
	a, err := gitStatusParams.decode(tool, raw)
	if err != nil {
		return nil, err
	}
	w, paths, err := env.gitPaths(tool, ActRead, a.strs("paths"))
	if err != nil {
		return nil, err
	}
	repo, err := env.gitRepo(ctx, tool, w, true, git.Identity{})
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	entries, err := env.gitList(ctx, tool, repo, append([]string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all", "--no-renames", "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	var staged, unstaged, untracked []string
	for _, e := range entries {
		if len(e) < 4 || e[2] != ' ' {
			continue
		}
		x, y, name := e[0], e[1], e[3:]
		if env.gitHidden(w, name) {
			continue
		}
		switch {
		case x == '?':
			untracked = append(untracked, "  "+name)
		case x == '!':
		default:
			if x != ' ' {
				staged = append(staged, fmt.Sprintf("  %-10s %s", statusWord(x), name))
			}
			if y != ' ' {
				unstaged = append(unstaged, fmt.Sprintf("  %-10s %s", statusWord(y), name))
			}
		}
	}
	var b strings.Builder
	b.WriteString(headLine(repo.Head()) + "\n")
	for _, s := range []struct {
		title string
		lines []string
	}{
		{"Staged (the next git_commit records these):", staged},
		{"Changed, not staged (git_add them to record them):", unstaged},
		{"Untracked (git_add them to record them):", untracked},
	} {
		if len(s.lines) > 0 {
			b.WriteString(s.title + "\n" + strings.Join(s.lines, "\n") + "\n")
		}
	}
	if len(staged)+len(unstaged)+len(untracked) == 0 {
		b.WriteString("Nothing changed: the files match the last commit.\n")
	}
	return &Output{Content: keepHead(b.String(), env.entryCap())}, nil
}

// statusWord names a porcelain status letter.
func statusWord(c byte) string {
	switch c {
	case 'M':
		return "modified"
	case 'A':
		return "added"
	case 'D':
		return "deleted"
	case 'T':
		return "type"
	case 'U':
		return "unmerged"
	case 'R':
		return "renamed"
	case 'C':
		return "copied"
	}
	return string(c)
}

// headLine says where the repository's HEAD is.
func headLine(h git.Head) string {
	switch {
	case h.Ref == "HEAD":
		return "HEAD detached at " + short(h.Parent)
	case h.Parent == "":
		return "On branch " + h.Branch() + ", no commits yet"
	}
	return "On branch " + h.Branch() + " at " + short(h.Parent)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// GitDiff is the git_diff tool: the changes, staged and not, line by line.
type GitDiff struct{}

// ReadOnly marks git_diff as changing nothing.
func (GitDiff) ReadOnly() {}

// Spec describes git_diff.
func (GitDiff) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "git_diff",
		Description: "Show the changes in the workspace repository as unified diffs: first what is staged for the next commit, then what is changed but not staged. " +
			"Untracked files are not shown (git_status lists them); files the policy hides are left out.",
		Parameters: gitDiffParams.schema(),
	}
}

// Invoke lists the files changed under the paths given (or everywhere),
// staged and not, leaves out every one Judge refuses to let be read, and
// shows the diff of the rest. Errors: those of every git tool; CodeSandbox
// when git fails; the end of ctx, wrapped.
func (GitDiff) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	const tool = "git_diff"
	a, err := gitDiffParams.decode(tool, raw)
	if err != nil {
		return nil, err
	}
	w, paths, err := env.gitPaths(tool, ActRead, a.strs("paths"))
	if err != nil {
		return nil, err
	}
	repo, err := env.gitRepo(ctx, tool, w, true, git.Identity{})
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	var b strings.Builder
	for _, s := range []struct {
		title string
		flags []string
	}{
		{"[staged: the next git_commit records this]", []string{"--cached"}},
		{"[changed, not staged]", nil},
	} {
		// The names first, judged one by one; then the diff of those the
		// agent may read, named one by one, so a hidden file's lines never
		// come out of git.
		base := append([]string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--ignore-submodules=all"}, s.flags...)
		names, err := env.gitList(ctx, tool, repo, append(append(slices.Clone(base), "--name-only", "-z", "--"), paths...)...)
		if err != nil {
			return nil, err
		}
		var shown []string
		more := 0
		for _, n := range names {
			if n == "" || env.gitHidden(w, n) {
				continue
			}
			if len(shown) == maxGitDiffFiles {
				more++
				continue
			}
			shown = append(shown, n)
		}
		if len(shown) == 0 {
			continue
		}
		diff, err := env.gitOutput(ctx, tool, repo, append(append(base, "--"), shown...)...)
		if err != nil {
			return nil, err
		}
		b.WriteString(s.title + "\n" + strings.ToValidUTF8(diff, "\uFFFD"))
		if more > 0 {
			fmt.Fprintf(&b, "[and %d more changed files; name them in paths to see them]\n", more)
		}
	}
	if b.Len() == 0 {
		b.WriteString("No changes: the tracked files match the last commit and nothing is staged. (git_status lists untracked files.)")
	}
	return &Output{Content: keepHeadTail(b.String(), env.entryCap(), nil)}, nil
}

// GitLog is the git_log tool: the latest commits.
type GitLog struct{}

// ReadOnly marks git_log as changing nothing.
func (GitLog) ReadOnly() {}

// Spec describes git_log.
func (GitLog) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name:        "git_log",
		Description: fmt.Sprintf("Show the latest commits of the workspace repository's HEAD (at most %d), newest first: id, author, date and message; with paths, only the commits that changed them.", maxGitLog),
		Parameters:  gitLogParams.schema(),
	}
}

// Invoke shows the last maxGitLog commits reachable from HEAD that touch
// the paths given (or any). Errors: those of every git tool; CodeSandbox
// when git fails; the end of ctx, wrapped.
func (GitLog) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	const tool = "git_log"
	a, err := gitLogParams.decode(tool, raw)
	if err != nil {
		return nil, err
	}
	w, paths, err := env.gitPaths(tool, ActRead, a.strs("paths"))
	if err != nil {
		return nil, err
	}
	repo, err := env.gitRepo(ctx, tool, w, true, git.Identity{})
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	if repo.Head().Parent == "" {
		return &Output{Content: headLine(repo.Head())}, nil
	}
	out, err := env.gitOutput(ctx, tool, repo, append([]string{"log", fmt.Sprintf("--max-count=%d", maxGitLog), "--no-decorate", "--no-color", "--date=iso",
		"--format=commit %H%nAuthor: %an <%ae>%nDate:   %ad%n%n%w(0,4,4)%B", "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	out = strings.TrimSpace(strings.ToValidUTF8(out, "\uFFFD"))
	if out == "" {
		out = "No commits touch these paths."
	}
	return &Output{Content: keepHead(headLine(repo.Head())+"\n\n"+out, env.entryCap())}, nil
}

// GitAdd is the git_add tool: stage changes for the next git_commit.
type GitAdd struct{}

// Spec describes git_add.
func (GitAdd) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "git_add",
		Description: "Stage the changes of the given files and directories (new, modified or deleted files) for the next git_commit. " +
			"Files git ignores are not staged.",
		Parameters: gitAddParams.schema(),
	}
}

// Invoke stages the changes under the paths given: each path is judged
// as a write (with the links on its way), then every changed, deleted or
// untracked, not ignored, file under them is judged as a read and a write,
// and staged only if both are allowed (one the agent may not read is left
// out without a word, one it may read but not write is named as left
// out). Errors: those of every git tool; CodeBadArguments for an empty
// paths; CodeSandbox when git fails; the end of ctx, wrapped.
func (GitAdd) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	const tool = "git_add"
	a, err := gitAddParams.decode(tool, raw)
	if err != nil {
		return nil, err
	}
	if len(a.strs("paths")) == 0 {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "paths", "", `paths is empty; name the files or directories to stage, such as ["src/main.go"] (["."] for every change)`)
	}
	w, paths, err := env.gitPaths(tool, ActWrite, a.strs("paths"))
	if err != nil {
		return nil, err
	}
	repo, err := env.gitRepo(ctx, tool, w, false, git.Identity{})
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	changed, err := env.gitList(ctx, tool, repo, append([]string{"ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard", "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	var stage, left []string
	for _, f := range changed {
		if f == "" || slices.Contains(stage, f) {
			continue
		}
		if strings.HasSuffix(f, "/") {
			// An untracked directory git shows as one entry is a
			// repository of its own; staging it would record a gitlink.
			if !env.gitHidden(w, strings.TrimSuffix(f, "/")) {
				left = append(left, fmt.Sprintf("  %s: a repository of its own, which git_add does not stage", f))
			}
			continue
		}
		if slices.Contains(paths, f) {
			stage = append(stage, f) // judged as named, with its links
			continue
		}
		if env.gitHidden(w, f) {
			continue
		}
		r, _ := w.resolve(f)
		if err := env.judge(ActWrite, r); err != nil {
			left = append(left, "  "+f+": "+protocol.AsError(err).Message)
			continue
		}
		stage = append(stage, f)
	}
	var b strings.Builder
	if len(stage) == 0 {
		b.WriteString("Nothing to stage: the paths hold no change git would record (unchanged, already staged, or ignored).\n")
	} else {
		list, err := repo.WriteList("pathspecs", stage)
		if err != nil {
			return nil, err
		}
		if _, err := env.gitOutput(ctx, tool, repo, "add", "--pathspec-from-file="+list, "--pathspec-file-nul"); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "Staged %d file(s) for the next git_commit:\n  %s\n", len(stage), strings.Join(stage, "\n  "))
	}
	if len(left) > 0 {
		b.WriteString("Left out:\n" + strings.Join(left, "\n") + "\n")
	}
	return &Output{Content: keepHead(b.String(), env.entryCap()), Changed: len(stage) > 0}, nil
}

// GitCommit is the git_commit tool: record what is staged as a commit on
// the current branch, under the contract's identity.
type GitCommit struct{}

// Spec describes git_commit.
func (GitCommit) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "git_commit",
		Description: "Record the staged changes (see git_add) as a new commit on the current branch of the workspace repository, with this message. " +
			"The author is set by the run's contract.",
		Parameters: gitCommitParams.schema(),
	}
}

// Invoke commits what is staged, with the message as given (one argv
// element, never parsed as a flag), as Env.GitAuthor for author and
// committer, with no hook run, and moves the branch HEAD is on to the new
// commit. The workspace "." is judged as a write first. Errors: those of
// every git tool; CodeBadArguments for an empty message, one holding a
// NUL byte or one over 64 KiB, and when nothing is staged; CodeRefused
// when Env.GitAuthor is empty (the contract names no identity) or is not
// "Name <email>"; CodeUnavailable when the branch moved during the commit;
// CodeSandbox when git fails; the end of ctx, wrapped.
func (GitCommit) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	const tool = "git_commit"
	a, err := gitCommitParams.decode(tool, raw)
	if err != nil {
		return nil, err
	}
	msg := a.str("message")
	switch {
	case strings.TrimSpace(msg) == "":
		return nil, protocol.FieldError(protocol.CodeBadArguments, "message", "", "the commit message is empty; say what the commit changes and why")
	case strings.ContainsRune(msg, 0):
		return nil, protocol.FieldError(protocol.CodeBadArguments, "message", "", "the commit message holds a NUL byte, which git cannot record; remove it")
	case len(msg) > maxCommitMessage:
		return nil, protocol.FieldError(protocol.CodeBadArguments, "message", "", "the commit message is %d bytes, over the limit of %d; shorten it", len(msg), maxCommitMessage)
	}
	if env == nil || strings.TrimSpace(env.GitAuthor) == "" {
		return nil, protocol.Errorf(protocol.CodeRefused, `[git_commit refused] the run's contract names no identity to commit under; the contract's author sets it ("git": {"author": "Name <email>"}), and the model cannot. Leave the changes staged or uncommitted.`)
	}
	name, email, err := protocol.ParseGitAuthor(env.GitAuthor)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeRefused, "[git_commit refused] the contract's git.author is not usable: %s", protocol.AsError(err).Message)
	}
	w, err := env.workspace(tool)
	if err != nil {
		return nil, err
	}
	if err := env.judge(ActWrite, &Resolution{Paths: []string{"."}}); err != nil {
		return nil, err
	}
	repo, err := env.gitRepo(ctx, tool, w, false, git.Identity{Name: name, Email: email})
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	res, err := env.gitRun(ctx, tool, repo, "diff", "--cached", "--quiet", "--ignore-submodules=all", "--no-ext-diff")
	if err != nil {
		return nil, err
	}
	if res.Report.Exited && res.Report.ExitCode == 0 {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "", "", "nothing is staged to commit; stage the changes with git_add first (git_status shows what changed)")
	}
	if _, err := env.gitOutput(ctx, tool, repo, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "--no-status", "--untracked-files=no", "--message="+msg); err != nil {
		return nil, err
	}
	id, err := repo.Advance(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	files, err := env.gitList(ctx, tool, repo, "diff-tree", "--no-commit-id", "--name-only", "-z", "-r", "--root", "--no-renames", id)
	if err != nil {
		files = nil // the commit stands; its file list is only shown
	}
	var shown []string
	for _, f := range files {
		if f != "" && !env.gitHidden(w, f) {
			shown = append(shown, f)
		}
	}
	subject, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	branch := repo.Head().Branch()
	if repo.Head().Ref == "HEAD" {
		branch = "detached HEAD"
	}
	content := fmt.Sprintf("Committed %s on %s: %s\nAuthor: %s <%s>\n", short(id), branch, subject, name, email)
	if len(shown) > 0 {
		content += fmt.Sprintf("%d file(s):\n  %s\n", len(shown), strings.Join(shown, "\n  "))
	}
	return &Output{Content: keepHead(content, env.entryCap()), Changed: true}, nil
}

// gitPaths checks the paths a git tool's call names and returns them
// cleaned and without repeats, with the workspace. Each goes through
// Resolve, may not lie in a .git directory (by its name or where a link
// on its way leads), and is judged as act with every path its resolution
// passes through, as the file tools judge theirs. None given is nil: the
// whole workspace. Errors: CodeUnsupported without a workspace; those of
// Resolve and ResolveLinks; CodeBadArguments for a path in .git; the
// Judge's refusal.
func (e *Env) gitPaths(tool, act string, given []string) (*Workspace, []string, error) {
	w, err := e.workspace(tool)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for _, p := range given {
		rel, err := w.Resolve(p)
		if err != nil {
			return nil, nil, err
		}
		r, err := e.judged(w, act, rel)
		if err != nil {
			return nil, nil, err
		}
		for _, q := range r.Paths {
			if inGitDir(q) {
				return nil, nil, protocol.FieldError(protocol.CodeBadArguments, "paths", "",
					"%q is inside a repository's .git directory (%s), which the git tools never take as a path; name files of the working tree", p, q)
			}
		}
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	return w, out, nil
}

// inGitDir reports whether rel names a .git directory or lies in one, at
// any depth, without regard to case (as a case-insensitive file system
// would find it).
func inGitDir(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

// gitHidden reports whether a file git named is one the agent may not
// see: Judge refuses to let it, or a path its resolution passes through,
// be read. git_status and git_diff leave such a file out without a word,
// as grep and find do.
func (e *Env) gitHidden(w *Workspace, name string) bool {
	if e.Judge == nil {
		return false
	}
	rel, err := w.Resolve(name)
	if err != nil {
		return true // a name the workspace would not take is not shown either
	}
	r, _ := w.resolve(rel)
	return e.hidden(ActRead, r)
}

// gitRepo opens the workspace's repository for one call of tool: git will
// run through Env.Sandbox in the workspace, with Env's caps and command
// environment, no network, and id as author and committer. Errors:
// CodeUnsupported when Env has no sandbox; CodeNotFound when the
// workspace is not a git repository, or git is not installed where the
// sandbox runs commands; those of git.Open; the end of ctx, wrapped.
func (e *Env) gitRepo(ctx context.Context, tool string, w *Workspace, readOnly bool, id git.Identity) (*git.Repo, error) {
	if e.Sandbox == nil {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "%s is not available: this sandboxer has no sandbox to run git in", tool)
	}
	run := func(ctx context.Context, argv, cmdEnv []string) (*sandbox.Result, error) {
		res, err := e.Sandbox.Run(ctx, sandbox.Spec{Argv: argv, Dir: w.Dir(), Env: cmdEnv, Limits: e.Limits})
		switch {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: %w", tool, ctx.Err())
		case errors.Is(err, protocol.ErrNotFound):
			return nil, protocol.Errorf(protocol.CodeNotFound, "%s cannot run: git is unavailable on this sandboxer (it is not installed where its commands run); the operator can install it, or use read_file and the other file tools", tool)
		}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, protocol.Errorf(protocol.CodeSandbox, "%s: could not run git: %v", tool, err)
	}
	repo, err := git.Open(ctx, w.root, w.Dir(), run, git.Options{CmdEnv: e.CmdEnv, Identity: id, ReadOnly: readOnly})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", tool, ctx.Err())
		}
		pe := protocol.AsError(err)
		if pe != nil && (pe.Code == protocol.CodeNotFound || pe.Code == protocol.CodeUnsupported) && !strings.HasPrefix(pe.Message, tool) {
			return nil, protocol.Errorf(pe.Code, "%s cannot run: %s", tool, pe.Message)
		}
		return nil, err
	}
	return repo, nil
}

// gitRun runs git through repo, and returns its result whatever its exit
// status; the end of ctx is returned wrapped.
func (e *Env) gitRun(ctx context.Context, tool string, repo *git.Repo, args ...string) (*sandbox.Result, error) {
	res, err := repo.Run(ctx, args...)
	if err == nil {
		err = ctx.Err()
		if err != nil {
			err = fmt.Errorf("%s: %w", tool, err)
		}
	}
	return res, err
}

// gitList runs git through repo for a list of names, NUL-terminated
// (-z), and returns them. A list the sandbox cut in the middle (over the
// output cap) is refused whole rather than parsed, since the entry cut
// would run two names together and be judged as neither. Errors: those
// of gitOutput; CodeTooLarge for a cut list.
func (e *Env) gitList(ctx context.Context, tool string, repo *git.Repo, args ...string) ([]string, error) {
	out, err := e.gitOutput(ctx, tool, repo, args...)
	if err != nil {
		return nil, err
	}
	if sandbox.ElidedBytes(out) > 0 {
		return nil, protocol.Errorf(protocol.CodeTooLarge, "%s: git's list of files is over the output cap of %d bytes; name narrower paths", tool, e.Limits.WithDefaults().OutputBytes)
	}
	var names []string
	for _, n := range strings.Split(out, "\x00") {
		if n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}

// gitOutput runs git through repo and returns its standard output; a git
// that did not exit 0 is a CodeSandbox error with what git said.
func (e *Env) gitOutput(ctx context.Context, tool string, repo *git.Repo, args ...string) (string, error) {
	res, err := e.gitRun(ctx, tool, repo, args...)
	if err != nil {
		return "", err
	}
	if err := git.Failed(res, args[0]); err != nil {
		return "", err
	}
	return res.Stdout, nil
}
