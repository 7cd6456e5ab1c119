package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ioharness/harness/internal/glob"
	"github.com/ioharness/harness/pkg/protocol"
)

const (
	// grepMaxHits is how many matching lines grep shows.
	grepMaxHits = 50
	// grepMaxFileSize is the largest file grep searches.
	grepMaxFileSize = 1 << 20
	// grepMaxLine is how many characters of a matching line grep shows.
	grepMaxLine = 300
	// findMaxEntries is how many paths find lists.
	findMaxEntries = 200
)

// skipDirs are directories grep and find do not descend into, unless the
// glob names a path inside one.
var skipDirs = []string{".git", "node_modules", "target"}

// walk calls visit for every entry under the workspace root, in lexical
// order, without following symbolic links. It skips the directories in
// skipDirs unless pattern starts with their path and a slash, and
// directories it cannot read. It stops with ctx's error when ctx ends.
func (w *Workspace) walk(ctx context.Context, pattern string, visit func(rel string, d fs.DirEntry) error) error {
	return fs.WalkDir(w.root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if rel == "." {
			return nil
		}
		if d.IsDir() && slices.Contains(skipDirs, d.Name()) && !strings.HasPrefix(pattern, rel+"/") {
			if err := visit(rel, d); err != nil {
				return err
			}
			return fs.SkipDir
		}
		return visit(rel, d)
	})
}

// Grep is the grep tool: lines matching a regular expression, across the
// workspace's text files.
type Grep struct{}

var grepParams = params{
	{name: "pattern", kind: kindString, required: true, desc: "Go regular expression (RE2 syntax) to search for; a plain substring works too, but escape metacharacters such as ( [ . * with a backslash."},
	{name: "path_glob", kind: kindString, desc: "Only search files whose path relative to the workspace, or whose base name, matches this glob ('*' matches any characters including '/', '?' one character), such as *.go or src/*.ts."},
}

// ReadOnly marks Grep as changing nothing.
func (Grep) ReadOnly() {}

// InProcess marks Grep as working on files in this process alone.
func (Grep) InProcess() {}

// Spec describes grep.
func (Grep) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "grep",
		Description: fmt.Sprintf("Search the workspace's text files for lines matching a regular expression. Shows the first %d hits as path:line: text. "+
			"Skips .git, node_modules, target, symbolic links, binary files and files over 1 MiB.", grepMaxHits),
		Parameters: grepParams.schema(),
	}
}

// Invoke searches. No match is not an error. Errors: bad arguments
// (including an empty pattern or one that is not a valid regular
// expression); the end of ctx.
func (Grep) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := grepParams.decode("grep", raw)
	if err != nil {
		return nil, err
	}
	pattern, pglob := a.str("pattern"), a.str("path_glob")
	if pattern == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "pattern", "", "pattern is empty; give a regular expression or a plain substring to search for")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "pattern", "",
			"pattern %q is not a valid Go regular expression (%v); a plain substring works, but escape metacharacters such as ( [ . * + ? with a backslash", pattern, err)
	}
	w, err := env.workspace("grep")
	if err != nil {
		return nil, err
	}
	var (
		out                bytes.Buffer
		hits, files, skips int
	)
	err = w.walk(ctx, pglob, func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil // directories, symbolic links and special files
		}
		if pglob != "" && !glob.MatchPath(pglob, rel) {
			return nil
		}
		// The walk follows no link, so the file is where it was found:
		// its name is the whole of its resolution.
		if env.hidden(ActRead, &Resolution{Paths: []string{rel}, Final: rel}) {
			return nil
		}
		b, ok := grepRead(w, rel)
		if !ok {
			skips++
			return nil
		}
		files++
		for n, line := range bytes.Split(b, []byte{'\n'}) {
			line = bytes.TrimSuffix(line, []byte{'\r'})
			if !re.Match(line) {
				continue
			}
			hits++
			if hits <= grepMaxHits {
				fmt.Fprintf(&out, "%s:%d: %s\n", rel, n+1, truncateLine(string(line), grepMaxLine))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("grep: %w", err)
	}
	if hits > grepMaxHits {
		fmt.Fprintf(&out, "…and %d more matching lines omitted; narrow the pattern or path_glob to see them\n", hits-grepMaxHits)
	}
	if hits == 0 {
		fmt.Fprintf(&out, "no lines match %q in %d searched files\n", pattern, files)
	}
	if skips > 0 {
		fmt.Fprintf(&out, "(%d files not searched: binary, not UTF-8, over 1 MiB, or not readable by the file tools)\n", skips)
	}
	return &Output{Content: keepHead(strings.TrimSuffix(out.String(), "\n"), env.entryCap())}, nil
}

// grepRead returns the contents of a file grep may search: a regular file
// with one link, at most grepMaxFileSize bytes, valid UTF-8 without NUL
// bytes.
func grepRead(w *Workspace, rel string) ([]byte, bool) {
	f, fi, err := w.openRegular(rel, rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi.Size() > grepMaxFileSize {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, grepMaxFileSize+1))
	if err != nil || len(b) > grepMaxFileSize || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return nil, false
	}
	return b, true
}

// Find is the find tool: workspace paths whose name or relative path
// matches a glob.
type Find struct{}

var findParams = params{
	{name: "name_glob", kind: kindString, required: true, aliases: []string{"glob"},
		desc: "Glob matched against each path relative to the workspace and against its base name: '*' matches any characters including '/', '?' one character. Examples: *.go, src/*_test.go, Makefile."},
}

// ReadOnly marks Find as changing nothing.
func (Find) ReadOnly() {}

// InProcess marks Find as working on files in this process alone.
func (Find) InProcess() {}

// Spec describes find.
func (Find) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "find",
		Description: fmt.Sprintf("List workspace paths (sorted, directories ending in /) whose base name or relative path matches a glob; at most %d. "+
			"Does not look inside .git, node_modules or target unless the glob starts with that directory, and does not follow symbolic links.", findMaxEntries),
		Parameters: findParams.schema(),
	}
}

// Invoke lists the matches. No match is not an error. Errors: bad
// arguments (including an empty glob, or name_glob and glob both given);
// the end of ctx.
func (Find) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := findParams.decode("find", raw)
	if err != nil {
		return nil, err
	}
	pattern := a.str("name_glob")
	if pattern == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "name_glob", "", "name_glob is empty; give a glob such as *.go or src/*")
	}
	w, err := env.workspace("find")
	if err != nil {
		return nil, err
	}
	var found []string
	err = w.walk(ctx, pattern, func(rel string, d fs.DirEntry) error {
		if !glob.MatchPath(pattern, rel) {
			return nil
		}
		r := &Resolution{Paths: []string{rel}, Final: rel}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link is listed only if where it leads may be read: its
			// name must not tell that a hidden file exists. One that
			// leads nowhere it may go (outside, a loop) is judged on the
			// paths it passed before.
			r, _ = w.resolve(rel)
		}
		if env.hidden(ActRead, r) {
			return nil
		}
		if d.IsDir() {
			rel += "/"
		}
		found = append(found, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find: %w", err)
	}
	if len(found) == 0 {
		return &Output{Content: fmt.Sprintf("no paths match %q", pattern)}, nil
	}
	slices.Sort(found)
	more := len(found) - findMaxEntries
	found = found[:min(len(found), findMaxEntries)]
	s := strings.Join(found, "\n")
	if more > 0 {
		s += fmt.Sprintf("\n…and %d more paths omitted; narrow the glob to see them", more)
	}
	return &Output{Content: keepHead(s, env.entryCap())}, nil
}
