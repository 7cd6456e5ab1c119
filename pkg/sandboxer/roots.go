package sandboxer

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// systemDirs are directories no workspace may be or lie in: the file tools
// run in the sandboxer's own process, so a workspace there would let the
// agent read and write the host's system files (its password hashes, its
// kernel's knobs) with the sandboxer's rights.
var systemDirs = []string{"/proc", "/sys", "/dev", "/etc", "/boot", "/usr", "/bin", "/sbin",
	"/lib", "/lib32", "/lib64", "/libx32", "/run", "/var/run", "/var/lib", "/var/log"}

// RefuseRoot says why dir (absolute, clean, links resolved) cannot be a
// workspace whatever roots a sandboxer serves: it is the file system's
// root, a system directory or inside one, or it is, lies in or contains
// one of reserved (a data directory: its store, its credentials; the
// directory of a program run outside the sandboxes). It
// returns nil for a directory that may be one. The error is a
// *protocol.Error with CodePathEscape, naming the field workspace.root.
func RefuseRoot(dir string, reserved ...string) error {
	if dir == "/" {
		return protocol.FieldError(protocol.CodePathEscape, "workspace.root", "give the directory of the project the agent works on",
			"the workspace root is /, the whole file system: the file tools would reach every file the sandboxer can")
	}
	for _, s := range systemDirs {
		if within(dir, s) {
			return protocol.FieldError(protocol.CodePathEscape, "workspace.root", "give the directory of the project the agent works on",
				"the workspace root %s is a system directory (or inside %s): the file tools would read and write the host's own files", dir, s)
		}
	}
	for _, r := range reserved {
		if r == "" {
			continue
		}
		if within(dir, r) || within(r, dir) {
			return protocol.FieldError(protocol.CodePathEscape, "workspace.root", "give a directory apart from the harness's data directory and its programs",
				"the workspace root %s overlaps %s, the harness's data directory (its trace store and credentials) or the directory of a program it runs outside the sandboxes, which no agent may read or write", dir, r)
		}
	}
	return nil
}

// ProgramDirs are the directories of the programs the backends run outside
// every sandbox (the native backend's init), which no workspace may be, lie
// in or contain: a workspace holding one would let an agent rewrite it.
func ProgramDirs(backends []sandbox.Backend) []string {
	var dirs []string
	for _, b := range backends {
		if pr, ok := b.(sandbox.ProgramRunner); ok {
			for _, p := range pr.Programs() {
				dirs = append(dirs, filepath.Dir(p))
			}
		}
	}
	return dirs
}

// CheckRoots refuses roots of which one lies where no workspace may be:
// in a system directory, or in one of reserved (the harness's data
// directory, the directory of a program its backends run outside the
// sandboxes). Such a root serves no workspace at all, each refused at its
// open, so it is said before a sandboxer starts. A root holding one of
// them is served but for it. Relative paths are taken from the working
// directory, and links are resolved as far as the paths exist.
func CheckRoots(roots, reserved []string) error {
	for _, root := range roots {
		root = resolved(root)
		for _, d := range systemDirs {
			if within(root, d) {
				return fmt.Errorf("sandboxer root %s lies in %s, a system directory, where no workspace may be: serve a root apart from it", root, d)
			}
		}
		for _, r := range reserved {
			if r == "" {
				continue
			}
			if r = resolved(r); within(root, r) {
				return fmt.Errorf("sandboxer root %s lies in %s, the harness's data directory or the directory of a program it runs outside the sandboxes, where no workspace may be: serve a root apart from it", root, r)
			}
		}
	}
	return nil
}

// resolved is dir made absolute and clean, with the links of the longest
// part of it that exists resolved.
func resolved(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	rest := ""
	for p := dir; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if p == filepath.Dir(p) {
			return dir
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// within reports whether dir is base or lies beneath it.
func within(dir, base string) bool {
	base = filepath.Clean(base)
	return dir == base || strings.HasPrefix(dir, strings.TrimSuffix(base, "/")+"/")
}
