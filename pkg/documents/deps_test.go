package documents

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modules lists the modules the harness's binaries and root package are
// built from under tags.
func modules(t *testing.T, tags string) []string {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./cmd/...", ".")...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	var mods []string
	for _, m := range strings.Fields(string(out)) {
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.Sort(mods)
	return mods
}

// TestDefaultBuildHasNoDocumentDependencies: the default build is made of
// exactly the modules testdata/default-modules.txt lists, none of the
// document formats' among them, and a build with the documents tag adds
// theirs. A new dependency of the default build is a choice, made by
// changing the list in the same commit.
func TestDefaultBuildHasNoDocumentDependencies(t *testing.T) {
	b, err := os.ReadFile("testdata/default-modules.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(b))
	got := modules(t, "")
	if !slices.Equal(got, want) {
		var added, gone []string
		for _, m := range got {
			if !slices.Contains(want, m) {
				added = append(added, m)
			}
		}
		for _, m := range want {
			if !slices.Contains(got, m) {
				gone = append(gone, m)
			}
		}
		t.Errorf("the default build's modules changed: added %v, gone %v; if that is meant, update testdata/default-modules.txt", added, gone)
	}
	with := modules(t, "documents")
	var extra []string
	for _, m := range with {
		if !slices.Contains(got, m) {
			extra = append(extra, m)
		}
	}
	for _, lib := range documentModules {
		if !slices.Contains(extra, lib) {
			t.Errorf("a build with -tags documents does not use %s; its modules beyond the default build: %v", lib, extra)
		}
	}
}

// documentModules are the libraries the document formats are built on.
var documentModules = []string{
	"github.com/xuri/excelize/v2",
	"codeberg.org/go-pdf/fpdf",
	"github.com/pdfcpu/pdfcpu",
	"github.com/makiuchi-d/gozxing",
}
