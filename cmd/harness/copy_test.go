package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCopyLeavesOutWhatTheToolsRefuse copies a workspace for run --copy
// that holds a hard link to a file outside, a hard link to a secret inside,
// links leading out and links staying inside: the copy holds no plain
// file made of a hard link (both names of the secret are left out), no
// link leading out, every link that stays inside as a link, and the notes
// say what was left out.
func TestCopyLeavesOutWhatTheToolsRefuse(t *testing.T) {
	base := t.TempDir()
	src, out := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(src, "sub"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, body := range map[string]string{filepath.Join(out, "shadow"): "SENTINEL-OUTSIDE", filepath.Join(src, ".env"): "SENTINEL-ENV", filepath.Join(src, "main.go"): "package main\n"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for from, to := range map[string]string{filepath.Join(out, "shadow"): "hard-out", filepath.Join(src, ".env"): "pub.txt"} {
		if err := os.Link(from, filepath.Join(src, to)); err != nil {
			t.Skipf("cannot make a hard link here: %v", err)
		}
	}
	for name, target := range map[string]string{"notes.txt": ".env", "sub/up": "../main.go", "abs": filepath.Join(out, "shadow"), "climb": "../outside/shadow", "sub/dir": ".."} {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(base, "copy")
	var notes bytes.Buffer
	if err := copyTree(&notes, src, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dst {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		if d.Type()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			rel += " -> " + target
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"main.go", "notes.txt -> .env", "sub", "sub/dir -> ..", "sub/up -> ../main.go"}
	if !slices.Equal(got, want) {
		t.Errorf("the copy holds %q, want %q", got, want)
	}
	for _, name := range []string{"hard-out", "pub.txt", ".env", "abs", "climb"} {
		if !strings.Contains(notes.String(), "--copy left out "+name+":") {
			t.Errorf("the notes %q do not say %s was left out", notes.String(), name)
		}
	}
}
