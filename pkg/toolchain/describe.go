package toolchain

import (
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Describe returns what the model is told of t: the kind of project the
// workspace looks like and its conventional commands, as defaults, not
// instructions, for example
//
//	The workspace looks like a Go module (go.mod). Conventional commands,
//	defaults not instructions: build `go build ./...`; test `go test ./...`;
//	lint `go vet ./...`.
//
// Only the commands for which allowed(argv) is true are listed: the caller
// passes the run policy's check of a command, so that a hint never names
// what the run may not do. A nil allowed allows nothing. Describe returns
// "" when t is nil or none of its commands is allowed; a command holding a
// word that cannot be shown as it is (a control character, a backquote) is
// left out.
func Describe(t *protocol.Toolchain, allowed func(argv []string) bool) string {
	if t == nil || allowed == nil {
		return ""
	}
	cmds := []struct {
		label string
		argv  []string
	}{
		{"install", t.Install},
		{"build", t.Build},
		{"test", t.Test},
		{"lint", t.Lint},
		{"format", t.Format},
		{"run", t.Run},
	}
	if t.Ecosystem == "cmake" {
		cmds[0].label = "configure" // see cmake: Install is the step before the first build
	}
	var listed []string
	for _, c := range cmds {
		if len(c.argv) == 0 || slices.ContainsFunc(c.argv, hidden) {
			continue
		}
		if !allowed(slices.Clone(c.argv)) {
			continue
		}
		listed = append(listed, c.label+" `"+quote(c.argv)+"`")
	}
	if len(listed) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("The workspace looks like ")
	b.WriteString(kind(t))
	if t.Marker != "" && plainName(t.Marker) {
		b.WriteString(" (" + t.Marker)
		if (t.Ecosystem == "node" || t.Ecosystem == "python") && plainWord(t.Manager) {
			b.WriteString(", managed with " + t.Manager)
		}
		b.WriteString(")")
	}
	b.WriteString(". Conventional commands, defaults not instructions: ")
	b.WriteString(strings.Join(listed, "; "))
	b.WriteString(".")
	return b.String()
}

// kind names the project t describes, with its article.
func kind(t *protocol.Toolchain) string {
	switch t.Ecosystem {
	case "rust":
		return "a Rust crate"
	case "deno":
		return "a Deno project"
	case "node":
		return "a Node.js package"
	case "go":
		return "a Go module"
	case "python":
		return "a Python project"
	case "java":
		switch t.Manager {
		case "maven":
			return "a Maven project"
		case "gradle":
			return "a Gradle project"
		}
		return "a Java project"
	case "elixir":
		return "an Elixir Mix project"
	case "ruby":
		return "a Ruby project"
	case "php":
		return "a PHP Composer project"
	case "swift":
		return "a Swift package"
	case "cmake":
		return "a CMake project"
	case "dotnet":
		return "a .NET project"
	case "make":
		return "a project built with make"
	}
	if plainWord(t.Ecosystem) {
		return "a " + t.Ecosystem + " project"
	}
	return "a project"
}

// plainWord reports whether s is a short run of letters, digits, '.', '-'
// and '_', fit to be shown in a sentence as it is.
func plainWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_')
	})
}

// hidden reports whether a word cannot be shown in a code span as it is.
func hidden(w string) bool {
	return strings.ContainsFunc(w, func(c rune) bool { return c < 0x20 || c == 0x7f || c == '`' })
}

// quote renders argv as a shell would read it back: words that need it in
// single quotes. It is for the model to read; nothing runs it through a
// shell.
func quote(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		if w != "" && !strings.ContainsFunc(w, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_./:=+,@%-", c))
		}) {
			words[i] = w
			continue
		}
		words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(words, " ")
}
