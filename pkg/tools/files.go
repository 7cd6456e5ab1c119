package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
)

const (
	// readWholeMax is the largest file read_file reads whole; of a larger
	// one it reads only the end.
	readWholeMax = 8 << 20
	// editMax is the largest file edit_file edits.
	editMax = 16 << 20
)

// ReadFile is the read_file tool: the text of one file, bounded to
// Env.EntryCap keeping the end. A file that does not exist reads as empty,
// with a note, so the agent can go on to create it.
type ReadFile struct{}

var readFileParams = params{
	{name: "path", kind: kindString, required: true, desc: "File to read, relative to the workspace root."},
}

// ReadOnly marks ReadFile as changing nothing.
func (ReadFile) ReadOnly() {}

// InProcess marks ReadFile as working on files in this process alone.
func (ReadFile) InProcess() {}

// Spec describes read_file.
func (ReadFile) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "read_file",
		Description: "Read a UTF-8 text file in the workspace. A file that does not exist yet reads as empty. " +
			"Long files are cut to their last part, with a note saying how much was left out.",
		Parameters: readFileParams.schema(),
	}
}

// Invoke reads the file. Every path its resolution passes through (the
// path as named, and each symbolic link's target) is put to Env.Judge as a
// read first. Errors: bad arguments; Judge's refusal; those of
// Workspace.ResolveLinks and Workspace.ReadFile except not-found;
// CodeBadArguments for a file that is not UTF-8 text.
func (ReadFile) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := readFileParams.decode("read_file", raw)
	if err != nil {
		return nil, err
	}
	w, err := env.workspace("read_file")
	if err != nil {
		return nil, err
	}
	rel, err := w.Resolve(a.str("path"))
	if err != nil {
		return nil, err
	}
	r, err := env.judged(w, ActRead, rel)
	if errors.Is(err, protocol.ErrNotFound) {
		return &Output{Content: fmt.Sprintf("%s does not exist yet; it reads as empty. write_file creates it.", rel)}, nil
	}
	if err != nil {
		return nil, err
	}
	f, fi, err := w.openRegular(rel, r.Final, os.O_RDONLY, 0)
	if errors.Is(err, protocol.ErrNotFound) {
		return &Output{Content: fmt.Sprintf("%s does not exist yet; it reads as empty. write_file creates it.", rel)}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := env.entryCap()
	size := fi.Size()
	if size > readWholeMax {
		return readTail(w, f, rel, size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, readWholeMax+1))
	if err != nil {
		return nil, w.fsError("read", rel, err)
	}
	if !utf8.Valid(b) {
		return nil, notText(rel, int64(len(b)))
	}
	if len(b) == 0 {
		return &Output{Content: fmt.Sprintf("%s exists and is empty (0 bytes).", rel)}, nil
	}
	return &Output{Content: keepTail(string(b), limit)}, nil
}

// readTail reads only the end of a file too large to read whole.
func readTail(w *Workspace, f *os.File, rel string, size int64, limit int) (*Output, error) {
	n := int64(limit) * utf8.UTFMax
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, size-n)
	if err != nil && err != io.EOF {
		return nil, w.fsError("read", rel, err)
	}
	buf = buf[:k]
	for len(buf) > 0 && !utf8.RuneStart(buf[0]) {
		buf = buf[1:]
	}
	if !utf8.Valid(buf) {
		return nil, notText(rel, size)
	}
	note := func(shown int) string {
		return fmt.Sprintf("…[truncated: elided the first %d of %d bytes — re-read or narrow the query if you need the rest]\n", size-int64(shown), size)
	}
	s := string(buf)
	keep := max(limit-utf8.RuneCountInString(note(0)), 0)
	if c := utf8.RuneCountInString(s); c > keep {
		s = s[runeOffset(s, c-keep):]
	}
	return &Output{Content: note(len(s)) + s}, nil
}

// notText is the error for a file read_file will not show.
func notText(rel string, size int64) error {
	return protocol.Errorf(protocol.CodeBadArguments, "%s is not UTF-8 text (%d bytes); read_file shows text only — inspect it with exec (for example file or od) if you need to", rel, size)
}

// WriteFile is the write_file tool: make a file hold exactly the given
// content, creating it and its parent directories as needed.
type WriteFile struct{}

var writeFileParams = params{
	{name: "path", kind: kindString, required: true, desc: "File to write, relative to the workspace root. Missing parent directories are created."},
	{name: "content", kind: kindString, required: true, desc: "The complete new content of the file."},
}

// InProcess marks WriteFile as working on files in this process alone.
func (WriteFile) InProcess() {}

// Spec describes write_file.
func (WriteFile) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name:        "write_file",
		Description: "Create or overwrite a file in the workspace with the given content.",
		Parameters:  writeFileParams.schema(),
	}
}

// Invoke writes the file. Every path its resolution passes through (the
// path as named, and each symbolic link's target, a dangling link's
// included: that is the file a write creates) is put to Env.Judge as a
// write first. Output.Changed is false, and the content says the
// workspace did not change, when the file already held exactly content.
// Errors: bad arguments; Judge's refusal; those of
// Workspace.ResolveLinks; CodePathEscape when the path leads outside
// through a symbolic link or names a file with several hard links;
// CodeBadArguments for a directory or special file.
func (WriteFile) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := writeFileParams.decode("write_file", raw)
	if err != nil {
		return nil, err
	}
	w, err := env.workspace("write_file")
	if err != nil {
		return nil, err
	}
	rel, err := w.Resolve(a.str("path"))
	if err != nil {
		return nil, err
	}
	r, err := env.judged(w, ActWrite, rel)
	if err != nil {
		return nil, err
	}
	content := a.str("content")
	res, err := w.writeFile(rel, r.Final, []byte(content))
	if err != nil {
		return nil, err
	}
	name := named(rel, r)
	switch {
	case res.created:
		return &Output{Content: fmt.Sprintf("created %s (%s)", name, bytesN(len(content))), Changed: true}, nil
	case !res.changed:
		return &Output{Content: fmt.Sprintf("identical: %s already holds these %s; the workspace did not change", name, bytesN(len(content)))}, nil
	default:
		return &Output{Content: fmt.Sprintf("changed %s (%s, was %d)", name, bytesN(len(content)), res.oldSize), Changed: true}, nil
	}
}

// named is how an observation names the file a call reached: the path
// as the call named it, and where it really is when a link led elsewhere.
func named(rel string, r *Resolution) string {
	if r.Final == rel {
		return rel
	}
	return fmt.Sprintf("%s (through the symbolic link %s)", r.Final, rel)
}

// EditFile is the edit_file tool: replace the one occurrence of a text in
// an existing file.
type EditFile struct{}

var editFileParams = params{
	{name: "path", kind: kindString, required: true, desc: "Existing file to edit, relative to the workspace root."},
	{name: "search", kind: kindString, required: true, desc: "Exact text to find; it must occur exactly once in the file. Include enough surrounding lines to make it unique."},
	{name: "replace", kind: kindString, required: true, desc: "Text to put in its place; empty deletes it."},
}

// InProcess marks EditFile as working on files in this process alone.
func (EditFile) InProcess() {}

// Spec describes edit_file.
func (EditFile) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "edit_file",
		Description: "Replace one exact occurrence of a text in an existing file. " +
			"If the text occurs zero or several times nothing changes. It cannot create files; use write_file for that.",
		Parameters: editFileParams.schema(),
	}
}

// Invoke edits the file. Every path its resolution passes through is put
// to Env.Judge as a write first. Errors: bad arguments (including an empty
// search); Judge's refusal; those of Workspace.ResolveLinks; CodeNotFound
// when the file does not exist; CodeBadArguments when search occurs zero
// or several times (the message gives the count; nothing changes) or the
// file is larger than 16 MiB; the write errors of write_file.
func (EditFile) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := editFileParams.decode("edit_file", raw)
	if err != nil {
		return nil, err
	}
	search, replace := a.str("search"), a.str("replace")
	if search == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "search", "", "search is empty; give the exact text to replace, copied from the file")
	}
	w, err := env.workspace("edit_file")
	if err != nil {
		return nil, err
	}
	rel, err := w.Resolve(a.str("path"))
	if err != nil {
		return nil, err
	}
	r, err := env.judged(w, ActWrite, rel)
	if errors.Is(err, protocol.ErrNotFound) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "%s does not exist, and edit_file cannot create files; use write_file to create it", rel)
	}
	if err != nil {
		return nil, err
	}
	f, fi, err := w.openRegular(rel, r.Final, os.O_RDWR, 0)
	if errors.Is(err, protocol.ErrNotFound) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "%s does not exist, and edit_file cannot create files; use write_file to create it", rel)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > editMax {
		return nil, protocol.Errorf(protocol.CodeBadArguments, "%s is %d bytes, over edit_file's limit of %d; change it with exec (for example sed) instead", rel, fi.Size(), editMax)
	}
	b, err := io.ReadAll(io.LimitReader(f, editMax+1))
	if err != nil {
		return nil, w.fsError("read", rel, err)
	}
	old := string(b)
	switch n := strings.Count(old, search); n {
	case 1:
	case 0:
		return nil, protocol.FieldError(protocol.CodeBadArguments, "search", "", "search text was found 0 times in %s; nothing changed. Read the file and copy the text exactly, including whitespace and indentation", rel)
	default:
		return nil, protocol.FieldError(protocol.CodeBadArguments, "search", "", "search text was found %d times in %s; nothing changed. Include more surrounding lines so that it matches exactly once", n, rel)
	}
	updated := strings.Replace(old, search, replace, 1)
	if updated == old {
		return &Output{Content: fmt.Sprintf("identical: the replacement equals the search text; %s did not change", rel)}, nil
	}
	if err := rewrite(f, []byte(updated)); err != nil {
		return nil, w.fsError("write", rel, err)
	}
	return &Output{Content: fmt.Sprintf("edited %s: replaced 1 occurrence (%s, was %d)", named(rel, r), bytesN(len(updated)), len(old)), Changed: true}, nil
}

// bytesN is "1 byte" or "n bytes".
func bytesN(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
