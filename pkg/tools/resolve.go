package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/ioharness/harness/pkg/protocol"
)

// MaxLinks is the most symbolic links one resolution follows, as Linux's
// own limit: more is taken for a loop.
const MaxLinks = 40

// Resolution is what a workspace path really names: the paths the kernel
// would pass through to reach it, each relative to the workspace root.
type Resolution struct {
	// Paths are the path as named first, then the path as it stands once
	// each symbolic link met on the way is replaced by its target, and
	// last Final. A path with no link in it has one: itself. Every one of
	// them is what a rule about names may speak of, so each is judged.
	Paths []string
	// Final is the path with every link resolved, as far as the files
	// exist: a directory or file that is missing ends the resolution, and
	// the rest of the path is kept as named (what a write would create).
	// It holds no symbolic link. Empty when the resolution failed before
	// reaching the end.
	Final string
}

// add appends p to the paths passed through, once, unless it does not
// name a place inside the workspace (a lexical form of a path whose ".."
// only the kernel's walk can place).
func (r *Resolution) add(p string) {
	if p == "" {
		p = "."
	}
	if p == ".." || strings.HasPrefix(p, "../") || slices.Contains(r.Paths, p) {
		return
	}
	r.Paths = append(r.Paths, p)
}

// Via returns the paths of the resolution other than the path as named:
// the link targets it went through. Nil for a path without links.
func (r *Resolution) Via() []string {
	if len(r.Paths) < 2 {
		return nil
	}
	return r.Paths[1:]
}

// ResolveLinks checks p with Resolve and then walks it inside the
// workspace one name at a time, as the kernel would: each existing
// component is looked at without following it (Lstat), and a symbolic
// link is replaced by its target (Readlink), relative to the link's
// directory, before the walk goes on; a link in the middle of the path
// (a directory link) and a chain of links are followed the same way. It
// reads no file's bytes.
//
// The Resolution is returned on every error too, holding the paths met
// before the failure (at least the path as named), so a caller judges
// them before it reports the error: an error must not tell what lies
// behind a path the policy hides.
//
// Errors, each a *protocol.Error: those of Resolve; CodePathEscape for a
// link whose target is absolute or climbs above the root; CodeBadArguments
// for more than MaxLinks links (a loop) or a component that is a file with
// more of the path after it; CodeNotFound when a link's target climbs
// with ".." out of a directory that does not exist; the I/O errors of
// fsError.
func (w *Workspace) ResolveLinks(p string) (*Resolution, error) {
	rel, err := w.Resolve(p)
	if err != nil {
		return &Resolution{Paths: []string{p}}, err
	}
	return w.resolve(rel)
}

// resolve walks rel, already checked by Resolve; see ResolveLinks.
func (w *Workspace) resolve(rel string) (*Resolution, error) {
	r := &Resolution{Paths: []string{rel}}
	var done []string // resolved so far: existing directories, no links
	todo := components(rel)
	links := 0
walk:
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// Only a link's target brings ".." here (Resolve cleaned the
			// name), and done holds real directories, so climbing is exact.
			if len(done) == 0 {
				return r, protocol.Errorf(protocol.CodePathEscape, "%s leads outside the workspace through a symbolic link; only files inside the workspace can be used, so name the file by its real path inside the workspace", rel)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := pathOf(done, []string{c})
		fi, err := w.root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Nothing more on disk: the rest is what a write would create.
			if slices.Contains(todo, "..") {
				// The kernel would fail here too: ".." out of nothing.
				r.add(pathOf(done, []string{c}, todo))
				return r, protocol.Errorf(protocol.CodeNotFound, "%s does not exist", rel)
			}
			done = append(done, c)
			for _, rest := range todo {
				if rest != "" && rest != "." {
					done = append(done, rest)
				}
			}
			break walk
		case err != nil:
			r.add(pathOf(done, []string{c}, todo))
			return r, w.fsError("resolve", rel, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			links++
			if links > MaxLinks {
				return r, w.fsError("resolve", rel, syscall.ELOOP)
			}
			target, err := w.root.Readlink(cur)
			switch {
			case err != nil:
				return r, w.fsError("resolve", rel, err)
			case target == "":
				return r, protocol.Errorf(protocol.CodeNotFound, "%s does not exist (the symbolic link %s has an empty target)", rel, cur)
			case strings.HasPrefix(target, "/"):
				return r, protocol.Errorf(protocol.CodePathEscape, "%s leads outside the workspace through a symbolic link with an absolute target (%s is a link to %s); only files inside the workspace can be used, so name the file by its real path inside the workspace", rel, cur, target)
			}
			todo = append(components(target), todo...)
			r.add(pathOf(done, todo))
			continue
		case !fi.IsDir() && hasName(todo):
			r.add(pathOf(done, []string{c}, todo))
			return r, w.fsError("resolve", rel, syscall.ENOTDIR)
		}
		done = append(done, c)
	}
	r.Final = joinPath(done)
	r.add(r.Final)
	return r, nil
}

// components splits a slash-separated path into its names ("." has none).
func components(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// pathOf joins lists of names into a clean workspace path, copying them.
func pathOf(lists ...[]string) string {
	var names []string
	for _, l := range lists {
		names = append(names, l...)
	}
	return path.Clean(joinPath(names))
}

// joinPath joins names into a workspace path, "." for none.
func joinPath(names []string) string {
	if len(names) == 0 {
		return "."
	}
	return strings.Join(names, "/")
}

// hasName reports whether names hold one that is not "" or ".".
func hasName(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return n != "" && n != "." })
}

// Acts a file tool puts to Env.Judge.
const (
	ActRead  = "read"
	ActWrite = "write"
)

// judge puts every path of r to Env.Judge as act, in order, and returns
// the first refusal: strictest wins, and a path is only as allowed as the
// least allowed place it leads through. A refusal of a link's target says
// which link led there. Nil Judge allows everything.
func (e *Env) judge(act string, r *Resolution) error {
	if e == nil || e.Judge == nil {
		return nil
	}
	for i, p := range r.Paths {
		err := e.Judge(act, p)
		if err == nil {
			continue
		}
		if i == 0 {
			return err
		}
		pe := *protocol.AsError(err)
		pe.Message = fmt.Sprintf("%s (%s leads to %s through a symbolic link, and a link is judged by where it leads as well as by its name.)", pe.Message, r.Paths[0], p)
		return &pe
	}
	return nil
}

// judged resolves rel (already checked by Resolve), judges every path of
// its resolution as act, and only then reports a failure of the
// resolution, so that an error never tells what a refused path holds.
func (e *Env) judged(w *Workspace, act, rel string) (*Resolution, error) {
	r, rerr := w.resolve(rel)
	if err := e.judge(act, r); err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	return r, nil
}

// hidden reports whether Judge refuses act on any path of r: grep and
// find leave such an entry out without a word.
func (e *Env) hidden(act string, r *Resolution) bool {
	return e.judge(act, r) != nil
}
