package snapshot

import (
	"path"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// field is the contract field snapshot errors are about.
const field = "workspace.snapshot"

func refuse(code protocol.Code, hint, format string, args ...any) *protocol.Error {
	return protocol.FieldError(code, field, hint, format, args...)
}

// cleanName checks an entry's path and returns it clean and
// slash-separated, relative to the snapshot's root ("" for the root
// itself). Errors: CodePathEscape for an absolute path or one that climbs
// out; CodeMalformed for an empty or over-long name, or one holding a NUL,
// newline or carriage return (which no patch could name).
func cleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", refuse(protocol.CodeMalformed, "rebuild the archive with harness submit --workspace", "an entry has no name")
	case len(name) > MaxPathLen:
		return "", refuse(protocol.CodeMalformed, "shorten the path", "an entry's path is %d bytes, over the limit of %d", len(name), MaxPathLen)
	case strings.ContainsAny(name, "\x00\n\r"):
		return "", refuse(protocol.CodeMalformed, "rename the file", "the entry %q has a NUL, newline or carriage return in its name", name)
	case strings.HasPrefix(name, "/"):
		return "", refuse(protocol.CodePathEscape, "archive paths relative to the workspace", "the entry %q is an absolute path", name)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", refuse(protocol.CodePathEscape, "archive only what is inside the workspace", "the entry %q climbs out of the workspace", name)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

// underLink returns the first proper prefix of name that is a symbolic
// link of links, or "".
func underLink(name string, links map[string]string) string {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			if _, ok := links[name[:i]]; ok {
				return name[:i]
			}
		}
	}
	return ""
}

// checkLink checks that the symbolic link at name (a clean entry path)
// with the given target stays inside the snapshot: the target is relative,
// and, walked component by component from the link's directory, never
// climbs above the root and never passes through another link of links
// (whose own target could lead anywhere). It may end on another link,
// which is checked in its turn.
func checkLink(name, target string, links map[string]string) error {
	const hint = "make the link relative and pointing inside the workspace, or leave it out"
	switch {
	case target == "":
		return refuse(protocol.CodeMalformed, hint, "the symbolic link %s has an empty target", name)
	case strings.ContainsAny(target, "\x00\n\r"):
		return refuse(protocol.CodeMalformed, hint, "the symbolic link %s has a NUL, newline or carriage return in its target", name)
	case strings.HasPrefix(target, "/"):
		return refuse(protocol.CodePathEscape, hint, "the symbolic link %s points to the absolute path %s, outside the workspace", name, target)
	case len(target) > MaxPathLen:
		return refuse(protocol.CodeMalformed, hint, "the symbolic link %s has a target of %d bytes", name, len(target))
	}
	var at []string
	if dir := path.Dir(name); dir != "." {
		at = strings.Split(dir, "/")
	}
	comps := strings.Split(target, "/")
	for i, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return refuse(protocol.CodePathEscape, hint, "the symbolic link %s points to %s, outside the workspace", name, target)
			}
			at = at[:len(at)-1]
			continue
		}
		at = append(at, c)
		if _, ok := links[strings.Join(at, "/")]; ok && i < len(comps)-1 {
			return refuse(protocol.CodePathEscape, hint, "the symbolic link %s points through the symbolic link %s", name, strings.Join(at, "/"))
		}
	}
	return nil
}
