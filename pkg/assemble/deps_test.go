package assemble

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPure checks the package's promise from its imports: the standard
// library and the protocol only, and nothing of the standard library that
// does I/O or reads a clock or randomness. Package doc included.
func TestPure(t *testing.T) {
	forbidden := map[string]bool{"os": true, "os/exec": true, "io/fs": true, "net": true, "net/http": true, "time": true,
		"math/rand": true, "math/rand/v2": true, "crypto/rand": true, "syscall": true, "unsafe": true, "sync": true, "log": true, "log/slog": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package assemble ") {
			doc = true
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			switch {
			case p == "github.com/ioharness/harness/pkg/protocol":
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s: only the standard library and the protocol", name, p)
			case forbidden[p]:
				t.Errorf("%s imports %s, which a pure function has no use for", name, p)
			}
		}
	}
	if !doc {
		t.Errorf("no file has the package's doc comment")
	}
}
