package sandboxer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// The harness's own git: the commits a contract asks for (workspace.commit).
//
// The workspace's repository is untrusted: it came with the snapshot (the
// contract's), and the run's commands may have written it. Its
// configuration can name a command for git to run in a dozen ways: hooks
// and core.hooksPath, filter.<driver>.clean, .smudge and .process (named
// by a .gitattributes in the worktree), core.fsmonitor, core.pager,
// core.editor, core.sshCommand, diff.external, credential.helper,
// gpg.program, include.path and includeIf pulling any of these from
// another file, and more in every new version of git. Overriding them one
// by one with -c cannot be complete: filter.*.clean is a wildcard, and
// every key we do not know of stays live.
//
// So the harness never lets git read the workspace's repository
// configuration at all. Every git it runs has:
//
//   - GIT_DIR pointed at a git directory of its own, <run>/git, beside the
//     workspace and never inside it, made afresh for each commit with a
//     config the harness wrote (no filters, no hooks, no includes).
//     GIT_WORK_TREE is the workspace; GIT_OBJECT_DIRECTORY the workspace
//     repository's objects, so the commit is stored where the person
//     looks for it; GIT_INDEX_FILE an index in our directory. The files of
//     work/.git that git would read as configuration (config and its
//     includes, hooks/, info/attributes) are never read as such: only
//     info/exclude, a list of patterns, is passed as core.excludesFile, and
//     the one value the commit needs from work/.git/config, its object
//     format, is read as data (git config --file, which follows no
//     include).
//   - no system or global configuration or attributes
//     (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, GIT_ATTR_NOSYSTEM,
//     HOME and XDG_CONFIG_HOME pointing at nothing), no GIT_* variable of
//     the sandboxer's command environment, and -c overrides of every
//     command-valued key we know of: a second wall, should git ever read a
//     configuration we did not write.
//   - no git commit: read-tree, add, write-tree, rev-parse, mktree and
//     commit-tree, none of which starts an editor or a pager; the one hook
//     among them (add's post-index-change) is off with the rest, and
//     commit-tree signs only under commit.gpgSign, which is false.
//
// A worktree .gitattributes may still name a filter driver; with no
// filter.<driver> in the only configuration git reads, the attribute is
// inert, as for a driver that is not installed.
//
// The last step, moving the workspace repository's branch to the new commit
// and refreshing its index, is done by the sandboxer itself, through an
// os.Root on the workspace (so no link leads it out), because git
// update-ref would read work/.git/config again. No reflog entry is
// written.
//
// git still runs inside the run's sandbox, as before: it parses objects and
// an index the run may have crafted. Its working directory is the run's
// directory (<run>), so it can write our git directory and the workspace;
// the run's own commands see the workspace alone (on native and docker), so
// they cannot reach <run>/git. On the floor nothing is out of a command's
// reach, which is why the floor is the operator's to allow.
const snapGit = "git"

// gitOverrides are the -c arguments of every git the harness runs; see
// above. Values that name a program name one that does nothing (false,
// cat); an empty credential.helper clears the list of helpers.
func gitOverrides() []string {
	kv := []string{
		"core.hooksPath=/dev/null",
		"core.fsmonitor=false",
		"core.untrackedCache=false",
		"core.sshCommand=false",
		"core.askPass=false",
		"core.pager=cat",
		"core.editor=false",
		"sequence.editor=false",
		"core.attributesFile=/dev/null",
		"diff.external=",
		"credential.helper=",
		"gpg.program=false",
		"commit.gpgSign=false",
		"protocol.allow=never",
		"gc.auto=0",
		"maintenance.auto=false",
		// The run's directory is owned by the sandboxer's uid, which a user
		// namespace may map to another; ownership says nothing here.
		"safe.directory=*",
	}
	args := make([]string, 0, 2*len(kv))
	for _, s := range kv {
		args = append(args, "-c", s)
	}
	return args
}

// gitEnv returns the environment of the harness's git: the command
// environment without any GIT_* variable or HOME, then ours.
func (s *Sandboxer) gitEnv(extra ...string) []string {
	env := make([]string, 0, len(s.cfg.CmdEnv)+16)
	for _, kv := range s.cfg.CmdEnv {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"HOME=/nonexistent", "XDG_CONFIG_HOME=/nonexistent",
		"GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1", "GIT_PROTOCOL_FROM_USER=0",
		"GIT_AUTHOR_NAME="+s.cfg.CommitAuthor, "GIT_AUTHOR_EMAIL="+s.cfg.CommitEmail,
		"GIT_COMMITTER_NAME="+s.cfg.CommitAuthor, "GIT_COMMITTER_EMAIL="+s.cfg.CommitEmail)
	return append(env, extra...)
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
	_, err := g.git(ctx, g.s.gitEnv(), "init", "-q", "--template=", g.work)
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
	head, err := readHead(root)
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
	env := g.s.gitEnv("GIT_DIR="+g.own, "GIT_WORK_TREE="+g.work,
		"GIT_OBJECT_DIRECTORY="+filepath.Join(g.work, ".git", "objects"),
		"GIT_INDEX_FILE="+filepath.Join(g.own, "index"))
	run := func(args ...string) (string, error) {
		out, err := g.git(ctx, env, append([]string{"-c", "core.excludesFile=" + exclude}, args...)...)
		return strings.TrimSpace(out), err
	}
	if head.parent != "" {
		// Start from the parent's tree, so that what it tracks and a
		// .gitignore now covers stays tracked, as in the person's own index.
		if _, err := run("read-tree", head.parent); err != nil {
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
		if head.parent != "" {
			was, err = run("rev-parse", "--verify", "-q", head.parent+"^{tree}")
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
	if head.parent != "" {
		args = append(args, "-p", head.parent)
	}
	id, err := run(args...)
	if err != nil {
		return "", err
	}
	if !validObjectID(id) {
		return "", protocol.Errorf(protocol.CodeSandbox, "git commit-tree answered %q, not a commit id", boundBoth(id, 100))
	}
	if err := writeGitFile(root, ".git/"+head.ref, []byte(id+"\n")); err != nil {
		return "", protocol.Errorf(protocol.CodeSandbox, "move %s to the commit %s: %s", head.ref, id, err.Error())
	}
	// The commit stands once its branch has moved; an index left behind
	// only makes the person's git status show the run's changes as staged
	// against the old commit, so a failure here is logged, not returned.
	if idx, err := os.ReadFile(filepath.Join(g.own, "index")); err != nil {
		g.s.log.Warn("read the commit's index", "run", g.op.Run, "err", err)
	} else if err := writeGitFile(root, ".git/index", idx); err != nil {
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
	r, err := g.gitRun(ctx, g.s.gitEnv(), "config", "--file", filepath.Join(g.work, ".git", "config"), "--get", "extensions.objectformat")
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

// head is what the workspace repository's HEAD says: the ref a commit
// moves ("refs/heads/main", or "HEAD" when detached) and the commit it
// points at now ("" on a branch with no commits yet).
type head struct {
	ref, parent string
}

// readHead reads .git/HEAD and the ref it names, loose or packed, through
// root. Only what git's files backend writes is followed: a symbolic ref
// to a branch, or a detached commit id. Errors: CodeUnsupported, saying
// what the harness found.
func readHead(root *os.Root) (head, error) {
	fi, err := root.Lstat(".git")
	if err != nil || !fi.IsDir() {
		return head{}, protocol.Errorf(protocol.CodeUnsupported,
			"the workspace's .git is not a directory (a gitdir file or a link, or missing); the harness commits only into a repository kept inside the workspace")
	}
	for _, d := range []string{".git/objects", ".git/refs"} {
		if fi, err := root.Lstat(d); err != nil || !fi.IsDir() {
			return head{}, protocol.Errorf(protocol.CodeUnsupported, "the workspace's %s is not a directory; the harness commits only into a repository whose files are its own", d)
		}
	}
	b, err := readSmall(root, ".git/HEAD")
	if err != nil {
		return head{}, protocol.Errorf(protocol.CodeUnsupported, "read the workspace's .git/HEAD: %s", err.Error())
	}
	s := strings.TrimSpace(string(b))
	if validObjectID(s) {
		return head{ref: "HEAD", parent: s}, nil
	}
	ref, ok := strings.CutPrefix(s, "ref: ")
	if !ok || !validBranch(ref) {
		return head{}, protocol.Errorf(protocol.CodeUnsupported, "the workspace's .git/HEAD names %q, not a branch the harness can move", boundBoth(s, 100))
	}
	id, err := resolveRef(root, ref)
	if err != nil {
		return head{}, err
	}
	return head{ref: ref, parent: id}, nil
}

// resolveRef returns the commit a branch points at: its loose file, or its
// line in packed-refs, or "" for a branch with no commit yet.
func resolveRef(root *os.Root, ref string) (string, error) {
	name := ".git/" + ref
	switch fi, err := root.Lstat(name); {
	case err == nil && fi.Mode().IsRegular():
		b, err := readSmall(root, name)
		if err != nil {
			return "", protocol.Errorf(protocol.CodeUnsupported, "read %s: %s", ref, err.Error())
		}
		if id := strings.TrimSpace(string(b)); validObjectID(id) {
			return id, nil
		}
		return "", protocol.Errorf(protocol.CodeUnsupported, "%s of the workspace's repository holds no commit id", ref)
	case err == nil:
		return "", protocol.Errorf(protocol.CodeUnsupported, "%s of the workspace's repository is not a plain file", ref)
	case !errors.Is(err, fs.ErrNotExist):
		return "", protocol.Errorf(protocol.CodeUnsupported, "read %s: %s", ref, err.Error())
	}
	f, err := root.Open(".git/packed-refs")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", protocol.Errorf(protocol.CodeUnsupported, "read packed-refs: %s", err.Error())
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && validObjectID(id) {
			return id, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", protocol.Errorf(protocol.CodeUnsupported, "read packed-refs: %s", err.Error())
	}
	return "", nil
}

// readSmall reads a file of at most 4 KiB through root, as HEAD and a loose
// ref are; a longer one is an error rather than a large read.
func readSmall(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4097))
	if err == nil && len(b) > 4096 {
		err = fmt.Errorf("%s is over 4 KiB", name)
	}
	return b, err
}

// writeGitFile replaces name under root as git does: written in full to
// name.lock, created exclusively (so a git running at the same time makes
// one of the two fail rather than both write), then renamed into place.
func writeGitFile(root *os.Root, name string, data []byte) error {
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	lock := name + ".lock"
	f, err := root.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(lock, name)
	}
	if err != nil {
		_ = root.Remove(lock)
	}
	return err
}

// validObjectID reports whether s is a full object id: 40 (SHA-1) or 64
// (SHA-256) lower-case hex digits.
func validObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validBranch reports whether ref is a branch name git's files backend
// could have written, conservatively (git check-ref-format allows more):
// refs/heads/ and components that are not empty, do not start with '.' or
// end with ".lock", of printable ASCII without space and ~^:?*[\, and no
// ".." or "@{". The name becomes a path under .git, so this also keeps it
// there.
func validBranch(ref string) bool {
	name, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || name == "" || strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.HasSuffix(name, ".") {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return false
		}
	}
	return true
}

// git runs git with env and the overrides in the run's directory, inside
// the run's sandbox, and returns its standard output. Errors: CodeSandbox
// when git could not run or failed.
func (g *gitRepo) git(ctx context.Context, env []string, args ...string) (string, error) {
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
	argv := append(append([]string{"git"}, gitOverrides()...), args...)
	lim := spec.Limits.WithDefaults()
	rctx, cancel := context.WithTimeout(ctx, time.Duration(lim.WallSecs)*time.Second+5*time.Second)
	defer cancel()
	// The run's directory, not the workspace: git writes our git directory
	// beside it. Nothing of the run's network either.
	return g.s.metered(b).Run(sandbox.WithRun(rctx, g.op.Run, g.op.OpID+".git"), sandbox.Spec{Argv: argv, Dir: g.run, Env: env, Limits: lim})
}
