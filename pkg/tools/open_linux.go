//go:build linux

package tools

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// openBeneath opens rel, a workspace path that held no symbolic link when
// it was resolved, following no link anywhere on it: each directory is
// opened from the one before with O_NOFOLLOW, starting from the
// workspace root's own descriptor, and so is the file. A link put on the
// path since it was judged (by a command still running, say) makes the
// open fail with errChanged instead of leading somewhere else. With
// mkdirs, missing directories are created (0755) on the way. O_NOFOLLOW,
// O_CLOEXEC and O_NONBLOCK are added to flag (a FIFO does not block the
// open). Errors are *fs.PathError, or errChanged.
func (w *Workspace) openBeneath(rel string, flag int, perm os.FileMode, mkdirs bool) (*os.File, error) {
	names := components(rel)
	if len(names) == 0 {
		names = []string{"."}
	}
	dirfd := int(w.dirf.Fd())
	owned := false
	defer func() {
		if owned {
			syscall.Close(dirfd)
		}
	}()
	for i, name := range names[:len(names)-1] {
		fd, err := openat(dirfd, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.ENOENT) && mkdirs {
			if err = syscall.Mkdirat(dirfd, name, 0o755); err == nil || errors.Is(err, syscall.EEXIST) {
				fd, err = openat(dirfd, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			return nil, w.beneathError(strings.Join(names[:i+1], "/"), err)
		}
		if owned {
			syscall.Close(dirfd)
		}
		dirfd, owned = fd, true
	}
	fd, err := openat(dirfd, names[len(names)-1], flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		if flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL && errors.Is(err, syscall.EEXIST) {
			return nil, &fs.PathError{Op: "openat", Path: rel, Err: err} // the caller opens what is there
		}
		return nil, w.beneathError(rel, err)
	}
	return os.NewFile(uintptr(fd), w.dir+"/"+rel), nil
}

// openat is syscall.Openat, tried again when a signal interrupts it.
func openat(dirfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flag, perm)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// beneathError says why openBeneath could not open p: errChanged when p is
// a symbolic link now, else the error as a *fs.PathError.
func (w *Workspace) beneathError(p string, err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		if fi, lerr := w.root.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return errChanged
		}
	}
	return &fs.PathError{Op: "openat", Path: p, Err: err}
}
