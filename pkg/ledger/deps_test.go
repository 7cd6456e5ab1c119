package ledger

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDeps keeps the package's dependencies down: the standard library,
// package protocol and the Redis client, nothing else (no NATS, no
// provider SDK, no logging).
func TestDeps(t *testing.T) {
	allowed := map[string]bool{
		"github.com/ioharness/harness/pkg/protocol": true,
		"github.com/redis/go-redis/v9":              true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, ".") && !allowed[path] {
				t.Errorf("%s imports %q; package ledger may import only the standard library, protocol and go-redis", name, path)
			}
			if path == "log" {
				t.Errorf("%s imports log; libraries never log through the global logger", name)
			}
		}
	}
}
