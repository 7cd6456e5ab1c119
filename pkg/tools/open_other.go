//go:build !linux

package tools

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// openBeneath opens rel, a workspace path that held no symbolic link when
// it was resolved, through the root, and then checks that it still holds
// none and that the file opened is the one at rel: a link put on the path
// since it was judged makes the open fail with errChanged. Unlike the
// Linux version, which follows no link at any step, this one can be
// raced by a link that appears and goes again between the open and the
// check. With mkdirs, missing directories are created (0755). Errors are
// those of os.Root, or errChanged.
func (w *Workspace) openBeneath(rel string, flag int, perm os.FileMode, mkdirs bool) (*os.File, error) {
	if dir := path.Dir(rel); mkdirs && dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if fi, err := w.root.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, errChanged
	}
	f, err := w.root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	r, err := w.resolve(rel)
	if err == nil && len(r.Paths) == 1 {
		var got, at fs.FileInfo
		if got, err = f.Stat(); err == nil {
			if at, err = w.root.Lstat(rel); err == nil && os.SameFile(got, at) {
				return f, nil
			}
		}
	}
	f.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return nil, errChanged
}
