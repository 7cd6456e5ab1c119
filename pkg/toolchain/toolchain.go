// Package toolchain recognises what kind of project a workspace is, from
// one marker file in its root, and names the ecosystem's conventional
// commands: how to install its dependencies, build, test, lint, format and
// run it. The model is told them (Describe) as defaults, not instructions;
// nothing here runs them, and neither does the harness.
//
// Detect reads the workspace through the fs.FS it is given and nothing
// else: it lists no directory but the root, reads at most MaxRead bytes of
// any file, and counts only regular files, never a symbolic link. Give it
// an os.Root's FS (as the sandboxer does) so that no read can leave the
// workspace even if the workspace changes while it looks.
package toolchain

import (
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// MaxRead is the most Detect reads of any one file (package.json,
// composer.json, pyproject.toml, a Makefile). A larger file still marks its
// ecosystem; what Detect would have read in it (scripts, targets, tool
// settings) is taken as absent.
const MaxRead = 1 << 20

// maxEntries bounds how many names of the root directory Detect reads when
// it looks for a .NET project file, the one marker known by its suffix
// rather than its name.
const maxEntries = 10000

// Detect returns the toolchain the root of fsys looks like, or nil when no
// marker file is there. Markers are checked in io-harness's order, the
// first found wins: Cargo.toml; deno.json, deno.jsonc; package.json;
// go.mod; pyproject.toml, requirements.txt; pom.xml; build.gradle,
// build.gradle.kts; mix.exs; Gemfile; composer.json; Package.swift;
// CMakeLists.txt; *.csproj, *.fsproj, *.sln; GNUmakefile, makefile,
// Makefile.
//
// Detect never fails: a file it cannot read, or finds too large or
// undecodable, tells it nothing beyond its presence, and a root it cannot
// read at all has no markers.
func Detect(fsys fs.FS) *protocol.Toolchain {
	r := root{fsys}
	for _, detect := range detectors {
		if t := detect(r); t != nil {
			return t
		}
	}
	return nil
}

// detectors are the ecosystems in the order their markers are checked.
// deno comes before node, since a Deno project may have a package.json
// too; make is last, since many projects of the others have a Makefile
// that wraps their own tool.
var detectors = []func(root) *protocol.Toolchain{
	rust, deno, node, golang, python, maven, gradle, elixir, ruby, php, swift, cmake, dotnet, gnuMake,
}

// root is the workspace root as Detect sees it.
type root struct{ fsys fs.FS }

// file reports whether name is a regular file in the root.
//
// A symbolic link counts as absent, whatever it points to: it may lead out
// of the workspace, or to a file the run's policy does not let the model
// read, and Detect, which judges no path, would then describe the
// workspace by something that is not in it, or read that file on the
// model's behalf. Only what is plainly in the root says what the root is.
func (r root) file(name string) bool {
	fi, err := fs.Lstat(r.fsys, name)
	return err == nil && fi.Mode().IsRegular()
}

// dir reports whether name is a directory in the root (not a link to one).
func (r root) dir(name string) bool {
	fi, err := fs.Lstat(r.fsys, name)
	return err == nil && fi.IsDir()
}

// first returns the first of names that is a regular file in the root, or
// "".
func (r root) first(names ...string) string {
	for _, n := range names {
		if r.file(n) {
			return n
		}
	}
	return ""
}

// read returns the contents of the regular file name, and false when it is
// not one, cannot be read, or is over MaxRead bytes.
func (r root) read(name string) ([]byte, bool) {
	if !r.file(name) {
		return nil, false
	}
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	// The file checked above may have been replaced since: read it only if
	// what was opened is a regular file still.
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxRead {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxRead+1))
	if err != nil || len(b) > MaxRead {
		return nil, false
	}
	return b, true
}

// withSuffix returns the names of the regular files in the root ending in
// one of suffixes, sorted, from the first maxEntries names of the root.
// Names that would read as an option, or that hold a control character or
// a backquote, are left out: such a name would be put in a command and in
// the text the model is told.
func (r root) withSuffix(suffixes ...string) []string {
	d, err := r.fsys.Open(".")
	if err != nil {
		return nil
	}
	defer d.Close()
	rd, ok := d.(fs.ReadDirFile)
	if !ok {
		return nil
	}
	var names []string
	for seen := 0; seen < maxEntries; {
		ents, err := rd.ReadDir(min(256, maxEntries-seen))
		for _, e := range ents {
			n := e.Name()
			if e.Type().IsRegular() && plainName(n) && slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(n, s) && len(n) > len(s) }) {
				names = append(names, n)
			}
		}
		seen += len(ents)
		if err != nil || len(ents) == 0 {
			break
		}
	}
	slices.Sort(names)
	return names
}

// plainName reports whether a file name can go into an argv and into the
// model's text as it is.
func plainName(n string) bool {
	if n == "" || n[0] == '-' || len(n) > 255 {
		return false
	}
	return !strings.ContainsFunc(n, func(c rune) bool { return c < 0x20 || c == 0x7f || c == '`' })
}

// argv is a command as its words.
func argv(words ...string) []string { return words }
