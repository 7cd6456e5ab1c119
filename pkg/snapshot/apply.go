package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/ioharness/harness/pkg/protocol"
)

// filePatch is one file's part of a unified diff.
type filePatch struct {
	path             string
	added, deleted   bool
	oldMode, newMode string
	hunks            []hunk
}

type hunk struct {
	oldStart, oldN, newStart, newN int
	lines                          []hline
}

type hline struct {
	kind byte // ' ', '-' or '+'
	text string
}

// Apply applies a unified diff, as Diff writes it (or git diff without
// renames or binary patches), to the directory dir. Every change is
// checked before anything is written: an added file must not exist, a
// modified or deleted one must be a regular file whose lines match the
// diff's (a hunk may have moved, but not changed), and a deleted one must
// be emptied by it. Then the files are written, each through a temporary
// file renamed into place. It returns the paths it changed.
//
// Errors, each a *protocol.Error with field "patch": CodePathEscape for a
// path that is absolute, climbs out of dir, lies under .git, leads
// through a symbolic link (even one that stays inside dir) or changes
// one; CodeMalformed for a diff that does not parse; CodeUnsupported for
// renames, copies and binary patches; CodeInvalidField when a change does
// not apply to what dir holds (a file to add exists already, a link
// included). Nothing is written then.
// An I/O failure while writing can leave part of the changes applied; it
// is returned wrapped.
func Apply(patch []byte, dir string) ([]protocol.FileChange, error) {
	fps, err := parsePatch(string(patch))
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("apply patch: %w", err)
	}
	defer root.Close()
	type result struct {
		fp      *filePatch
		content string
		perm    os.FileMode
		remove  bool
	}
	deleted := map[string]bool{}
	for _, fp := range fps {
		if fp.deleted {
			deleted[fp.path] = true
		}
	}
	var results []result
	var changes []protocol.FileChange
	for i := range fps {
		fp := &fps[i]
		if err := throughLink(root, fp.path); err != nil {
			return nil, err
		}
		var cur []string
		perm := os.FileMode(0o644)
		fi, err := root.Lstat(fp.path)
		switch {
		case fp.added:
			switch {
			case err == nil && fi.IsDir() && emptiedBy(root, fp.path, deleted):
				// A directory whose files the patch deletes becomes a file.
			case err == nil:
				return nil, applyError(protocol.CodeInvalidField, "%s is to be added but exists already", fp.path)
			case errors.Is(err, syscall.ENOTDIR) && deletedPrefix(fp.path, deleted):
				// A file the patch deletes becomes a directory.
			case !errors.Is(err, fs.ErrNotExist):
				return nil, pathError(fp.path, err)
			}
		case err != nil:
			if errors.Is(err, fs.ErrNotExist) {
				return nil, applyError(protocol.CodeInvalidField, "%s is to be changed but does not exist", fp.path)
			}
			return nil, pathError(fp.path, err)
		case !fi.Mode().IsRegular():
			return nil, applyError(protocol.CodePathEscape, "%s is not a regular file (a symbolic link or a directory); the patch changes only regular files", fp.path)
		default:
			data, err := root.ReadFile(fp.path)
			if err != nil {
				return nil, pathError(fp.path, err)
			}
			cur = splitLines(data)
			perm = fi.Mode().Perm()
		}
		next, err := applyHunks(fp, cur)
		if err != nil {
			return nil, err
		}
		if fp.newMode != "" {
			perm = permOf(fp.newMode)
		}
		change := protocol.FileChange{Path: fp.path, Change: protocol.ChangeModified, Kind: protocol.FileText}
		switch {
		case fp.added:
			change.Change = protocol.ChangeAdded
		case fp.deleted:
			if len(next) > 0 {
				return nil, applyError(protocol.CodeInvalidField, "%s is to be deleted but holds lines the patch does not know", fp.path)
			}
			change.Change = protocol.ChangeDeleted
		case len(fp.hunks) == 0:
			change.Change = protocol.ChangeMode
		}
		results = append(results, result{fp: fp, content: strings.Join(next, ""), perm: perm, remove: fp.deleted})
		changes = append(changes, change)
	}
	// Deletions first, each taking its emptied directories with it, so a
	// file may become a directory and a directory a file.
	for _, r := range results {
		if !r.remove {
			continue
		}
		if err := root.Remove(r.fp.path); err != nil {
			return nil, fmt.Errorf("apply patch: %w", err)
		}
		for d := path.Dir(r.fp.path); d != "."; d = path.Dir(d) {
			if root.Remove(d) != nil {
				break // not empty
			}
		}
	}
	for _, r := range results {
		if r.remove {
			continue
		}
		if d := path.Dir(r.fp.path); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return nil, pathError(r.fp.path, err)
			}
		}
		tmp := path.Join(path.Dir(r.fp.path), ".harness-apply-"+strconv.Itoa(os.Getpid())+"-"+path.Base(r.fp.path))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, r.perm)
		if err != nil {
			return nil, pathError(r.fp.path, err)
		}
		_, err = f.WriteString(r.content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = root.Chmod(tmp, r.perm)
		}
		if err == nil {
			err = root.Rename(tmp, r.fp.path)
		}
		if err != nil {
			_ = root.Remove(tmp)
			return nil, fmt.Errorf("apply patch to %s: %w", r.fp.path, err)
		}
	}
	return changes, nil
}

// throughLink refuses a path one of whose directories is a symbolic
// link: os.Root would follow a link that stays inside the directory, and
// the change would land on the file the link leads to, under another name
// than the patch shows.
func throughLink(root *os.Root, p string) error {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		fi, err := root.Lstat(p[:i])
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // created by the patch, as a directory
		case err != nil:
			return pathError(p, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return applyError(protocol.CodePathEscape, "%s leads through the symbolic link %s; the patch changes only files reached without a link", p, p[:i])
		}
	}
	return nil
}

// emptiedBy reports whether every file under the directory dir is among
// deleted.
func emptiedBy(root *os.Root, dir string, deleted map[string]bool) bool {
	all := true
	_ = fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || (!d.IsDir() && !deleted[p]) {
			all = false
			return fs.SkipAll
		}
		return nil
	})
	return all
}

// deletedPrefix reports whether a directory above p is a file among
// deleted.
func deletedPrefix(p string, deleted map[string]bool) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if deleted[d] {
			return true
		}
	}
	return false
}

func applyError(code protocol.Code, format string, args ...any) *protocol.Error {
	hint := "apply the patch to the directory the snapshot was made from, as it was then"
	switch code {
	case protocol.CodePathEscape:
		hint = "the patch may change files inside the directory only"
	case protocol.CodeMalformed, protocol.CodeUnsupported:
		hint = "use the patch harness fetch wrote, unchanged"
	}
	return protocol.FieldError(code, "patch", hint, format, args...)
}

func pathError(name string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
		return applyError(protocol.CodePathEscape, "%s leads outside the directory through a symbolic link", name)
	}
	return fmt.Errorf("apply patch to %s: %w", name, err)
}

func permOf(mode string) os.FileMode {
	if mode == "100755" {
		return 0o755
	}
	return 0o644
}

// applyHunks returns cur with fp's hunks applied. A hunk whose old lines
// are not at the line it names is looked for nearby, nearest first, after
// the previous hunk.
func applyHunks(fp *filePatch, cur []string) ([]string, error) {
	var out []string
	pos, shift := 0, 0 // next unconsumed line of cur; how far hunks moved
	for i, h := range fp.hunks {
		var old, repl []string
		for _, l := range h.lines {
			if l.kind != '+' {
				old = append(old, l.text)
			}
			if l.kind != '-' {
				repl = append(repl, l.text)
			}
		}
		want := h.oldStart - 1 + shift
		if h.oldN == 0 {
			want = h.oldStart + shift
		}
		at := -1
		for d := 0; at < 0 && (want-d >= pos || want+d+len(old) <= len(cur)); d++ {
			for _, c := range []int{want - d, want + d} {
				if c >= pos && c+len(old) <= len(cur) && equalLines(cur[c:c+len(old)], old) {
					at = c
					break
				}
			}
		}
		if at < 0 {
			return nil, applyError(protocol.CodeInvalidField, "hunk %d of %s (at line %d) does not match the file", i+1, fp.path, h.oldStart)
		}
		out = append(out, cur[pos:at]...)
		out = append(out, repl...)
		pos = at + len(old)
		shift += at - want
	}
	return append(out, cur[pos:]...), nil
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parsePatch reads a unified diff into its files. Lines before the first
// file header (comments, a commit message) are skipped.
func parsePatch(s string) ([]filePatch, error) {
	lines := strings.SplitAfter(s, "\n")
	var fps []filePatch
	var cur *filePatch
	seen := map[string]bool{}
	finish := func() error {
		if cur == nil {
			return nil
		}
		if cur.path == "" {
			return applyError(protocol.CodeMalformed, "a file of the patch names no path")
		}
		p, err := checkPatchPath(cur.path)
		if err != nil {
			return err
		}
		if seen[p] {
			return applyError(protocol.CodeMalformed, "the patch changes %s twice", p)
		}
		seen[p] = true
		cur.path = p
		fps = append(fps, *cur)
		cur = nil
		return nil
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\n")
		switch {
		case strings.HasPrefix(line, "diff --git "):
			if err := finish(); err != nil {
				return nil, err
			}
			cur = &filePatch{path: gitHeaderPath(line[len("diff --git "):])}
		case cur == nil:
			if strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "@@ ") {
				return nil, applyError(protocol.CodeMalformed, "line %d: a change without a diff --git header", i+1)
			}
		case strings.HasPrefix(line, "new file mode "):
			cur.added, cur.newMode = true, strings.TrimPrefix(line, "new file mode ")
		case strings.HasPrefix(line, "deleted file mode "):
			cur.deleted = true
		case strings.HasPrefix(line, "old mode "):
			cur.oldMode = strings.TrimPrefix(line, "old mode ")
		case strings.HasPrefix(line, "new mode "):
			cur.newMode = strings.TrimPrefix(line, "new mode ")
		case strings.HasPrefix(line, "index "), strings.HasPrefix(line, "similarity index "), strings.HasPrefix(line, "dissimilarity index "):
		case strings.HasPrefix(line, "rename "), strings.HasPrefix(line, "copy "):
			return nil, applyError(protocol.CodeUnsupported, "line %d: renames and copies are not applied; diff without rename detection", i+1)
		case strings.HasPrefix(line, "Binary files "), line == "GIT binary patch":
			return nil, applyError(protocol.CodeUnsupported, "line %d: binary patches are not applied", i+1)
		case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
			p, ok := diffPath(line[4:])
			if !ok {
				return nil, applyError(protocol.CodeMalformed, "line %d: a file name that does not parse", i+1)
			}
			if p != "" {
				if cur.path != "" && cur.path != p {
					return nil, applyError(protocol.CodeUnsupported, "line %d: %s and %s differ; renames are not applied", i+1, cur.path, p)
				}
				cur.path = p
			}
		case strings.HasPrefix(line, "@@ "):
			h, next, err := parseHunk(lines, i)
			if err != nil {
				return nil, err
			}
			cur.hunks = append(cur.hunks, h)
			i = next - 1
		default:
			// Anything else between files ends the file (a trailer).
			if err := finish(); err != nil {
				return nil, err
			}
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if len(fps) == 0 && strings.Contains(s, "\n@@ ") {
		return nil, applyError(protocol.CodeMalformed, "the patch has hunks but no file headers")
	}
	return fps, nil
}

// gitHeaderPath reads the path of a "diff --git a/X b/X" header when both
// sides name the same path; "" otherwise (the ---/+++ lines then name it).
func gitHeaderPath(rest string) string {
	if strings.HasPrefix(rest, `"`) {
		a, r, ok := unquote(rest)
		if !ok || !strings.HasPrefix(a, "a/") {
			return ""
		}
		b, _, ok := unquote(strings.TrimPrefix(r, " "))
		if !ok || b != "b/"+a[2:] {
			return ""
		}
		return a[2:]
	}
	n := (len(rest) - 5) / 2
	if n <= 0 || len(rest) != 2*n+5 || !strings.HasPrefix(rest, "a/") || rest[2+n:5+n] != " b/" || rest[2:2+n] != rest[5+n:] {
		return ""
	}
	return rest[2 : 2+n]
}

// diffPath reads the name of a ---/+++ line: "" for /dev/null, else the
// path without its a/ or b/ and any tab-separated time stamp.
func diffPath(s string) (string, bool) {
	if s == "/dev/null" || strings.HasPrefix(s, "/dev/null\t") {
		return "", true
	}
	p, _, ok := unquote(s)
	if !ok {
		return "", false
	}
	if !strings.HasPrefix(s, `"`) {
		p, _, _ = strings.Cut(p, "\t")
	}
	if rest, ok := strings.CutPrefix(p, "a/"); ok {
		return rest, true
	}
	if rest, ok := strings.CutPrefix(p, "b/"); ok {
		return rest, true
	}
	return "", false
}

// checkPatchPath refuses a path the patch may not write.
func checkPatchPath(p string) (string, error) {
	c, err := cleanName(p)
	if err != nil || c == "" {
		return "", applyError(protocol.CodePathEscape, "the patch names %q, which is not a path inside the directory", p)
	}
	for _, comp := range strings.Split(c, "/") {
		if strings.EqualFold(comp, ".git") {
			return "", applyError(protocol.CodePathEscape, "the patch changes %s, under .git; a patch may not touch a repository's own files", c)
		}
	}
	return c, nil
}

// parseHunk reads the hunk whose header is lines[i] and returns it with
// the index of the line after it.
func parseHunk(lines []string, i int) (hunk, int, error) {
	var h hunk
	header := strings.TrimSuffix(lines[i], "\n")
	bad := func() (hunk, int, error) {
		return hunk{}, 0, applyError(protocol.CodeMalformed, "line %d: a hunk header that does not parse: %q", i+1, header)
	}
	f := strings.Fields(header)
	if len(f) < 4 || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return bad()
	}
	var ok1, ok2 bool
	h.oldStart, h.oldN, ok1 = rangeOf(f[1][1:])
	h.newStart, h.newN, ok2 = rangeOf(f[2][1:])
	if !ok1 || !ok2 {
		return bad()
	}
	oldLeft, newLeft := h.oldN, h.newN
	j := i + 1
	for ; j < len(lines) && (oldLeft > 0 || newLeft > 0); j++ {
		l := lines[j]
		if l == "" {
			break
		}
		kind, text := l[0], l[1:]
		if l == "\n" {
			kind, text = ' ', "\n" // an empty context line whose space was lost
		}
		switch kind {
		case ' ':
			oldLeft--
			newLeft--
		case '-':
			oldLeft--
		case '+':
			newLeft--
		case '\\':
			noEOL(&h)
			continue
		default:
			return hunk{}, 0, applyError(protocol.CodeMalformed, "line %d: %q is not a line of a hunk", j+1, strings.TrimSuffix(l, "\n"))
		}
		if oldLeft < 0 || newLeft < 0 {
			return hunk{}, 0, applyError(protocol.CodeMalformed, "line %d: the hunk at line %d is longer than its header says", j+1, i+1)
		}
		h.lines = append(h.lines, hline{kind, text})
	}
	if oldLeft > 0 || newLeft > 0 {
		return hunk{}, 0, applyError(protocol.CodeMalformed, "the hunk at line %d is cut short", i+1)
	}
	if j < len(lines) && strings.HasPrefix(lines[j], `\`) {
		noEOL(&h)
		j++
	}
	return h, j, nil
}

// noEOL marks the hunk's last line as having no newline.
func noEOL(h *hunk) {
	if n := len(h.lines); n > 0 {
		h.lines[n-1].text = strings.TrimSuffix(h.lines[n-1].text, "\n")
	}
}

func rangeOf(s string) (start, n int, ok bool) {
	a, b, has := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	n = 1
	if has {
		if n, err = strconv.Atoi(b); err != nil || n < 0 {
			return 0, 0, false
		}
	}
	return start, n, true
}
