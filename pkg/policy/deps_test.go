package policy

import (
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDeps keeps the package a pure core: its non-test files import only
// the standard library packages listed here, package protocol and package
// glob. No I/O, no clocks, no logging.
func TestDeps(t *testing.T) {
	allowed := map[string]bool{
		"fmt":       true,
		"net/netip": true, // parsing only: IP literals of net targets
		"path":      true,
		"slices":    true,
		"strings":   true,
		"github.com/ioharness/harness/internal/glob": true,
		"github.com/ioharness/harness/pkg/protocol":  true,
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
			if !allowed[path] {
				t.Errorf("%s imports %q; package policy may import only %v", name, path, slices.Sorted(maps.Keys(allowed)))
			}
		}
	}
}
