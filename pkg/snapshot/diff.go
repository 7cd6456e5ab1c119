package snapshot

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Default limits of Diff.
const (
	DefaultMaxTextBytes  = 8 << 20  // a larger file is listed, not diffed
	DefaultMaxPatchBytes = 64 << 20 // the whole diff
	context              = 3        // lines of context around a change
	sniffLen             = 8000     // bytes looked at for a NUL, as git does
)

// DiffOptions tune Diff. The zero value means the defaults.
type DiffOptions struct {
	// MaxTextBytes is the largest file diffed line by line; a larger one
	// is listed as binary. Default 8 MiB.
	MaxTextBytes int64
	// MaxPatchBytes bounds the diff; default 64 MiB.
	MaxPatchBytes int
}

// Changes is what Diff found: the unified diff, and every changed path.
type Changes struct {
	// Patch is a unified diff in git's form (diff --git headers, /dev/null
	// for added and deleted files, mode lines for the executable bit),
	// which git apply, patch -p1 and Apply take. It begins with comment
	// lines naming the changes it does not carry. Empty when nothing
	// changed.
	Patch []byte
	// Files lists every changed path in order; those whose Kind is not
	// FileText are named in the patch's comments only.
	Files []protocol.FileChange
}

type node struct {
	kind   byte // 'f' regular file, 'l' symbolic link, 's' anything else
	exec   bool
	target string
}

// Diff compares the directory base with the directory work and returns
// what changed from one to the other, as a unified diff of text files
// with the binary files, symbolic links and special files listed. Empty
// directories are not compared, and directories named .git are skipped.
// Errors: CodeTooLarge when the diff exceeds MaxPatchBytes; I/O failures,
// wrapped.
func Diff(base, work string, opts DiffOptions) (*Changes, error) {
	if opts.MaxTextBytes <= 0 {
		opts.MaxTextBytes = DefaultMaxTextBytes
	}
	if opts.MaxPatchBytes <= 0 {
		opts.MaxPatchBytes = DefaultMaxPatchBytes
	}
	a, err := scan(base)
	if err != nil {
		return nil, err
	}
	b, err := scan(work)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(a)+len(b))
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	d := &differ{opts: opts, base: base, work: work}
	for _, n := range names {
		na, inA := a[n]
		nb, inB := b[n]
		var err error
		switch {
		case inA && inB && na.kind == nb.kind:
			err = d.both(n, na, nb)
		default:
			if inA {
				err = d.one(n, na, false)
			}
			if err == nil && inB {
				err = d.one(n, nb, true)
			}
		}
		if err != nil {
			return nil, err
		}
		if d.body.Len() > opts.MaxPatchBytes {
			return nil, protocol.Errorf(protocol.CodeTooLarge, "the run's changes are over %d bytes as a diff", opts.MaxPatchBytes)
		}
	}
	out := &Changes{Files: d.files}
	if len(d.files) > 0 {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "# harness: %d path(s) changed\n", len(d.files))
		for _, f := range d.files {
			if f.Kind != protocol.FileText {
				fmt.Fprintf(&buf, "# %s %s, not in this patch: %s\n", f.Kind, f.Change, quote(f.Path))
			}
		}
		buf.Write(d.body.Bytes())
		out.Patch = buf.Bytes()
	}
	return out, nil
}

// scan lists the files and links under dir by slash-separated path,
// skipping .git directories.
func scan(dir string) (map[string]node, error) {
	m := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("compare workspace: %w", err)
		}
		if de.IsDir() {
			if de.Name() == ".git" && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		t := de.Type()
		switch {
		case t.IsRegular():
			fi, err := de.Info()
			if err != nil {
				return fmt.Errorf("compare workspace: %w", err)
			}
			m[rel] = node{kind: 'f', exec: fi.Mode().Perm()&0o100 != 0}
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("compare workspace: %w", err)
			}
			m[rel] = node{kind: 'l', target: target}
		default:
			m[rel] = node{kind: 's'}
		}
		return nil
	})
	return m, err
}

type differ struct {
	opts       DiffOptions
	base, work string
	body       bytes.Buffer
	files      []protocol.FileChange
}

// read returns a file's content and whether it is text: no NUL in its
// first 8000 bytes, and no larger than MaxTextBytes.
func (d *differ) read(dir, name string) ([]byte, bool, error) {
	p := filepath.Join(dir, filepath.FromSlash(name))
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, false, fmt.Errorf("compare workspace: %w", err)
	}
	if fi.Size() > d.opts.MaxTextBytes {
		return nil, false, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false, fmt.Errorf("compare workspace: %w", err)
	}
	return data, !bytes.Contains(data[:min(len(data), sniffLen)], []byte{0}), nil
}

func kindOf(n node, text bool) string {
	switch {
	case n.kind == 'l':
		return protocol.FileSymlink
	case n.kind == 's':
		return protocol.FileSpecial
	case text:
		return protocol.FileText
	}
	return protocol.FileBinary
}

// one records a path present on one side only: added (in work) or
// deleted (in base).
func (d *differ) one(name string, n node, added bool) error {
	change, dir := protocol.ChangeDeleted, d.base
	if added {
		change, dir = protocol.ChangeAdded, d.work
	}
	if n.kind != 'f' {
		d.files = append(d.files, protocol.FileChange{Path: name, Change: change, Kind: kindOf(n, false)})
		return nil
	}
	data, text, err := d.read(dir, name)
	if err != nil {
		return err
	}
	d.files = append(d.files, protocol.FileChange{Path: name, Change: change, Kind: kindOf(n, text)})
	if !text {
		return nil
	}
	fmt.Fprintf(&d.body, "diff --git %s %s\n", quote("a/"+name), quote("b/"+name))
	mode := modeOf(n.exec)
	if added {
		fmt.Fprintf(&d.body, "new file mode %s\n", mode)
		if len(data) > 0 {
			fmt.Fprintf(&d.body, "--- /dev/null\n+++ %s\n", quote("b/"+name))
			writeHunks(&d.body, nil, splitLines(data))
		}
		return nil
	}
	fmt.Fprintf(&d.body, "deleted file mode %s\n", mode)
	if len(data) > 0 {
		fmt.Fprintf(&d.body, "--- %s\n+++ /dev/null\n", quote("a/"+name))
		writeHunks(&d.body, splitLines(data), nil)
	}
	return nil
}

// both records a path of the same kind on both sides, if it changed.
func (d *differ) both(name string, a, b node) error {
	if a.kind == 'l' {
		if a.target != b.target {
			d.files = append(d.files, protocol.FileChange{Path: name, Change: protocol.ChangeModified, Kind: protocol.FileSymlink})
		}
		return nil
	}
	if a.kind == 's' {
		return nil // not compared: nothing can be said of their content
	}
	da, ta, err := d.read(d.base, name)
	if err != nil {
		return err
	}
	db, tb, err := d.read(d.work, name)
	if err != nil {
		return err
	}
	if da == nil || db == nil {
		// Too large to read as text: compare them as files.
		same, err := sameFile(filepath.Join(d.base, filepath.FromSlash(name)), filepath.Join(d.work, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		if !same {
			d.files = append(d.files, protocol.FileChange{Path: name, Change: protocol.ChangeModified, Kind: protocol.FileBinary})
		}
		return nil
	}
	sameContent := bytes.Equal(da, db)
	if sameContent && a.exec == b.exec {
		return nil
	}
	text := ta && tb
	change := protocol.ChangeModified
	if sameContent {
		change = protocol.ChangeMode
	}
	d.files = append(d.files, protocol.FileChange{Path: name, Change: change, Kind: kindOf(b, text)})
	if !text && !sameContent {
		return nil
	}
	fmt.Fprintf(&d.body, "diff --git %s %s\n", quote("a/"+name), quote("b/"+name))
	if a.exec != b.exec {
		fmt.Fprintf(&d.body, "old mode %s\nnew mode %s\n", modeOf(a.exec), modeOf(b.exec))
	}
	if !sameContent {
		fmt.Fprintf(&d.body, "--- %s\n+++ %s\n", quote("a/"+name), quote("b/"+name))
		writeHunks(&d.body, splitLines(da), splitLines(db))
	}
	return nil
}

func sameFile(p, q string) (bool, error) {
	a, err := os.ReadFile(p)
	if err != nil {
		return false, fmt.Errorf("compare workspace: %w", err)
	}
	b, err := os.ReadFile(q)
	if err != nil {
		return false, fmt.Errorf("compare workspace: %w", err)
	}
	return bytes.Equal(a, b), nil
}

func modeOf(exec bool) string {
	if exec {
		return "100755"
	}
	return "100644"
}

// splitLines splits data into lines, each with its newline but the last
// when data does not end in one.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// writeHunks writes the hunks turning a into b, with three lines of
// context.
func writeHunks(w *bytes.Buffer, a, b []string) {
	ops := diffLines(a, b)
	var spans [][2]int // ranges of ops, each one hunk
	for i, o := range ops {
		if o.kind == ' ' {
			continue
		}
		lo, hi := max(0, i-context), min(len(ops), i+context+1)
		if n := len(spans); n > 0 && lo <= spans[n-1][1] {
			spans[n-1][1] = max(spans[n-1][1], hi)
		} else {
			spans = append(spans, [2]int{lo, hi})
		}
	}
	for _, s := range spans {
		h := ops[s[0]:s[1]]
		oldStart, newStart, oldN, newN := -1, -1, 0, 0
		for _, o := range h {
			if o.kind != '+' {
				if oldStart < 0 {
					oldStart = o.a + 1
				}
				oldN++
			}
			if o.kind != '-' {
				if newStart < 0 {
					newStart = o.b + 1
				}
				newN++
			}
		}
		// An empty side is named by the line before it.
		if oldN == 0 {
			oldStart = h[0].a
		}
		if newN == 0 {
			newStart = h[0].b
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", oldStart, oldN, newStart, newN)
		for _, o := range h {
			line := ""
			switch o.kind {
			case '+':
				line = b[o.b]
			default:
				line = a[o.a]
			}
			w.WriteByte(o.kind)
			w.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
}
