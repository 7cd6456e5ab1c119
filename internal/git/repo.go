package git

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// Runner runs one git command, argv with "git" first, with the complete
// environment env, in the workspace directory inside the run's sandbox.
// It returns what sandbox.Backend.Run returns.
type Runner func(ctx context.Context, argv, env []string) (*sandbox.Result, error)

// Options are how a Repo runs git.
type Options struct {
	// CmdEnv is the sandboxer's command environment (sandbox.MinimalEnv),
	// cleaned by Env.
	CmdEnv []string
	// Identity signs the commits made; the zero Identity signs nothing.
	Identity Identity
	// ReadOnly keeps git from taking a lock it could do without
	// (GIT_OPTIONAL_LOCKS=0): git status then refreshes no index.
	ReadOnly bool
}

// ownPrefix begins the name of the harness's git directory inside the
// workspace's .git.
const ownPrefix = "harness-"

// Repo is the workspace's repository opened for one tool call: a git
// directory of the harness's own, made afresh inside the workspace's
// .git with a random name (so that nothing the run wrote beforehand can
// be in its place, and the run's sandboxed commands, which see only the
// workspace, find it where git does), whose HEAD mirrors the
// workspace's: the same branch at the same commit, or the same detached
// commit. git reads the workspace's objects and index and writes its
// index, never its configuration; a commit moves our HEAD, and Advance
// moves the workspace's. Close removes our directory. A Repo is for one
// goroutine.
type Repo struct {
	root    *os.Root
	dir     string // the workspace, absolute: GIT_WORK_TREE
	own     string // our git directory, relative to root: .git/harness-<hex>
	head    Head
	env     []string
	exclude string
	run     Runner
}

// Open opens the repository of the workspace at dir, whose root is root,
// to run git through run. The caller closes the Repo.
//
// Errors, each a *protocol.Error: CodeNotFound when the workspace has no
// .git at its root (it is not a repository); CodeUnsupported for a
// repository the harness will not use: those of ReadHead, objects
// borrowed from elsewhere (objects/info/alternates), a .git/config that
// is not a plain file or an object format it does not know; CodeInternal
// when our git directory cannot be made; and run's own errors, as
// returned, when git could not be started.
func Open(ctx context.Context, root *os.Root, dir string, run Runner, opts Options) (*Repo, error) {
	if _, err := root.Lstat(".git"); errors.Is(err, fs.ErrNotExist) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "the workspace is not a git repository: it has no .git at its root")
	}
	head, err := ReadHead(root)
	if err != nil {
		return nil, err
	}
	if _, err := root.Lstat(".git/objects/info/alternates"); err == nil {
		return nil, protocol.Errorf(protocol.CodeUnsupported,
			"the workspace's repository borrows objects from another (.git/objects/info/alternates); the harness uses only a repository whose objects are its own")
	}
	r := &Repo{root: root, dir: dir, head: head, run: run, exclude: "/dev/null"}
	if fi, err := root.Lstat(".git/info/exclude"); err == nil && fi.Mode().IsRegular() {
		// A list of patterns, not configuration: it keeps what the person
		// excluded locally out of status and add, as their own git would.
		r.exclude = filepath.Join(dir, ".git", "info", "exclude")
	}
	if err := r.makeOwn(); err != nil {
		return nil, err
	}
	extra := []string{"GIT_DIR=" + r.abs(r.own), "GIT_WORK_TREE=" + dir,
		"GIT_OBJECT_DIRECTORY=" + filepath.Join(dir, ".git", "objects"),
		"GIT_INDEX_FILE=" + filepath.Join(dir, ".git", "index"),
		// Every path is a file name, never a pathspec's glob or magic
		// (":(top)", ":!x"): the tools have judged that name.
		"GIT_LITERAL_PATHSPECS=1"}
	if opts.ReadOnly {
		extra = append(extra, "GIT_OPTIONAL_LOCKS=0")
	}
	r.env = Env(opts.CmdEnv, opts.Identity, extra...)
	format, err := r.objectFormat(ctx)
	if err == nil && format == "sha256" {
		err = r.writeOwn("config", ownConfig(format))
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// makeOwn makes our git directory: HEAD as the workspace's, the branch
// at the workspace's commit, a config of ours (SHA-1 until objectFormat
// says otherwise) and the shallow list, which is data, copied.
func (r *Repo) makeOwn() error {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	own := ".git/" + ownPrefix + hex.EncodeToString(b)
	// Made here, exclusively: a directory that was there already is not
	// ours, and is neither used nor removed.
	if err := r.root.Mkdir(own, 0o700); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "make the harness's git directory in the workspace's .git: %s", err.Error())
	}
	r.own = own
	files := map[string]string{"config": ownConfig("sha1")}
	if r.head.Ref == "HEAD" {
		files["HEAD"] = r.head.Parent + "\n"
	} else {
		files["HEAD"] = "ref: " + r.head.Ref + "\n"
		if r.head.Parent != "" {
			files[r.head.Ref] = r.head.Parent + "\n"
		}
	}
	if fi, err := r.root.Lstat(".git/shallow"); err == nil && fi.Mode().IsRegular() {
		// A shallow clone's boundary: without it git would look for
		// parents that are not there.
		b, err := readAtMost(r.root, ".git/shallow", 4<<20)
		if err != nil {
			r.Close()
			return protocol.Errorf(protocol.CodeUnsupported, "read the workspace's .git/shallow: %s", err.Error())
		}
		files["shallow"] = string(b)
	}
	for _, d := range []string{"objects", "refs/heads", "refs/tags"} {
		if err := r.root.MkdirAll(r.own+"/"+d, 0o700); err != nil {
			r.Close()
			return protocol.Errorf(protocol.CodeInternal, "make the harness's git directory: %s", err.Error())
		}
	}
	for name, body := range files {
		if err := r.writeOwn(name, body); err != nil {
			r.Close()
			return err
		}
	}
	return nil
}

// ownConfig is the whole configuration git reads: no remote, no hook,
// no filter, no include.
func ownConfig(format string) string {
	version, ext := "0", ""
	if format == "sha256" {
		version, ext = "1", "[extensions]\n\tobjectFormat = sha256\n"
	}
	return "[core]\n\trepositoryformatversion = " + version + "\n\tbare = false\n\tlogAllRefUpdates = false\n" +
		"\thooksPath = /dev/null\n\tfsmonitor = false\n" + ext
}

// writeOwn writes a file of our git directory.
func (r *Repo) writeOwn(name, body string) error {
	p := r.own + "/" + name
	if err := r.root.MkdirAll(path.Dir(p), 0o700); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "make the harness's git directory: %s", err.Error())
	}
	if err := r.root.WriteFile(p, []byte(body), 0o600); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "make the harness's git directory: %s", err.Error())
	}
	return nil
}

// objectFormat returns the object format of the workspace's repository,
// "sha1" or "sha256": the one value of .git/config the harness needs,
// read as data with git config --file, which follows no include, and
// only when the file speaks of it at all.
func (r *Repo) objectFormat(ctx context.Context) (string, error) {
	fi, err := r.root.Lstat(".git/config")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "sha1", nil
	case err != nil:
		return "", protocol.Errorf(protocol.CodeUnsupported, "read the workspace's repository: %s", err.Error())
	case !fi.Mode().IsRegular():
		return "", protocol.Errorf(protocol.CodeUnsupported, "the workspace's .git/config is not a plain file; the harness uses only a repository whose files are its own")
	}
	b, err := readAtMost(r.root, ".git/config", 1<<20)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeUnsupported, "read the workspace's .git/config: %s", err.Error())
	}
	if !strings.Contains(strings.ToLower(string(b)), "objectformat") {
		return "sha1", nil
	}
	res, err := r.Run(ctx, "config", "--file", filepath.Join(r.dir, ".git", "config"), "--get", "extensions.objectformat")
	if err != nil {
		return "", err
	}
	switch f := strings.ToLower(strings.TrimSpace(res.Stdout)); {
	case res.Report.Exited && res.Report.ExitCode == 1, f == "sha1":
		return "sha1", nil // not set: git's default
	case !res.Report.Exited || res.Report.ExitCode != 0:
		return "", protocol.Errorf(protocol.CodeUnsupported, "the workspace's .git/config does not parse: %s", bound(strings.TrimSpace(res.Stderr), 300))
	case f == "sha256":
		return f, nil
	default:
		return "", protocol.Errorf(protocol.CodeUnsupported, "the workspace's repository uses object format %q, which the harness does not know", bound(f, 40))
	}
}

// abs is the absolute path of rel, a path under the workspace.
func (r *Repo) abs(rel string) string { return filepath.Join(r.dir, filepath.FromSlash(rel)) }

// Head is the workspace's HEAD as it was when the Repo was opened.
func (r *Repo) Head() Head { return r.head }

// Run runs git with args after the overrides, and returns its result
// whatever its exit status. Errors: the Runner's, when git could not be
// started.
func (r *Repo) Run(ctx context.Context, args ...string) (*sandbox.Result, error) {
	argv := append([]string{"git", "--no-pager", "--literal-pathspecs"}, Overrides()...)
	argv = append(argv, "-c", "core.excludesFile="+r.exclude)
	return r.run(ctx, append(argv, args...), r.env)
}

// Output runs git as Run does and returns its standard output. Errors:
// the Runner's; CodeSandbox when git did not exit 0, with what it said.
func (r *Repo) Output(ctx context.Context, args ...string) (string, error) {
	res, err := r.Run(ctx, args...)
	if err != nil {
		return "", err
	}
	if err := Failed(res, args[0]); err != nil {
		return "", err
	}
	return res.Stdout, nil
}

// Failed returns nil when git exited 0, else a CodeSandbox error saying
// how verb ended and what git said, bounded.
func Failed(res *sandbox.Result, verb string) error {
	switch {
	case res.Report.Exited && res.Report.ExitCode == 0:
		return nil
	case !res.Report.Exited:
		how := res.Report.CapHit
		if how == "" {
			how = res.Report.Signal
		}
		return protocol.Errorf(protocol.CodeSandbox, "git %s did not finish (stopped by %s)", verb, orWord(how, "the sandbox"))
	}
	return protocol.Errorf(protocol.CodeSandbox, "git %s failed (exit %d): %s", verb, res.Report.ExitCode, bound(strings.TrimSpace(res.Stderr+res.Stdout), 500))
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// WriteList writes names, NUL-terminated, to a file of our git directory
// and returns its absolute path, for git's --pathspec-from-file with
// --pathspec-file-nul: a list of any length, each name one pathspec.
func (r *Repo) WriteList(name string, names []string) (string, error) {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(0)
	}
	if err := r.writeOwn(name, b.String()); err != nil {
		return "", err
	}
	return r.abs(r.own + "/" + name), nil
}

// Advance moves the workspace's HEAD (its branch, or HEAD itself when
// detached) to the commit our HEAD is at now, once a commit moved it, and
// returns that commit. It writes the ref through the workspace's root,
// never through git, which would read the workspace's configuration.
// Errors: CodeSandbox when our HEAD holds no commit; CodeUnavailable when
// the workspace's HEAD moved since Open (another git committed
// meanwhile), the new commit then being in the repository on no branch;
// CodeInternal when the ref could not be written.
func (r *Repo) Advance(ctx context.Context) (string, error) {
	out, err := r.Output(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	id := strings.TrimSpace(out)
	if err != nil || !ValidObjectID(id) {
		return "", protocol.Errorf(protocol.CodeSandbox, "the commit made no commit id (git rev-parse answered %q)", bound(id, 100))
	}
	if id == r.head.Parent {
		return id, nil
	}
	now, err := ReadHead(r.root)
	if err != nil {
		return "", err
	}
	if now != r.head {
		return "", protocol.Errorf(protocol.CodeUnavailable, "the workspace's HEAD moved while the commit was made (from %s to %s); the commit %s is in the repository on no branch",
			orWord(r.head.Parent, "no commit"), orWord(now.Parent, "no commit"), id)
	}
	if err := WriteFile(r.root, ".git/"+r.head.Ref, []byte(id+"\n")); err != nil {
		return "", protocol.Errorf(protocol.CodeInternal, "move %s to the commit %s: %s", r.head.Ref, id, err.Error())
	}
	r.head.Parent = id
	return id, nil
}

// Series returns the commits on HEAD made after base ("" for every
// commit), oldest first, merges left out, with those commits as a patch
// series: git format-patch's mails, binary changes included, one after
// another in an mbox that git am applies. Errors: CodeTooLarge for more
// than maxCommits commits or a series over maxBytes; those of Output.
func (r *Repo) Series(ctx context.Context, base string, maxCommits int, maxBytes int64) ([]protocol.CommitInfo, []byte, error) {
	if r.head.Parent == "" || r.head.Parent == base {
		return nil, nil, nil
	}
	rng := []string{"HEAD"}
	if base != "" {
		rng = []string{base + "..HEAD"}
	}
	out, err := r.Output(ctx, append([]string{"log", "--no-merges", "--reverse", "--format=%H%x1f%an <%ae>%x1f%s%x1e"}, rng...)...)
	if err != nil {
		return nil, nil, err
	}
	var commits []protocol.CommitInfo
	for _, rec := range strings.Split(out, "\x1e") {
		f := strings.Split(strings.TrimLeft(rec, "\n"), "\x1f")
		if len(f) != 3 || !ValidObjectID(f[0]) {
			continue
		}
		commits = append(commits, protocol.CommitInfo{ID: f[0], Author: f[1], Subject: f[2]})
	}
	if len(commits) == 0 {
		return nil, nil, nil
	}
	if len(commits) > maxCommits {
		return nil, nil, protocol.Errorf(protocol.CodeTooLarge, "the run made %d commits, over the %d a patch series carries", len(commits), maxCommits)
	}
	dir := r.own + "/series"
	args := []string{"format-patch", "--binary", "--no-signature", "--no-color", "--no-textconv", "--no-ext-diff", "--no-merges", "-o", r.abs(dir)}
	if base == "" {
		args = append(args, "--root")
	}
	if _, err := r.Output(ctx, append(args, rng...)...); err != nil {
		return nil, nil, err
	}
	entries, err := fs.ReadDir(r.root.FS(), dir)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternal, "read the patch series: %s", err.Error())
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".patch") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // 0001-..., 0002-...: the order of the commits
	var mbox []byte
	for _, n := range names {
		b, err := readAtMost(r.root, dir+"/"+n, maxBytes-int64(len(mbox)))
		if err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeTooLarge, "the run's commits as a patch series are over %d bytes", maxBytes)
		}
		mbox = append(mbox, b...)
	}
	return commits, mbox, nil
}

// Close removes our git directory. The workspace's repository keeps what
// git wrote to it: objects, its index, and the ref Advance moved.
func (r *Repo) Close() error {
	if r.own == "" {
		return nil
	}
	err := r.root.RemoveAll(r.own)
	r.own = ""
	return err
}
