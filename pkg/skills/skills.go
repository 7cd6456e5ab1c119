// Package skills reads a run's skills catalogue: a directory of markdown
// files, each opening with front matter that gives the skill's name and a
// one-line description. Only the catalogue (names, descriptions and the
// files' paths) is read here, by the sandboxer when a run's workspace
// opens; a skill's body is for the agent to read, through the policy, with
// the read_skill tool.
//
// The directory holds skills in two forms, as io-harness has them:
// NAME.md, a file directly in the directory, and DIR/SKILL.md, a
// subdirectory with a SKILL.md in it. Other files, and subdirectories
// without a SKILL.md, are no skills and are passed over.
//
// The front matter is a small, strict subset of YAML, read with the
// standard library:
//
//		---
//		name: release-notes
//		description: How to write the release notes for a tagged version.
//		---
//		The body, in markdown, follows.
//
//	  - The file's first line is "---" (after an optional UTF-8 byte order
//	    mark), and a later line "---" closes the front matter, within the
//	    first HeadBytes of the file. Lines may end in "\r\n".
//	  - Between them, each line is "key: value" with the key at the start of
//	    the line (letters, digits, '-' and '_'), a blank line, or a comment
//	    starting with '#'. A value may be wrapped in double quotes (Go/JSON
//	    escapes) or single quotes ('' for a quote); a plain value ends at
//	    " #", where a comment begins.
//	  - name and description are required, once each. name is a token of
//	    letters, digits, '-' and '_', at most MaxNameLen bytes; description
//	    is one line of at most MaxDescription characters. Other keys
//	    (license, metadata, ...) are passed over, and so are the indented
//	    lines that continue them; a name or description continued on an
//	    indented line, or written as a YAML block ("|", ">"), is refused.
//
// Anything else (no front matter, a missing or repeated key, a bad name,
// two skills of one name, a link) is an error naming the file, so that a
// run whose skills are malformed is refused before its first step.
//
// A catalogue is read from a directory of the workspace (Load, for the
// contract's skills.dir) or from a skills snapshot the sandboxer has
// unpacked into protocol.SkillsSnapshotRoot of a directory of its own
// (LoadSnapshot, for skills.snapshot); the rules are the same, and only
// the errors differ, naming the field and the snapshot.
package skills

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
)

// Bounds of a catalogue.
const (
	// HeadBytes is how much of a skill's file is read for its front
	// matter, which must close within it.
	HeadBytes = 16 << 10
	// MaxNameLen is the longest skill name, in bytes.
	MaxNameLen = 64
	// MaxDescription is the longest description, in characters.
	MaxDescription = 1024
	// SkillFile is the file a skill kept in a subdirectory of its own is
	// read from.
	SkillFile = "SKILL.md"
)

// source is where a catalogue is read from, as its errors speak of it.
type source struct {
	field string // the contract field every error names
	what  string // the directory, for a person: "the skills directory docs/skills"
	// gone and goneHint are the error and the hint for a directory that
	// does not exist.
	gone, goneHint string
}

const hint = "open each skill's file with front matter: a line ---, then name: NAME (letters, digits, - and _), " +
	"description: ONE LINE, and a closing line ---; see docs/contract.md#skills"

// Load reads the catalogue of the skills in dir, a clean slash-separated
// path in fsys, sorted by name. fsys should follow no symbolic link (the
// sandboxer gives tools.Workspace.NoLinks); a skill's file that is a link
// is refused here in any case.
//
// Errors are *protocol.Error, CodeInvalidField naming the field
// skills.dir, with a message naming the file: dir is missing, not a
// directory, reached through a link, or holds no skill or more than
// protocol.MaxSkills; a skill's file is a link or not a regular file, or
// cannot be read; its front matter is malformed (see the package
// documentation); two skills have one name.
func Load(fsys fs.FS, dir string) ([]protocol.Skill, error) {
	return load(fsys, dir, source{field: "skills.dir", what: "the skills directory " + dir,
		gone: "the skills directory " + dir + " does not exist in the workspace", goneHint: "name a directory of the workspace, relative to its root"})
}

// LoadSnapshot reads the catalogue of the skills snapshot ref, unpacked
// into the directory protocol.SkillsSnapshotRoot of fsys, so that the
// skills' paths are "skills/NAME.md" and "skills/NAME/SKILL.md". Errors
// are those of Load, naming the field skills.snapshot and, as a skill's
// file, its path under that directory.
func LoadSnapshot(fsys fs.FS, ref string) ([]protocol.Skill, error) {
	return load(fsys, protocol.SkillsSnapshotRoot, source{field: "skills.snapshot", what: "the skills snapshot " + ref,
		gone: "the skills snapshot " + ref + " was not unpacked", goneHint: "upload the skills again with harness submit --skills DIR"})
}

func load(fsys fs.FS, dir string, src source) ([]protocol.Skill, error) {
	field := src.field
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, dirError(src, err)
	}
	var files []string
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case e.IsDir():
			sub, err := fs.ReadDir(fsys, p)
			if err != nil {
				return nil, protocol.FieldError(protocol.CodeInvalidField, field, "make the skills directory readable by the sandboxer, links left out",
					"the skills directory's %s cannot be read: %s", p, why(err))
			}
			for _, s := range sub {
				if s.Name() == SkillFile {
					if err := regular(field, path.Join(p, SkillFile), s); err != nil {
						return nil, err
					}
					files = append(files, path.Join(p, SkillFile))
				}
			}
		case strings.EqualFold(path.Ext(e.Name()), ".md"):
			if err := regular(field, p, e); err != nil {
				return nil, err
			}
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		return nil, protocol.FieldError(protocol.CodeInvalidField, field, "put NAME.md or NAME/SKILL.md files in it, or leave skills out",
			"%s holds no skills", src.what)
	}
	if len(files) > protocol.MaxSkills {
		return nil, protocol.FieldError(protocol.CodeInvalidField, field, fmt.Sprintf("keep at most %d skills in one directory", protocol.MaxSkills),
			"%s holds %d skills", src.what, len(files))
	}
	out := make([]protocol.Skill, 0, len(files))
	byName := map[string]string{}
	for _, p := range files {
		head, err := readHead(fsys, p)
		if err != nil {
			return nil, protocol.FieldError(protocol.CodeInvalidField, field, "make the skill's file a regular file the sandboxer can read",
				"the skill %s cannot be read: %s", p, why(err))
		}
		name, desc, err := Parse(head)
		if err != nil {
			return nil, protocol.FieldError(protocol.CodeInvalidField, field, hint, "the skill %s: %s", p, err.Error())
		}
		if other, dup := byName[name]; dup {
			return nil, protocol.FieldError(protocol.CodeInvalidField, field, "give every skill a name of its own",
				"the skills %s and %s are both named %q", other, p, name)
		}
		byName[name] = p
		out = append(out, protocol.Skill{Name: name, Description: desc, Path: p})
	}
	slices.SortFunc(out, func(a, b protocol.Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// regular refuses a skill's file that is not a regular file.
func regular(field, p string, e fs.DirEntry) error {
	switch t := e.Type(); {
	case t&fs.ModeSymlink != 0:
		return protocol.FieldError(protocol.CodeInvalidField, field, "keep the skill's file itself in the skills directory, not a link to it",
			"the skill %s is a symbolic link", p)
	case !t.IsRegular():
		return protocol.FieldError(protocol.CodeInvalidField, field, "make the skill a regular markdown file",
			"the skill %s is not a regular file", p)
	}
	return nil
}

func readHead(fsys fs.FS, p string) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, HeadBytes))
}

func dirError(src source, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return protocol.FieldError(protocol.CodeInvalidField, src.field, src.goneHint, "%s", src.gone)
	default:
		return protocol.FieldError(protocol.CodeInvalidField, src.field, "name the directory itself, inside the workspace, with no symbolic link on its path",
			"%s cannot be read: %s", src.what, why(err))
	}
}

// why says what an fs error was, without the sandboxer's own paths.
func why(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}

// Parse reads the front matter at the head of a skill's file and returns
// the skill's name and description. Errors say what is wrong, by line,
// without quoting the file (see the package documentation for the
// format).
func Parse(head []byte) (name, description string, err error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	sc := bufio.NewScanner(bytes.NewReader(head))
	sc.Buffer(make([]byte, 0, 4096), HeadBytes)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return strings.TrimSuffix(sc.Text(), "\r"), true
	}
	if first, ok := next(); !ok || first != "---" {
		return "", "", errors.New(`it has no front matter: its first line must be "---"`)
	}
	seen := map[string]bool{}
	last := "" // the key the lines now continue
	for {
		l, ok := next()
		if !ok {
			return "", "", fmt.Errorf(`its front matter is not closed by a line "---" within its first %d bytes`, HeadBytes)
		}
		switch {
		case l == "---":
			switch {
			case !seen["name"]:
				return "", "", errors.New(`its front matter has no "name:" line`)
			case !seen["description"]:
				return "", "", errors.New(`its front matter has no "description:" line`)
			}
			return name, description, nil
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
			continue
		case l[0] == ' ' || l[0] == '\t':
			// An indented line continues the key before it.
			if last == "name" || last == "description" {
				return "", "", fmt.Errorf("line %d of its front matter continues %q; write the %s on one line", line, last, last)
			}
			if last == "" {
				return "", "", fmt.Errorf("line %d of its front matter is indented but follows no key", line)
			}
			continue
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok || !validKey(key) {
			return "", "", fmt.Errorf(`line %d of its front matter is not "key: value"`, line)
		}
		last = key
		if key != "name" && key != "description" {
			continue // another tool's key: not ours to read
		}
		if seen[key] {
			return "", "", fmt.Errorf("line %d of its front matter gives %q a second time", line, key)
		}
		seen[key] = true
		v, err := scalar(strings.TrimSpace(val))
		if err != nil {
			return "", "", fmt.Errorf("line %d of its front matter: the %s %s", line, key, err.Error())
		}
		if key == "name" {
			if name, err = checkName(v); err != nil {
				return "", "", fmt.Errorf("line %d of its front matter: %s", line, err.Error())
			}
		} else {
			if description, err = checkDescription(v); err != nil {
				return "", "", fmt.Errorf("line %d of its front matter: %s", line, err.Error())
			}
		}
	}
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// scalar reads a one-line YAML value: plain, double-quoted or
// single-quoted. A block scalar ("|", ">") is refused.
func scalar(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case v[0] == '|' || v[0] == '>':
		return "", errors.New("is a YAML block; write it on the same line, after the colon")
	case v[0] == '"':
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", errors.New("opens a double quote it does not close properly")
		}
		return s, nil
	case v[0] == '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", errors.New("opens a single quote it does not close")
		}
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'"), nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i]) // a comment after a plain value
	}
	return v, nil
}

func checkName(v string) (string, error) {
	switch {
	case v == "":
		return "", errors.New("the name is empty")
	case len(v) > MaxNameLen:
		return "", fmt.Errorf("the name is %d bytes long, over %d", len(v), MaxNameLen)
	case !protocol.ValidToken(v):
		return "", errors.New("the name is not a simple token: use letters, digits, '-' and '_' only")
	}
	return v, nil
}

func checkDescription(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", errors.New("the description is empty; say in one line what the skill is for")
	case !utf8.ValidString(v):
		return "", errors.New("the description is not UTF-8 text")
	case utf8.RuneCountInString(v) > MaxDescription:
		return "", fmt.Errorf("the description is %d characters long, over %d", utf8.RuneCountInString(v), MaxDescription)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "", errors.New("the description holds a control character; write it as one line of text")
	}
	return v, nil
}
