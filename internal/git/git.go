// Package git runs git on a repository the harness does not trust: the
// workspace's, which came with a snapshot or lies in a directory the
// contract names, and which the run's own commands may have written. The
// sandboxer's end-of-run commit (workspace.commit) and the git tools of
// package tools (git_status, git_diff, git_log, git_add, git_commit) both
// run git this way.
//
// A repository's configuration can name a command for git to run in a
// dozen ways: hooks and core.hooksPath, filter.<driver>.clean, .smudge and
// .process (named by a .gitattributes in the worktree), core.fsmonitor,
// core.pager, core.editor, core.sshCommand, diff.external,
// diff.<driver>.textconv, credential.helper, gpg.program, include.path and
// includeIf pulling any of these from another file, and more in every new
// version of git. Overriding them one by one with -c cannot be complete:
// filter.*.clean is a wildcard, and every key we do not know of stays
// live.
//
// So the harness never lets git read the workspace repository's
// configuration at all. Every git it runs has:
//
//   - GIT_DIR pointed at a git directory of the harness's own, made afresh
//     with a configuration the harness wrote (no filters, no hooks, no
//     includes, no remotes); GIT_WORK_TREE the workspace;
//     GIT_OBJECT_DIRECTORY the workspace repository's objects, so what is
//     committed is stored where the person looks for it. The files of
//     work/.git that git would read as configuration (config and its
//     includes, hooks/, info/attributes) are never read as such: only
//     info/exclude, a list of patterns, is passed as core.excludesFile,
//     and the one value needed from work/.git/config, its object format,
//     is read as data (git config --file, which follows no include).
//   - no system or global configuration or attributes
//     (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, GIT_ATTR_NOSYSTEM,
//     HOME and XDG_CONFIG_HOME pointing at nothing), no GIT_* variable of
//     the sandboxer's command environment, no pager, no editor, no
//     terminal prompt, and -c overrides of every command-valued key we
//     know of ([Overrides]): a second wall, should git ever read a
//     configuration we did not write.
//   - submodules ignored: git would otherwise run itself inside each one,
//     where its configuration is the submodule's.
//
// A worktree .gitattributes may still name a filter or a diff driver; with
// no filter.<driver> or diff.<driver> in the only configuration git reads,
// the attribute is inert, as for a driver that is not installed.
//
// Moving the workspace repository's branch to a new commit is done by the
// harness itself, through an os.Root on the workspace (so no link leads it
// out), because git update-ref would read work/.git/config again. No
// reflog entry is written.
//
// git still runs inside the run's sandbox: it parses objects and an index
// the run may have crafted.
package git

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Identity is who a commit is by, as author and committer. The zero
// Identity sets nothing: git then has no identity, and a commit fails.
type Identity struct {
	Name, Email string
}

// IdentityOf parses a contract's git.author ("Name <email>"); a nil spec
// is the zero Identity. Errors: those of protocol.ParseGitAuthor.
func IdentityOf(g *protocol.GitSpec) (Identity, error) {
	if g == nil {
		return Identity{}, nil
	}
	name, email, err := protocol.ParseGitAuthor(g.Author)
	return Identity{Name: name, Email: email}, err
}

// Overrides are the -c arguments of every git the harness runs; see the
// package doc. Values that name a program name one that does nothing
// (false, cat); an empty credential.helper clears the list of helpers.
func Overrides() []string {
	kv := []string{
		"core.hooksPath=/dev/null",
		"core.fsmonitor=false",
		"core.untrackedCache=false",
		"core.splitIndex=false",
		"core.sshCommand=false",
		"core.askPass=false",
		"core.pager=cat",
		"core.editor=false",
		"sequence.editor=false",
		"core.attributesFile=/dev/null",
		"diff.external=",
		"diff.ignoreSubmodules=all",
		"diff.renames=false",
		"status.submoduleSummary=false",
		"submodule.recurse=false",
		"credential.helper=",
		"gpg.program=false",
		"commit.gpgSign=false",
		"log.showSignature=false",
		"color.ui=false",
		"protocol.allow=never",
		"gc.auto=0",
		"maintenance.auto=false",
		// The workspace is owned by the sandboxer's uid, which a user
		// namespace may map to another; ownership says nothing here.
		"safe.directory=*",
	}
	args := make([]string, 0, 2*len(kv))
	for _, s := range kv {
		args = append(args, "-c", s)
	}
	return args
}

// Env returns the environment of the harness's git: cmdEnv (the
// sandboxer's command environment) without any GIT_* variable, HOME or
// XDG_CONFIG_HOME, then the settings of the package doc, id as author and
// committer when it is set, and extra.
func Env(cmdEnv []string, id Identity, extra ...string) []string {
	env := make([]string, 0, len(cmdEnv)+24)
	for _, kv := range cmdEnv {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "HOME" || k == "XDG_CONFIG_HOME" || k == "PAGER" || k == "EDITOR" || k == "VISUAL" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"HOME=/nonexistent", "XDG_CONFIG_HOME=/nonexistent",
		"GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1", "GIT_PROTOCOL_FROM_USER=0",
		"GIT_NO_LAZY_FETCH=1", "GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=false", "GIT_SEQUENCE_EDITOR=false")
	if id != (Identity{}) {
		env = append(env,
			"GIT_AUTHOR_NAME="+id.Name, "GIT_AUTHOR_EMAIL="+id.Email,
			"GIT_COMMITTER_NAME="+id.Name, "GIT_COMMITTER_EMAIL="+id.Email)
	}
	return append(env, extra...)
}

// Head is what a repository's HEAD says: the ref a commit moves
// ("refs/heads/main", or "HEAD" when detached) and the commit it points at
// now ("" on a branch with no commits yet).
type Head struct {
	Ref, Parent string
}

// Branch is the branch HEAD is on ("main"), or "" when it is detached.
func (h Head) Branch() string {
	return strings.TrimPrefix(h.Ref, "refs/heads/")
}

// ReadHead reads .git/HEAD under root and the ref it names, loose or
// packed. Only what git's files backend writes is followed: a symbolic ref
// to a branch, or a detached commit id. Errors: CodeUnsupported, saying
// what the harness found: a .git that is not a directory (a gitdir file,
// a link, or none), objects or refs that are not directories, a HEAD it
// cannot follow.
func ReadHead(root *os.Root) (Head, error) {
	fi, err := root.Lstat(".git")
	if err != nil || !fi.IsDir() {
		return Head{}, protocol.Errorf(protocol.CodeUnsupported,
			"the workspace's .git is not a directory (a gitdir file or a link, or missing); the harness uses only a repository kept inside the workspace")
	}
	for _, d := range []string{".git/objects", ".git/refs"} {
		if fi, err := root.Lstat(d); err != nil || !fi.IsDir() {
			return Head{}, protocol.Errorf(protocol.CodeUnsupported, "the workspace's %s is not a directory; the harness uses only a repository whose files are its own", d)
		}
	}
	b, err := readSmall(root, ".git/HEAD")
	if err != nil {
		return Head{}, protocol.Errorf(protocol.CodeUnsupported, "read the workspace's .git/HEAD: %s", err.Error())
	}
	s := strings.TrimSpace(string(b))
	if ValidObjectID(s) {
		return Head{Ref: "HEAD", Parent: s}, nil
	}
	ref, ok := strings.CutPrefix(s, "ref: ")
	if !ok || !ValidBranch(ref) {
		return Head{}, protocol.Errorf(protocol.CodeUnsupported, "the workspace's .git/HEAD names %q, not a branch the harness can move", bound(s, 100))
	}
	id, err := ResolveRef(root, ref)
	if err != nil {
		return Head{}, err
	}
	return Head{Ref: ref, Parent: id}, nil
}

// ResolveRef returns the commit a branch points at: its loose file, or its
// line in packed-refs, or "" for a branch with no commit yet. Errors:
// CodeUnsupported for a ref that is not a plain file holding a commit id,
// or files that cannot be read.
func ResolveRef(root *os.Root, ref string) (string, error) {
	name := ".git/" + ref
	switch fi, err := root.Lstat(name); {
	case err == nil && fi.Mode().IsRegular():
		b, err := readSmall(root, name)
		if err != nil {
			return "", protocol.Errorf(protocol.CodeUnsupported, "read %s: %s", ref, err.Error())
		}
		if id := strings.TrimSpace(string(b)); ValidObjectID(id) {
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
		if ok && name == ref && ValidObjectID(id) {
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
	return readAtMost(root, name, 4096)
}

// readAtMost reads a file of at most max bytes through root.
func readAtMost(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is over %d bytes", name, max)
	}
	return b, err
}

// WriteFile replaces name under root as git does: written in full to
// name.lock, created exclusively (so a git running at the same time makes
// one of the two fail rather than both write), then renamed into place.
// Errors: the file system's.
func WriteFile(root *os.Root, name string, data []byte) error {
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

// ValidObjectID reports whether s is a full object id: 40 (SHA-1) or 64
// (SHA-256) lower-case hex digits.
func ValidObjectID(s string) bool {
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

// ValidBranch reports whether ref is a branch name git's files backend
// could have written, conservatively (git check-ref-format allows more):
// refs/heads/ and components that are not empty, do not start with '.' or
// end with ".lock", of printable ASCII without space and ~^:?*[\, and no
// ".." or "@{". The name becomes a path under .git, so this also keeps it
// there.
func ValidBranch(ref string) bool {
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

// bound keeps s within n bytes, for a message.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
