package sandboxer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ioharness/harness/internal/git"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// The harness's own git: the commits a contract asks for (workspace.commit).
//
// The workspace's repository is untrusted, and git never reads its
// configuration, hooks or attribute drivers: see internal/git, whose
// overrides and environment every git here runs with. The commit is made
// through a git directory of the harness's own, <run>/git, beside the
// workspace and never inside it, made afresh for each commit;
// GIT_WORK_TREE is the workspace, GIT_OBJECT_DIRECTORY the workspace
// repository's objects, GIT_INDEX_FILE an index in our directory. There is
// no git commit: read-tree, add, write-tree, rev-parse, mktree and
// commit-tree, none of which starts an editor or a pager; the one hook
// among them (add's post-index-change) is off with the rest, and
// commit-tree signs only under commit.gpgSign, which is false. The last
// step, moving the workspace repository's branch to the new commit and
// refreshing its index, is done by the sandboxer itself (git.WriteFile).
//
// git runs inside the run's sandbox. Its working directory is the run's
// directory (<run>), so it can write our git directory and the workspace;
// the run's own commands see the workspace alone (on native and docker), so
// they cannot reach <run>/git. On the floor nothing is out of a command's
// reach, which is why the floor is the operator's to allow.
const snapGit = "git"

// gitEnv returns the environment of the harness's git (git.Env), signed
// by the contract's git.author when the op carries one, else by the
// sandboxer's CommitAuthor and CommitEmail.
func (s *Sandboxer) gitEnv(op *protocol.SandboxOp, extra ...string) []string {
	id := git.Identity{Name: s.cfg.CommitAuthor, Email: s.cfg.CommitEmail}
	if c, err := git.IdentityOf(op.Git); err == nil && c != (git.Identity{}) {
		id = c
	}
	return git.Env(s.cfg.CmdEnv, id, extra...)
}

// gitRepo is one commit in progress: the run's directory (git's working
// directory), the workspace and its repository, and our git directory.
type gitRepo struct {
	s    *Sandboxer
	op   *protocol.SandboxOp
	run  string // <run>
	work string // <run>/work, GIT_WORK_TREE
	own  string // <run>/git, GIT_DIR
}

func (s *Sandboxer) gitRepo(op *protocol.SandboxOp) *gitRepo {
	return &gitRepo{s: s, op: op, run: s.snapPath(op.Run), work: s.snapPath(op.Run, snapWork), own: s.snapPath(op.Run, snapGit)}
}

// initWork makes the workspace a repository with no commits. Nothing of
// the run has happened yet, but the repository is made as every later git
// runs: no template (so no sample hooks), no configuration but ours.
func (g *gitRepo) initWork(ctx context.Context) error {
	_, err := g.gitOut(ctx, g.s.gitEnv(g.op), "init", "-q", "--template=", g.work)
	return err
}

// commit commits the whole workspace on the branch its repository's HEAD
// names (or on HEAD itself, when detached) and returns the commit id. With
// empty false and nothing changed since HEAD's commit it commits nothing and
// returns "". Errors: CodeUnsupported for a repository the harness will not
// commit into (a .git that is a file or a link, a HEAD it cannot follow, an
// object format it does not know), saying why; CodeSandbox when git could
// not run or failed, or the branch could not be moved.
func (g *gitRepo) commit(ctx context.Context, msg string, empty bool) (string, error) {
	root, err := os.OpenRoot(g.work)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeSandbox, "open the workspace: %s", err.Error())
	}
	defer root.Close()
	head, err := git.ReadHead(root)
	if err != nil {
		return "", err
	}
	format, err := g.objectFormat(ctx, root)
	if err != nil {
		return "", err
	}
	if err := g.makeOwn(format); err != nil {
		return "", err
	}
	exclude := "/dev/null"
	if fi, err := root.Lstat(".git/info/exclude"); err == nil && fi.Mode().IsRegular() {
		// A list of patterns, not configuration: it keeps what the person
		// excluded locally out of the commit, as their own git would.
		exclude = filepath.Join(g.work, ".git", "info", "exclude")
	}
	env := g.s.gitEnv(g.op, "GIT_DIR="+g.own, "GIT_WORK_TREE="+g.work,
		"GIT_OBJECT_DIRECTORY="+filepath.Join(g.work, ".git", "objects"),
		"GIT_INDEX_FILE="+filepath.Join(g.own, "index"))
	run := func(args ...string) (string, error) {
		out, err := g.gitOut(ctx, env, append([]string{"-c", "core.excludesFile=" + exclude}, args...)...)
		return strings.TrimSpace(out), err
	}
	if head.Parent != "" {
		// Start from the parent's tree, so that what it tracks and a
		// .gitignore now covers stays tracked, as in the person's own index.
		if _, err := run("read-tree", head.Parent); err != nil {
			return "", err
		}
	}
	if _, err := run("add", "-A"); err != nil {
		return "", err
	}
	tree, err := run("write-tree")
	if err != nil {
		return "", err
	}
	if !empty {
		// The tree before: the parent's, or on a branch with no commit yet
		// the empty tree (mktree of nothing; commands get a null stdin).
		var was string
		if head.Parent != "" {
			was, err = run("rev-parse", "--verify", "-q", head.Parent+"^{tree}")
		} else {
			was, err = run("mktree")
		}
		if err != nil {
			return "", err
		}
		if was == tree {
			return "", nil // nothing to commit
		}
	}
	args := []string{"commit-tree", tree, "-m", msg}
	if head.Parent != "" {
		args = append(args, "-p", head.Parent)
	}
	id, err := run(args...)
	if err != nil {
		return "", err
	}
	if !git.ValidObjectID(id) {
		return "", protocol.Errorf(protocol.CodeSandbox, "git commit-tree answered %q, not a commit id", boundBoth(id, 100))
	}
	if err := git.WriteFile(root, ".git/"+head.Ref, []byte(id+"\n")); err != nil {
		return "", protocol.Errorf(protocol.CodeSandbox, "move %s to the commit %s: %s", head.Ref, id, err.Error())
	}
	// The commit stands once its branch has moved; an index left behind
	// only makes the person's git status show the run's changes as staged
	// against the old commit, so a failure here is logged, not returned.
	if idx, err := os.ReadFile(filepath.Join(g.own, "index")); err != nil {
		g.s.log.Warn("read the commit's index", "run", g.op.Run, "err", err)
	} else if err := git.WriteFile(root, ".git/index", idx); err != nil {
		g.s.log.Warn("update the workspace repository's index", "run", g.op.Run, "err", err)
	}
	return id, nil
}

// makeOwn makes our git directory afresh: whatever a previous attempt (or
// anything else) left there is removed, and the config is ours alone.
func (g *gitRepo) makeOwn(format string) error {
	if err := os.RemoveAll(g.own); err != nil {
		return protocol.Errorf(protocol.CodeSandbox, "clear the harness's git directory: %s", err.Error())
	}
	version, ext := "0", ""
	if format == "sha256" {
		version, ext = "1", "[extensions]\n\tobjectFormat = sha256\n"
	}
	config := "[core]\n\trepositoryformatversion = " + version + "\n\tbare = false\n\tlogAllRefUpdates = false\n" +
		"\thooksPath = /dev/null\n\tfsmonitor = false\n" + ext
	for _, d := range []string{g.own, filepath.Join(g.own, "refs"), filepath.Join(g.own, "objects")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return protocol.Errorf(protocol.CodeSandbox, "make the harness's git directory: %s", err.Error())
		}
	}
	for name, body := range map[string]string{"HEAD": "ref: refs/heads/harness\n", "config": config} {
		if err := os.WriteFile(filepath.Join(g.own, name), []byte(body), 0o600); err != nil {
			return protocol.Errorf(protocol.CodeSandbox, "make the harness's git directory: %s", err.Error())
		}
	}
	return nil
}

// objectFormat returns the object format of the workspace's repository,
// "sha1" or "sha256". It is the one value of work/.git/config the harness
// needs, read as data with git config --file, which follows no include.
// Errors: CodeUnsupported for a config that is not a plain file, or a
// format the harness does not know.
func (g *gitRepo) objectFormat(ctx context.Context, root *os.Root) (string, error) {
	fi, err := root.Lstat(".git/config")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "sha1", nil
	case err != nil:
		return "", protocol.Errorf(protocol.CodeSandbox, "read the workspace's repository: %s", err.Error())
	case !fi.Mode().IsRegular():
		return "", protocol.Errorf(protocol.CodeUnsupported, "the workspace's .git/config is not a plain file; the harness commits only into a repository whose files are its own")
	}
	r, err := g.gitRun(ctx, g.s.gitEnv(g.op), "config", "--file", filepath.Join(g.work, ".git", "config"), "--get", "extensions.objectformat")
	if err != nil {
		return "", protocol.Errorf(protocol.CodeSandbox, "git config could not run: %s", protocol.AsError(err).Message)
	}
	switch f := strings.ToLower(strings.TrimSpace(r.Stdout)); {
	case r.Report.Exited && r.Report.ExitCode == 1, f == "sha1":
		return "sha1", nil // not set: git's default
	case !r.Report.Exited || r.Report.ExitCode != 0:
		return "", protocol.Errorf(protocol.CodeUnsupported, "the workspace's .git/config does not parse: %s", boundBoth(strings.TrimSpace(r.Stderr), 300))
	case f == "sha256":
		return f, nil
	default:
		return "", protocol.Errorf(protocol.CodeUnsupported, "the workspace's repository uses object format %q, which the harness does not commit into", boundBoth(f, 40))
	}
}

// git runs git with env and the overrides in the run's directory, inside
// the run's sandbox, and returns its standard output. Errors: CodeSandbox
// when git could not run or failed.
func (g *gitRepo) gitOut(ctx context.Context, env []string, args ...string) (string, error) {
	r, err := g.gitRun(ctx, env, args...)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeSandbox, "git %s could not run: %s", args[0], protocol.AsError(err).Message)
	}
	if !r.Report.Exited || r.Report.ExitCode != 0 {
		return "", protocol.Errorf(protocol.CodeSandbox, "git %s failed (exit %d): %s", gitVerb(args), r.Report.ExitCode, boundBoth(strings.TrimSpace(r.Stderr+r.Stdout), 500))
	}
	return r.Stdout, nil
}

// gitVerb is the subcommand of args, past any -c pairs, for a message.
func gitVerb(args []string) string {
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" {
			i++
			continue
		}
		return args[i]
	}
	return "git"
}

func (g *gitRepo) gitRun(ctx context.Context, env []string, args ...string) (*sandbox.Result, error) {
	var spec protocol.SandboxSpec
	if g.op.Sandbox != nil {
		spec = *g.op.Sandbox
	}
	b, err := g.s.backend(spec.Backend)
	if err != nil {
		return nil, err
	}
	argv := append(append([]string{"git"}, git.Overrides()...), args...)
	lim := spec.Limits.WithDefaults()
	rctx, cancel := context.WithTimeout(ctx, time.Duration(lim.WallSecs)*time.Second+5*time.Second)
	defer cancel()
	// The run's directory, not the workspace: git writes our git directory
	// beside it. Nothing of the run's network either.
	return g.s.metered(b).Run(sandbox.WithRun(rctx, g.op.Run, g.op.OpID+".git"), sandbox.Spec{Argv: argv, Dir: g.run, Env: env, Limits: lim})
}

// series returns the commits on the HEAD of the run's snapshot workspace
// made after base, oldest first, and them as a patch series (see
// git.Repo.Series), at most protocol.MaxPatchCommits of them and the
// snapshot limit's archive size of series. git runs as for a tool call:
// through a git directory of the harness's own, in the run's sandbox.
func (s *Sandboxer) series(ctx context.Context, op *protocol.SandboxOp, work, base string) ([]protocol.CommitInfo, []byte, error) {
	root, err := os.OpenRoot(work)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternal, "open the workspace: %s", err.Error())
	}
	defer root.Close()
	var spec protocol.SandboxSpec
	if op.Sandbox != nil {
		spec = *op.Sandbox
	}
	lim := spec.Limits.WithDefaults()
	run := func(ctx context.Context, argv, env []string) (*sandbox.Result, error) {
		b, err := s.backend(spec.Backend)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, time.Duration(lim.WallSecs)*time.Second+5*time.Second)
		defer cancel()
		return s.metered(b).Run(sandbox.WithRun(rctx, op.Run, op.OpID+".series"), sandbox.Spec{Argv: argv, Dir: work, Env: env, Limits: lim})
	}
	repo, err := git.Open(ctx, root, work, run, git.Options{CmdEnv: s.cfg.CmdEnv, ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer repo.Close()
	return repo.Series(ctx, base, protocol.MaxPatchCommits, s.cfg.SnapshotLimits.WithDefaults().MaxArchiveBytes)
}
