package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ioharness/harness/pkg/protocol"
)

// MaxPathLen is the longest path, in bytes, that Resolve accepts.
const MaxPathLen = 4096

// Workspace is a directory the tools may read and write, and nothing
// outside it. Every path goes through Resolve (a lexical check), then is
// walked one name at a time inside the directory (ResolveLinks), so that
// every symbolic link on it is seen, judged and replaced by its target,
// and is finally opened by its resolved path with no link followed at
// any step. A Workspace is safe for concurrent use.
type Workspace struct {
	dir  string
	root *os.Root
	// dirf is the root directory itself, opened once: the descriptor
	// every open beneath it starts from.
	dirf *os.File
	// escape is the error os.Root wraps when a path leaves the root. The
	// os package does not export it, so OpenWorkspace captures it once.
	escape error
}

// errChanged is returned by openBeneath when a symbolic link appeared on
// a path after it was resolved and judged.
var errChanged = errors.New("a symbolic link appeared on the path after it was checked")

// OpenWorkspace opens dir (made absolute) as a workspace. It fails, with an
// error wrapping the os error, when dir does not exist (errors.Is
// fs.ErrNotExist), is not a directory, or cannot be opened.
func OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", abs, err)
	}
	dirf, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("open workspace %s: %w", abs, err)
	}
	w := &Workspace{dir: abs, root: root, dirf: dirf}
	_, probe := root.Lstat("..")
	var pe *fs.PathError
	if errors.As(probe, &pe) {
		w.escape = pe.Err
	} else {
		w.escape = probe
	}
	return w, nil
}

// Dir returns the workspace's absolute directory, where commands run.
func (w *Workspace) Dir() string { return w.dir }

// Stat describes the directory the workspace holds open. It stays that
// directory when Dir is removed or replaced, so os.SameFile with an
// os.Stat of Dir tells whether Dir still names it. Errors: those of
// fstat, or one wrapping os.ErrClosed after Close.
func (w *Workspace) Stat() (fs.FileInfo, error) { return w.dirf.Stat() }

// Close releases the workspace's directory handles. Using the workspace
// afterwards fails.
func (w *Workspace) Close() error {
	return errors.Join(w.dirf.Close(), w.root.Close())
}

// Resolve checks p lexically and returns it cleaned, slash-separated and
// relative to the workspace root ("." for the root itself). It is the first
// check every tool path goes through; it touches nothing on disk, so a
// path it accepts may still be refused once walked (ResolveLinks: a
// symlink leading out, for one).
//
// Errors, each a *protocol.Error with a message for the model:
// CodeBadArguments for an empty path, a path longer than MaxPathLen bytes,
// or one holding a NUL, newline or carriage-return byte; CodePathEscape for
// an absolute path or one whose ".." climbs above the root ("a/../b" is
// fine, "a/../../b" is not).
func (w *Workspace) Resolve(p string) (string, error) {
	switch {
	case p == "":
		return "", protocol.Errorf(protocol.CodeBadArguments, "the path is empty; name a file relative to the workspace root, such as src/main.go")
	case len(p) > MaxPathLen:
		return "", protocol.Errorf(protocol.CodeBadArguments, "the path is %d bytes long, over the limit of %d; use a shorter path", len(p), MaxPathLen)
	case strings.ContainsAny(p, "\x00\n\r"):
		return "", protocol.Errorf(protocol.CodeBadArguments, "the path %q contains a NUL, newline or carriage-return byte, which the workspace does not allow in names; remove it", p)
	case strings.HasPrefix(p, "/"):
		return "", protocol.Errorf(protocol.CodePathEscape, "the path %q is absolute; only the workspace is reachable, so use a path relative to the workspace root", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", protocol.Errorf(protocol.CodePathEscape, "the path %q climbs out of the workspace with \"..\"; use a path relative to the workspace root that stays inside it", p)
	}
	return c, nil
}

// ReadFile returns the contents of the regular file at p (a workspace
// path, checked by Resolve and walked by ResolveLinks), judging nothing:
// Env.ReadFile is the same read with the policy's hook asked first.
// Errors are *protocol.Error: those of ResolveLinks; CodePathEscape when
// the path leads outside through a symbolic link or the file has more
// than one hard link (it may be a link to a file outside); CodeNotFound
// when it does not exist; CodeBadArguments for a directory, a FIFO, a
// device or a socket; CodeInternal for other I/O failures.
func (w *Workspace) ReadFile(p string) ([]byte, error) {
	return (*Env)(nil).readFile(w, p)
}

// ReadFile returns the contents of the regular file at p as read_file
// finds it: every path of its resolution is put to Judge as a read before
// a byte is read (a verification's file_contains reads this way). Errors:
// CodeUnsupported when e has no workspace; Judge's refusal; those of
// Workspace.ReadFile.
func (e *Env) ReadFile(p string) ([]byte, error) {
	w, err := e.workspace("reading a file")
	if err != nil {
		return nil, err
	}
	return e.readFile(w, p)
}

// WriteFile makes the file at p hold data as write_file does: every path
// of its resolution (a dangling link's target included: that is the file
// a write creates) is put to Judge as a write first, missing parent
// directories are created, and an existing file keeps its inode and mode.
// It reports whether the bytes changed. An embedder's tool that writes a
// file writes it this way. Errors: CodeUnsupported when e has no
// workspace; Judge's refusal; those of write_file.
func (e *Env) WriteFile(p string, data []byte) (changed bool, err error) {
	w, err := e.workspace("writing a file")
	if err != nil {
		return false, err
	}
	rel, err := w.Resolve(p)
	if err != nil {
		return false, err
	}
	r, err := e.judged(w, ActWrite, rel)
	if err != nil {
		return false, err
	}
	res, err := w.writeFile(rel, r.Final, data)
	return res.changed, err
}

// readFile is ReadFile on w, judged by e's Judge (none for a nil e).
func (e *Env) readFile(w *Workspace, p string) ([]byte, error) {
	rel, err := w.Resolve(p)
	if err != nil {
		return nil, err
	}
	r, err := e.judged(w, ActRead, rel)
	if err != nil {
		return nil, err
	}
	f, _, err := w.openRegular(rel, r.Final, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, w.fsError("read", rel, err)
	}
	return b, nil
}

// openRegular opens rel, a resolved path (Resolution.Final), with no link
// followed (openBeneath), and refuses anything but a regular file with a
// single link. name is the path as the call named it, for messages. The
// caller closes the file.
func (w *Workspace) openRegular(name, rel string, flag int, perm os.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := w.openBeneath(rel, flag, perm, false)
	if err != nil {
		return nil, nil, w.fsError("open", name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, w.fsError("stat", name, err)
	}
	if err := checkRegular(name, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// checkRegular refuses a directory, any special file and a regular file
// with more than one hard link.
func checkRegular(rel string, fi fs.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return protocol.Errorf(protocol.CodeBadArguments, "%s is a directory, not a file; use find to see what it holds, or name a file inside it", rel)
	case !m.IsRegular():
		return protocol.Errorf(protocol.CodeBadArguments, "%s is a %s, not a regular file; the file tools only read and write regular files", rel, fileKind(m))
	}
	if n := linkCount(fi); n > 1 {
		return protocol.Errorf(protocol.CodePathEscape, "%s has %d hard links; it may be a hard link to a file outside the workspace, so the file tools will not read or write it; write a new file instead", rel, n)
	}
	return nil
}

// fileKind names a non-regular file type for a message.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "special file"
	}
}

// fsError turns an error from a file operation on rel into a
// *protocol.Error written for the model.
func (w *Workspace) fsError(op, rel string, err error) *protocol.Error {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errors.Is(err, errChanged):
		return protocol.Errorf(protocol.CodePathEscape, "%s changed while it was being opened: a symbolic link appeared on its path after the path was checked; look at it again (find) and name the file by its real path", rel)
	case w.escape != nil && errors.Is(err, w.escape):
		return protocol.Errorf(protocol.CodePathEscape, "%s leads outside the workspace through a symbolic link (or through a link with an absolute target); only files inside the workspace can be used, so name the file by its real path inside the workspace", rel)
	case errors.Is(err, fs.ErrNotExist):
		return protocol.Errorf(protocol.CodeNotFound, "%s does not exist", rel)
	case errno == syscall.ELOOP:
		return protocol.Errorf(protocol.CodeBadArguments, "%s goes through too many symbolic links (a loop?); use the real path", rel)
	case errno == syscall.ENOTDIR:
		return protocol.Errorf(protocol.CodeBadArguments, "a parent of %s is a file, not a directory; check the path with find", rel)
	case errno == syscall.EISDIR:
		return protocol.Errorf(protocol.CodeBadArguments, "%s is a directory, not a file; name a file", rel)
	case errno == syscall.ENAMETOOLONG:
		return protocol.Errorf(protocol.CodeBadArguments, "a name in %s is too long for the file system; use shorter names", rel)
	case errno == syscall.ENXIO:
		return protocol.Errorf(protocol.CodeBadArguments, "%s is a special file (a FIFO or device with nothing behind it), not a regular file; the file tools only read and write regular files", rel)
	case errors.Is(err, fs.ErrPermission):
		return protocol.Errorf(protocol.CodeUnsupported, "the sandboxer is not permitted to %s %s", op, rel)
	case errno == syscall.ENOSPC || errno == syscall.EDQUOT:
		return protocol.Errorf(protocol.CodeUnsupported, "no space left on the sandboxer to %s %s", op, rel)
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path in it is ours; say it once
		}
		return protocol.Errorf(protocol.CodeInternal, "could not %s %s: %v", op, rel, err)
	}
}

// writeResult says what writeFile did.
type writeResult struct {
	created bool  // the file did not exist
	changed bool  // its bytes changed (always true when created)
	oldSize int64 // its size before, when it existed
}

// writeFile makes the file rel (a resolved path, Resolution.Final) hold
// data, creating it (mode 0644 before the umask) and its missing parent
// directories (0755) inside the root, with no link followed at any step
// (openBeneath). name is the path as the call named it, for messages. An
// existing file must be a regular file with one link; it keeps its inode
// and mode. When it already holds data, nothing is written and its mtime
// does not move. Errors are those of openRegular, plus CodeBadArguments
// for the workspace root itself.
func (w *Workspace) writeFile(name, rel string, data []byte) (writeResult, error) {
	if rel == "." {
		return writeResult{}, protocol.Errorf(protocol.CodeBadArguments, "%s names the workspace root, a directory; name a file", name)
	}
	const flag = os.O_RDWR
	f, err := w.openBeneath(rel, flag|os.O_CREATE|os.O_EXCL, 0o644, true)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = w.openBeneath(rel, flag, 0, false)
	}
	if err != nil {
		return writeResult{}, w.fsError("open", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return writeResult{}, w.fsError("stat", name, err)
	}
	if err := checkRegular(name, fi); err != nil {
		return writeResult{}, err
	}
	res := writeResult{created: created, changed: true, oldSize: fi.Size()}
	if !created && fi.Size() == int64(len(data)) {
		old, err := io.ReadAll(io.LimitReader(f, fi.Size()+1))
		if err != nil {
			return writeResult{}, w.fsError("read", name, err)
		}
		if string(old) == string(data) {
			res.changed = false
			return res, nil
		}
	}
	if err := rewrite(f, data); err != nil {
		return writeResult{}, w.fsError("write", name, err)
	}
	return res, nil
}

// rewrite replaces the contents of f with data, in place.
func rewrite(f *os.File, data []byte) error {
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(data)))
}
