package assemble

import (
	"path"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Kind of a tool result, from its call.
type Kind string

// Kinds of tool results. Only read, write, grep and find results are
// superseded by a later result of the same kind and target.
const (
	KindRead  Kind = "read"  // read_file: a file's content
	KindWrite Kind = "write" // write_file, edit_file: what a write did
	KindGrep  Kind = "grep"  // grep: matching lines
	KindFind  Kind = "find"  // find: matching paths
	KindExec  Kind = "exec"  // exec: a command's output
	KindImage Kind = "image" // view_image: an image attached to the next request
	KindChild Kind = "child" // spawn_agent: a sub-agent's report
	KindTool  Kind = "tool"  // anything else: remember, mcp__*, a custom tool
)

// supersedable reports whether a later result of the same kind and target
// makes an earlier one redundant.
func (k Kind) supersedable() bool {
	return k == KindRead || k == KindWrite || k == KindGrep || k == KindFind
}

// KindOf names what a call is and what it targets:
//
//	read_file {path}                -> read, the path
//	write_file, edit_file {path}    -> write, the path
//	grep {pattern, path_glob}       -> grep, pattern+"\x00"+path_glob
//	find {name_glob} or {glob}      -> find, the glob
//	exec {argv}                     -> exec, argv joined with spaces
//	view_image {path}               -> image, the path
//	spawn_agent {goal}              -> child, the goal
//	anything else                   -> tool, the tool's name
//
// Paths are cleaned (path.Clean, so "a/../b.go", "./b.go" and "b.go" are
// one target). Arguments are read as the built-in tools read them: one
// JSON object, keys matched exactly, a repeated key's last value kept,
// null meaning absent, empty arguments meaning {}. Arguments that do not
// decode, or that lack the argument naming the target (or give it with
// the wrong type, or under both of find's names), give KindTool with no
// target: such a call failed, and its result says so.
func KindOf(call protocol.ToolCall) (Kind, string) {
	switch call.Name {
	case "read_file":
		return pathKind(call.Arguments, KindRead)
	case "write_file", "edit_file":
		return pathKind(call.Arguments, KindWrite)
	case "view_image":
		return pathKind(call.Arguments, KindImage)
	case "grep":
		var pattern, glob []byte
		if !argMembers(call.Arguments, func(m member) {
			switch {
			case keyIs(m.key, "pattern"):
				pattern = m.val
			case keyIs(m.key, "path_glob"):
				glob = m.val
			}
		}) {
			return KindTool, ""
		}
		p, ok := strArg(pattern)
		g, gok := strArg(glob)
		if !ok || !gok && glob != nil && !isNull(glob) {
			return KindTool, ""
		}
		return KindGrep, p + "\x00" + g
	case "find":
		var name, glob []byte
		if !argMembers(call.Arguments, func(m member) {
			switch {
			case keyIs(m.key, "name_glob"):
				name = m.val
			case keyIs(m.key, "glob"):
				glob = m.val
			}
		}) {
			return KindTool, ""
		}
		if name != nil && !isNull(name) && glob != nil && !isNull(glob) {
			return KindTool, "" // given twice: the tool refuses it
		}
		if name == nil || isNull(name) {
			name = glob
		}
		g, ok := strArg(name)
		if !ok || g == "" {
			return KindTool, ""
		}
		return KindFind, g
	case "exec":
		var argv []byte
		if !argMembers(call.Arguments, func(m member) {
			if keyIs(m.key, "argv") {
				argv = m.val
			}
		}) {
			return KindTool, ""
		}
		var words []string
		if !strArray(argv, &words) || len(words) == 0 {
			return KindTool, ""
		}
		return KindExec, strings.Join(words, " ")
	case "spawn_agent":
		var goal []byte
		if !argMembers(call.Arguments, func(m member) {
			if keyIs(m.key, "goal") {
				goal = m.val
			}
		}) {
			return KindTool, ""
		}
		g, _ := strArg(goal)
		return KindChild, g
	}
	if !argMembers(call.Arguments, func(member) {}) {
		return KindTool, ""
	}
	return KindTool, call.Name
}

// pathKind is the kind of a call whose target is its path argument.
func pathKind(args []byte, k Kind) (Kind, string) {
	var p []byte
	if !argMembers(args, func(m member) {
		if keyIs(m.key, "path") {
			p = m.val
		}
	}) {
		return KindTool, ""
	}
	s, ok := strArg(p)
	if !ok || s == "" {
		return KindTool, ""
	}
	return k, cleanPath(s)
}

// cleanPath makes one name of the many a path may be written as.
func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean(p), "./")
}

// argMembers calls f on each member of the arguments object, treating
// empty and null arguments as {}, and reports whether they decode.
func argMembers(args []byte, f func(m member)) bool {
	if isBlank(args) || isNull(args) {
		return true
	}
	return members(args, func(m member) bool { f(m); return true })
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func isNull(b []byte) bool { return string(b) == "null" }

// strArg decodes a string value; false when absent, null or not a string.
func strArg(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	return unquote(v)
}

// strArray decodes an array of strings into *out.
func strArray(v []byte, out *[]string) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	s := scanner{b: v, i: 1}
	s.ws()
	if s.i < len(v) && v[s.i] == ']' {
		return true
	}
	for {
		s.ws()
		start := s.i
		if !s.str() {
			return false
		}
		w, ok := unquote(v[start:s.i])
		if !ok {
			return false
		}
		*out = append(*out, w)
		s.ws()
		if s.i >= len(v) {
			return false
		}
		switch v[s.i] {
		case ',':
			s.i++
		case ']':
			return true
		default:
			return false
		}
	}
}
