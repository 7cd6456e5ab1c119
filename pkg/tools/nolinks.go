package tools

import (
	"errors"
	"io/fs"
	"os"
)

// ErrLinked is the error, wrapped in an *fs.PathError, with which the
// file system of Workspace.NoLinks refuses a name: a symbolic link is on
// its path, or it is a regular file with more than one hard link (it may
// be a link to a file outside the workspace).
var ErrLinked = errors.New("a symbolic link is on the path, or the file has more than one hard link")

// NoLinks returns the workspace as a read-only fs.FS that follows no
// link at all: a name with a symbolic link anywhere on it, or naming a
// file with more than one hard link, fails to open with ErrLinked. What
// it opens is inside the workspace whatever the workspace holds, so code
// reading for the harness rather than for the agent (the catalogue of a
// run's skills) can use the io/fs helpers on it. Directories opened from
// it list their entries without following them (fs.ReadDir).
func (w *Workspace) NoLinks() fs.FS { return noLinks{w} }

type noLinks struct{ w *Workspace }

// Open opens name (an fs.ValidPath) for reading with no link followed.
func (n noLinks) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := n.w.openBeneath(name, os.O_RDONLY, 0, false)
	if errors.Is(err, errChanged) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrLinked}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, fs.ErrNotExist) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if fi.Mode().IsRegular() && linkCount(fi) > 1 {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrLinked}
	}
	return f, nil
}
