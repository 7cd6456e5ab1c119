//go:build pptx || documents

package pptx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSharedCopies keeps this package's copies of the package reader, the
// tool helpers and the test helpers the same as package docx's, from
// which they are copied: no format package may import another, each
// being behind its own build tag.
func TestSharedCopies(t *testing.T) {
	for _, name := range []string{"opc.go", "tool.go", "helpers_test.go"} {
		if mine, theirs := source(t, name), source(t, filepath.Join("..", "docx", name)); mine != theirs {
			t.Errorf("%s differs from ../docx/%s; change both alike", name, name)
		}
	}
}

// source is the Go file name without its build constraint and package
// clause.
func source(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "//go:build ") && !strings.HasPrefix(line, "package ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
