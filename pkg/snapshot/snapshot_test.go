package snapshot_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/snapshot"
)

// tree writes files (path → content; a content starting "-> " makes a
// symbolic link, "x:" an executable) under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(body, "-> "):
			err = os.Symlink(strings.TrimPrefix(body, "-> "), p)
		case strings.HasPrefix(body, "x:"):
			err = os.WriteFile(p, []byte(body[2:]), 0o755)
		case body == "/dir":
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// read returns what tree would have been given to make dir.
func read(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "-> " + target
		case fi.IsDir():
			if entries, _ := os.ReadDir(p); len(entries) == 0 {
				out[rel] = "/dir"
			}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if fi.Mode().Perm()&0o100 != 0 {
				out[rel] = "x:" + string(data)
			} else {
				out[rel] = string(data)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pack(t *testing.T, dir string, opts snapshot.PackOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := snapshot.Pack(&buf, dir, opts); err != nil {
		t.Fatalf("Pack(%s) = %v", dir, err)
	}
	return buf.Bytes()
}

func TestPackUnpackRoundTrip(t *testing.T) {
	files := map[string]string{
		"go.mod":            "module x\n",
		"src/main.go":       "package main\n",
		"src/deep/a/b.txt":  "b",
		"bin/run.sh":        "x:#!/bin/sh\necho hi\n",
		"empty":             "",
		"emptydir":          "/dir",
		"link":              "-> src/main.go",
		"src/up":            "-> ../go.mod",
		"src/deep/a/toroot": "-> ../../..",
		"naïve name.txt":    "unicode and a space",
		"node_modules/x.js": "left out",
	}
	src := tree(t, files)
	data := pack(t, src, snapshot.PackOptions{Exclude: []string{"node_modules"}})
	if again := pack(t, src, snapshot.PackOptions{Exclude: []string{"node_modules"}}); !bytes.Equal(data, again) {
		t.Error("packing the same directory twice gave different bytes; the ref would change")
	}
	dst := filepath.Join(t.TempDir(), "ws")
	info, err := snapshot.Unpack(bytes.NewReader(data), dst, snapshot.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	delete(files, "node_modules/x.js")
	if diff := cmp.Diff(files, read(t, dst)); diff != "" {
		t.Errorf("unpacked tree differs (-packed +unpacked):\n%s", diff)
	}
	if info.Files == 0 || info.Bytes == 0 {
		t.Errorf("Unpack info = %+v", info)
	}
}

func TestPackRefuses(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		opts  snapshot.PackOptions
		want  *protocol.Error
	}{
		{"too many files", map[string]string{"a": "1", "b": "2", "c": "3"}, snapshot.PackOptions{Limits: snapshot.Limits{MaxFiles: 2}}, protocol.ErrTooLarge},
		{"too many bytes", map[string]string{"a": strings.Repeat("x", 100)}, snapshot.PackOptions{Limits: snapshot.Limits{MaxBytes: 99}}, protocol.ErrTooLarge},
		{"archive too large", map[string]string{"a": randomText(200000)}, snapshot.PackOptions{Limits: snapshot.Limits{MaxArchiveBytes: 1000}}, protocol.ErrTooLarge},
		{"newline in a name", map[string]string{"a\nb": "x"}, snapshot.PackOptions{}, protocol.ErrMalformed},
		{"bad exclude", map[string]string{"a": "x"}, snapshot.PackOptions{Exclude: []string{"["}}, protocol.ErrInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := snapshot.Pack(&bytes.Buffer{}, tree(t, tt.files), tt.opts)
			if !errors.Is(err, tt.want) {
				t.Errorf("Pack = %v, want %s", err, tt.want.Code)
			}
		})
	}
	t.Run("fifo", func(t *testing.T) {
		dir := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		_, err := snapshot.Pack(&bytes.Buffer{}, dir, snapshot.PackOptions{})
		if !errors.Is(err, protocol.ErrUnsupported) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("Pack(dir with a FIFO) = %v, want unsupported naming the FIFO", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := snapshot.Pack(&bytes.Buffer{}, filepath.Join(t.TempDir(), "nope"), snapshot.PackOptions{})
		if !errors.Is(err, protocol.ErrNotFound) {
			t.Errorf("Pack(missing) = %v, want not_found", err)
		}
	})
}

// TestPackLeavesOut packs a directory holding links whose targets leave
// it and files with several hard links: Pack carries the rest, lists what
// it left out with the reason, and the snapshot materialises without them.
func TestPackLeavesOut(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("SENTINEL-OUTSIDE"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := tree(t, map[string]string{
		"keep.txt":   "kept",
		"abs":        "-> /etc/passwd",
		"a/climb":    "-> ../../x",
		"out":        "-> " + outside,
		"d":          "-> .",
		"e":          "-> d/../..",
		"inside":     "-> keep.txt",
		".env":       "SENTINEL-ENV",
		"dangle":     "-> nowhere/.env",
		"sub/toroot": "-> ..",
	})
	for from, to := range map[string]string{filepath.Join(outside, "secret"): "hard-out", filepath.Join(src, ".env"): "pub.txt"} {
		if err := os.Link(from, filepath.Join(src, to)); err != nil {
			t.Skipf("cannot make a hard link here: %v", err)
		}
	}
	var buf bytes.Buffer
	info, err := snapshot.Pack(&buf, src, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range info.LeftOut {
		if l.Reason == "" {
			t.Errorf("%s was left out with no reason", l.Path)
		}
		left = append(left, l.Path)
	}
	if diff := cmp.Diff([]string{".env", "a/climb", "abs", "e", "hard-out", "out", "pub.txt"}, left); diff != "" {
		t.Errorf("Pack left out (-want +got):\n%s", diff)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	if _, err := snapshot.Unpack(&buf, dst, snapshot.Limits{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"keep.txt": "kept", "a": "/dir", "d": "-> .", "inside": "-> keep.txt", "dangle": "-> nowhere/.env", "sub/toroot": "-> .."}
	if diff := cmp.Diff(want, read(t, dst)); diff != "" {
		t.Errorf("unpacked tree differs (-want +got):\n%s", diff)
	}
}

// randomText is incompressible printable text.
func randomText(n int) string {
	var b strings.Builder
	x := uint32(2463534242)
	for range n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(byte('!' + x%90))
	}
	return b.String()
}

// hdr is one entry of a hand-made archive.
type hdr struct {
	name, link string
	typ        byte
	body       string
	size       int64 // when not len(body)
	mode       int64
}

func archive(t testing.TB, entries ...hdr) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: e.typ, PAXRecords: map[string]string{"comment": "made by a test"}}
		}
		if e.mode != 0 {
			h.Mode = e.mode
		}
		if e.typ == tar.TypeDir || e.typ == tar.TypeSymlink || e.typ == tar.TypeLink || e.typ == tar.TypeChar || e.typ == tar.TypeFifo {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUnpackHostile feeds Unpack archives made to escape or exhaust the
// sandboxer. Each must be refused with its code, and nothing may appear
// outside the directory.
func TestUnpackHostile(t *testing.T) {
	reg, dir, sym := byte(tar.TypeReg), byte(tar.TypeDir), byte(tar.TypeSymlink)
	tests := []struct {
		name    string
		entries []hdr
		lim     snapshot.Limits
		want    *protocol.Error
	}{
		{"dot-dot", []hdr{{name: "../evil", typ: reg, body: "x"}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"dot-dot inside", []hdr{{name: "a/../../evil", typ: reg, body: "x"}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"absolute", []hdr{{name: "/tmp/evil", typ: reg, body: "x"}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"absolute dir", []hdr{{name: "/etc/", typ: dir}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"absolute link", []hdr{{name: "l", typ: sym, link: "/etc"}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"link climbing out", []hdr{{name: "l", typ: sym, link: "../.."}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"write through a link", []hdr{{name: "l", typ: sym, link: "."}, {name: "l/x", typ: reg, body: "x"}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"write through a later link", []hdr{{name: "l/x", typ: reg, body: "x"}, {name: "l", typ: sym, link: "."}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"link through a link", []hdr{{name: "d", typ: sym, link: "."}, {name: "e", typ: sym, link: "d/d/d/../../.."}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"link through a later link", []hdr{{name: "e", typ: sym, link: "d/../.."}, {name: "d", typ: sym, link: "a/b"}}, snapshot.Limits{}, protocol.ErrPathEscape},
		{"hard link", []hdr{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}, snapshot.Limits{}, protocol.ErrUnsupported},
		{"char device", []hdr{{name: "null", typ: tar.TypeChar}}, snapshot.Limits{}, protocol.ErrUnsupported},
		{"fifo", []hdr{{name: "p", typ: tar.TypeFifo}}, snapshot.Limits{}, protocol.ErrUnsupported},
		{"duplicate", []hdr{{name: "a", typ: reg, body: "1"}, {name: "a", typ: reg, body: "2"}}, snapshot.Limits{}, protocol.ErrMalformed},
		{"duplicate spelled differently", []hdr{{name: "a/b", typ: reg, body: "1"}, {name: "a//b", typ: reg, body: "2"}}, snapshot.Limits{}, protocol.ErrMalformed},
		{"newline", []hdr{{name: "a\nb", typ: reg, body: "1"}}, snapshot.Limits{}, protocol.ErrMalformed},
		{"too many bytes", []hdr{{name: "a", typ: reg, body: strings.Repeat("x", 1000)}}, snapshot.Limits{MaxBytes: 999}, protocol.ErrTooLarge},
		{"too many files", []hdr{{name: "a", typ: reg}, {name: "b", typ: reg}, {name: "c", typ: dir}}, snapshot.Limits{MaxFiles: 2}, protocol.ErrTooLarge},
		// A bomb: a megabyte of zeros compresses to about a kilobyte.
		{"bomb", []hdr{{name: "z", typ: reg, body: strings.Repeat("\x00", 1<<20)}}, snapshot.Limits{MaxBytes: 64 << 10}, protocol.ErrTooLarge},
		{"archive too large", []hdr{{name: "a", typ: reg, body: randomText(10000)}}, snapshot.Limits{MaxArchiveBytes: 2000}, protocol.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "ws")
			_, err := snapshot.Unpack(bytes.NewReader(archive(t, tt.entries...)), dst, tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Unpack = %v, want %s", err, tt.want.Code)
			}
			var pe *protocol.Error
			if errors.As(err, &pe); pe.Field != "workspace.snapshot" || pe.Message == "" {
				t.Errorf("error %v: want field workspace.snapshot and a message", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 1 {
				t.Errorf("something was written beside the workspace: %v", entries)
			}
		})
	}
	t.Run("not gzip", func(t *testing.T) {
		_, err := snapshot.Unpack(strings.NewReader("plain text"), filepath.Join(t.TempDir(), "ws"), snapshot.Limits{})
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("Unpack(text) = %v, want malformed", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		data := archive(t, hdr{name: "a", typ: reg, body: randomText(5000)})
		_, err := snapshot.Unpack(bytes.NewReader(data[:len(data)/2]), filepath.Join(t.TempDir(), "ws"), snapshot.Limits{})
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("Unpack(truncated) = %v, want malformed", err)
		}
	})
	t.Run("existing dir", func(t *testing.T) {
		_, err := snapshot.Unpack(bytes.NewReader(archive(t)), t.TempDir(), snapshot.Limits{})
		if err == nil {
			t.Error("Unpack into an existing directory succeeded; it must only create")
		}
	})
}

func TestUnpackAcceptsOrdinaryArchives(t *testing.T) {
	data := archive(t,
		hdr{name: "./", typ: tar.TypeDir},
		hdr{name: "./a/", typ: tar.TypeDir},
		hdr{name: "./a/run", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755}, // set-uid dropped
		hdr{name: "./a/link", typ: tar.TypeSymlink, link: "run"},
		hdr{typ: tar.TypeXGlobalHeader},
	)
	dst := filepath.Join(t.TempDir(), "ws")
	if _, err := snapshot.Unpack(bytes.NewReader(data), dst, snapshot.Limits{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dst, "a", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode = %v, want 0755 without set-id bits", fi.Mode())
	}
}

func TestDiffApplyRoundTrip(t *testing.T) {
	long := func(change int) string {
		var b strings.Builder
		for i := range 60 {
			if i == change || i == change+30 {
				b.WriteString("changed line\n")
				continue
			}
			b.WriteString("line " + strings.Repeat("x", i%7) + "\n")
		}
		return b.String()
	}
	base := map[string]string{
		"keep.txt":       "same\n",
		"edit.txt":       long(-100),
		"gone.txt":       "bye\nnow\n",
		"noeol.txt":      "a\nb",
		"mode.sh":        "echo\n",
		"img.bin":        "\x00\x01\x02",
		"link":           "-> keep.txt",
		"sub/nested.go":  "package sub\n",
		"becomes/dir":    "file first\n",
		"was/dir/f":      "a file in a dir\n",
		"empty-soon.txt": "x\n",
		".git/config":    "[core]\n",
	}
	work := map[string]string{
		"keep.txt":       "same\n",
		"edit.txt":       long(5),
		"noeol.txt":      "a\nB",
		"mode.sh":        "x:echo\n",
		"img.bin":        "\x00\x01\x03",
		"link":           "-> sub",
		"sub/nested.go":  "package sub\n\nfunc F() {}\n",
		"added.txt":      "new\nfile",
		"becomes/dir/x":  "now a dir\n",
		"was/dir":        "now a file\n",
		"empty-soon.txt": "",
		"empty-new":      "",
		"naïve.txt":      "quoted path\n",
		".git/config":    "[core]\n\tchanged\n",
	}
	a, b := tree(t, base), tree(t, work)
	ch, err := snapshot.Diff(a, b, snapshot.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range ch.Files {
		got = append(got, f.Path+" "+f.Change+" "+f.Kind)
	}
	want := []string{
		"added.txt added text", "becomes/dir deleted text", "becomes/dir/x added text", "edit.txt modified text",
		"empty-new added text", "empty-soon.txt modified text", "gone.txt deleted text", "img.bin modified binary",
		"link modified symlink", "mode.sh mode text", "naïve.txt added text", "noeol.txt modified text", "sub/nested.go modified text",
		"was/dir added text", "was/dir/f deleted text",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff files (-want +got):\n%s\npatch:\n%s", diff, ch.Patch)
	}
	if !bytes.Contains(ch.Patch, []byte("# binary modified, not in this patch: img.bin")) {
		t.Errorf("patch does not note the binary file:\n%s", ch.Patch)
	}
	// Apply to a copy of base gives work, but for what the patch does not
	// carry (binary files, links) and .git.
	c := tree(t, base)
	if _, err := snapshot.Apply(ch.Patch, c); err != nil {
		t.Fatalf("Apply: %v\npatch:\n%s", err, ch.Patch)
	}
	expect := map[string]string{}
	for k, v := range work {
		expect[k] = v
	}
	expect["img.bin"], expect["link"], expect[".git/config"] = base["img.bin"], base["link"], base[".git/config"]
	if diff := cmp.Diff(expect, read(t, c)); diff != "" {
		t.Errorf("applied tree differs (-want +got):\n%s", diff)
	}
	// git and patch take it as it is.
	if git, err := exec.LookPath("git"); err == nil {
		g := tree(t, base)
		cmd := exec.Command(git, "apply", "--check", "-")
		cmd.Dir, cmd.Stdin = g, bytes.NewReader(ch.Patch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("git apply --check: %v\n%s\npatch:\n%s", err, out, ch.Patch)
		}
	}
	// Nothing changed, nothing to say.
	if same, err := snapshot.Diff(a, tree(t, base), snapshot.DiffOptions{}); err != nil || len(same.Patch) != 0 || len(same.Files) != 0 {
		t.Errorf("Diff(same) = %+v, %v; want empty", same, err)
	}
}

// TestApplyMovedHunks applies a patch to a file that gained lines above
// the change since the diff was made.
func TestApplyMovedHunks(t *testing.T) {
	var lines []string
	for i := range 40 {
		lines = append(lines, "l"+strings.Repeat("=", i)+"\n")
	}
	orig := strings.Join(lines, "")
	edited := strings.Replace(orig, "l"+strings.Repeat("=", 30)+"\n", "CHANGED\n", 1)
	ch, err := snapshot.Diff(tree(t, map[string]string{"f": orig}), tree(t, map[string]string{"f": edited}), snapshot.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst := tree(t, map[string]string{"f": "new top\nanother\n" + orig})
	if _, err := snapshot.Apply(ch.Patch, dst); err != nil {
		t.Fatal(err)
	}
	if got := read(t, dst)["f"]; got != "new top\nanother\n"+edited {
		t.Errorf("applied = %q", got)
	}
	// A conflict changes nothing.
	conflict := tree(t, map[string]string{"f": strings.Replace(orig, "l"+strings.Repeat("=", 29)+"\n", "theirs\n", 1)})
	before := read(t, conflict)
	if _, err := snapshot.Apply(ch.Patch, conflict); !errors.Is(err, protocol.ErrInvalidField) {
		t.Errorf("Apply(conflict) = %v, want invalid_field", err)
	}
	if diff := cmp.Diff(before, read(t, conflict)); diff != "" {
		t.Errorf("a refused patch changed the directory:\n%s", diff)
	}
}

// TestApplyHostile refuses patches that would write outside the directory
// or into .git, and writes nothing.
func TestApplyHostile(t *testing.T) {
	add := func(p string) string {
		return "diff --git a/" + p + " b/" + p + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1,1 @@\n+pwned\n"
	}
	outside := t.TempDir()
	tests := []struct {
		name  string
		patch string
		want  *protocol.Error
	}{
		{"dot-dot", add("../evil"), protocol.ErrPathEscape},
		{"deep dot-dot", add("a/../../evil"), protocol.ErrPathEscape},
		{"absolute", "diff --git a//etc/x b//etc/x\nnew file mode 100644\n--- /dev/null\n+++ b//etc/x\n@@ -0,0 +1,1 @@\n+x\n", protocol.ErrPathEscape},
		{"git hook", add(".git/hooks/pre-commit"), protocol.ErrPathEscape},
		{"git hook, any case", add("sub/.GIT/hooks/post-checkout"), protocol.ErrPathEscape},
		{"through a link", add("out/evil"), protocol.ErrPathEscape},
		{"through a link that stays inside", add("in/evil"), protocol.ErrPathEscape},
		{"change through a link that stays inside", "diff --git a/in/a b/in/a\n--- a/in/a\n+++ b/in/a\n@@ -1,1 +1,1 @@\n-a\n+pwned\n", protocol.ErrPathEscape},
		{"add over a link", add("inlnk"), protocol.ErrInvalidField},
		{"into a link", "diff --git a/lnk b/lnk\n--- a/lnk\n+++ b/lnk\n@@ -1,1 +1,1 @@\n-x\n+y\n", protocol.ErrPathEscape},
		{"rename", "diff --git a/a b/b\nsimilarity index 90%\nrename from a\nrename to b\n", protocol.ErrUnsupported},
		{"binary", "diff --git a/a b/a\nBinary files a/a and b/a differ\n", protocol.ErrUnsupported},
		{"bad hunk", "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -x +y @@\n", protocol.ErrMalformed},
		{"short hunk", "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,3 +1,3 @@\n a\n", protocol.ErrMalformed},
		{"twice", add("t") + add("t"), protocol.ErrMalformed},
		{"valid first, bad second", add("fine.txt") + add("../evil"), protocol.ErrPathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tree(t, map[string]string{"out": "-> " + outside, "lnk": "-> " + filepath.Join(outside, "target"), "a": "a\n",
				"in": "-> .", "inlnk": "-> a"})
			if err := os.WriteFile(filepath.Join(outside, "target"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := read(t, dir)
			_, err := snapshot.Apply([]byte(tt.patch), dir)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Apply = %v, want %s", err, tt.want.Code)
			}
			if diff := cmp.Diff(before, read(t, dir)); diff != "" {
				t.Errorf("a refused patch changed the directory:\n%s", diff)
			}
			if got := read(t, outside); len(got) != 1 || got["target"] != "x\n" {
				t.Errorf("a refused patch wrote outside: %v", got)
			}
		})
	}
}

// TestDiffLinesProperty checks the hunks of many random edits apply back
// exactly.
func TestDiffLinesProperty(t *testing.T) {
	x := uint32(7)
	rnd := func(n uint32) uint32 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		return x % n
	}
	for i := range 200 {
		var a []string
		for range rnd(40) {
			a = append(a, string(rune('a'+rnd(4)))+"\n")
		}
		b := append([]string(nil), a...)
		for range rnd(8) {
			switch p := int(rnd(uint32(len(b) + 1))); rnd(3) {
			case 0:
				b = append(b[:p], append([]string{string(rune('A'+rnd(3))) + "\n"}, b[p:]...)...)
			case 1:
				if p < len(b) {
					b = append(b[:p], b[p+1:]...)
				}
			default:
				if p < len(b) {
					b[p] = "c\n"
				}
			}
		}
		if rnd(2) == 0 && len(b) > 0 {
			b[len(b)-1] = strings.TrimSuffix(b[len(b)-1], "\n")
		}
		sa, sb := strings.Join(a, ""), strings.Join(b, "")
		da, db := tree(t, map[string]string{"f": sa}), tree(t, map[string]string{"f": sb})
		ch, err := snapshot.Diff(da, db, snapshot.DiffOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Apply(ch.Patch, da); err != nil {
			t.Fatalf("case %d: Apply: %v\npatch:\n%s", i, err, ch.Patch)
		}
		if got := read(t, da)["f"]; got != sb {
			t.Fatalf("case %d: %q -> %q gave %q\npatch:\n%s", i, sa, sb, got, ch.Patch)
		}
	}
}

func TestRef(t *testing.T) {
	r := snapshot.Ref([]byte("test"))
	if r != "sha256-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" || !protocol.ValidSnapshotRef(r) {
		t.Errorf("Ref(test) = %q", r)
	}
}

// FuzzUnpack feeds Unpack arbitrary bytes, starting from real archives:
// whatever it makes of them, nothing may appear beside the directory.
func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, hdr{name: "a/b", typ: tar.TypeReg, body: "x"}, hdr{name: "l", typ: tar.TypeSymlink, link: "a/b"}))
	f.Add(archive(f, hdr{name: "../x", typ: tar.TypeReg, body: "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		_, _ = snapshot.Unpack(bytes.NewReader(data), filepath.Join(parent, "ws"), snapshot.Limits{MaxBytes: 1 << 20, MaxFiles: 100})
		if entries, _ := os.ReadDir(parent); len(entries) > 1 {
			t.Fatalf("Unpack wrote beside the workspace: %v", entries)
		}
	})
}

// FuzzApply feeds Apply arbitrary patches against a directory beside
// another: the other must never change.
func FuzzApply(f *testing.F) {
	f.Add("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n-a\n+b\n")
	f.Add("diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n@@ -0,0 +1,1 @@\n+x\n")
	f.Fuzz(func(t *testing.T, patch string) {
		parent := t.TempDir()
		dir, other := filepath.Join(parent, "ws"), filepath.Join(parent, "other")
		for _, d := range []string{dir, other} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "f"), []byte("a\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(other, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
		_, _ = snapshot.Apply([]byte(patch), dir)
		if got := read(t, other); len(got) != 1 || got["f"] != "a\n" {
			t.Fatalf("Apply changed another directory: %v", got)
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 2 {
			t.Fatalf("Apply wrote beside the directory: %v", entries)
		}
	})
}

// TestUnpackTarCommand takes an archive made by the tar command, as an
// operator without the harness CLI makes one (docs/operations.md).
func TestUnpackTarCommand(t *testing.T) {
	tarCmd, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar command here")
	}
	files := map[string]string{"a.txt": "a\n", "bin/run": "x:#!/bin/sh\n", "link": "-> a.txt"}
	src := tree(t, files)
	archive := filepath.Join(t.TempDir(), "ws.tgz")
	if out, err := exec.Command(tarCmd, "-C", src, "-czf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := filepath.Join(t.TempDir(), "ws")
	if _, err := snapshot.Unpack(f, dst, snapshot.Limits{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(files, read(t, dst)); diff != "" {
		t.Errorf("unpacked (-want +got):\n%s", diff)
	}
}
