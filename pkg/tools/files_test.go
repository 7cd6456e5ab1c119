//go:build unix

package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestReadFile(t *testing.T) {
	env := newEnv(t)
	env.EntryCap = 1000
	dir := env.Workspace.Dir()
	long := strings.Repeat("0123456789\n", 500) + "THE END\n"
	writeFiles(t, dir, map[string]string{
		"a.txt":       "hello\n",
		"empty":       "",
		"dir/b.go":    "package b\n",
		"long.txt":    long,
		"utf8.txt":    strings.Repeat("é", 2000),
		"*.txt":       "a file named star",
		"binary.bin":  "\xff\xfe\x00\x01",
		"with space":  "spaced",
		"dir/../c.md": "c",
	})
	tests := []struct {
		name     string
		args     string
		want     string // exact content, unless wantSub is set
		wantSub  []string
		wantCode protocol.Code
	}{
		{"file", `{"path":"a.txt"}`, "hello\n", nil, 0},
		{"nested", `{"path":"dir/b.go"}`, "package b\n", nil, 0},
		{"dotdot inside", `{"path":"dir/../a.txt"}`, "hello\n", nil, 0},
		{"glob characters are literal", `{"path":"*.txt"}`, "a file named star", nil, 0},
		{"space in name", `{"path":"with space"}`, "spaced", nil, 0},
		{"missing reads as empty", `{"path":"new/file.go"}`, "", []string{"new/file.go does not exist yet", "write_file"}, 0},
		{"empty file", `{"path":"empty"}`, "", []string{"empty (0 bytes)"}, 0},
		{"long keeps the tail", `{"path":"long.txt"}`, "", []string{"…[truncated: elided ", " of 5508 chars — re-read or narrow the query", "THE END\n"}, 0},
		{"multibyte counted in chars", `{"path":"utf8.txt"}`, "", []string{" of 2000 chars"}, 0},
		{"binary", `{"path":"binary.bin"}`, "", nil, protocol.CodeBadArguments},
		{"directory", `{"path":"dir"}`, "", nil, protocol.CodeBadArguments},
		{"parent is a file", `{"path":"a.txt/x"}`, "", nil, protocol.CodeBadArguments},
		{"missing path", `{}`, "", nil, protocol.CodeBadArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := invoke(t, env, "read_file", tt.args)
			if codeOf(err) != tt.wantCode {
				t.Fatalf("read_file(%s) = %v, %v; want code %v", tt.args, out, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if out.Changed || out.Exec != nil {
				t.Errorf("read_file(%s) = %+v, want Changed false and no Exec", tt.args, out)
			}
			if tt.wantSub == nil && out.Content != tt.want {
				t.Errorf("read_file(%s) = %q, want %q", tt.args, out.Content, tt.want)
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(out.Content, s) {
					t.Errorf("read_file(%s) = %q, want it to contain %q", tt.args, out.Content, s)
				}
			}
			if n := utf8.RuneCountInString(out.Content); n > env.EntryCap {
				t.Errorf("read_file(%s) returned %d chars, over the cap of %d", tt.args, n, env.EntryCap)
			}
		})
	}
}

func TestReadFileHuge(t *testing.T) {
	env := newEnv(t)
	env.EntryCap = 600
	p := filepath.Join(env.Workspace.Dir(), "huge.log")
	content := strings.Repeat("x", readWholeMax) + "é" + strings.Repeat("line\n", 100) + "LAST LINE\n"
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := invoke(t, env, "read_file", `{"path":"huge.log"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.Content, "LAST LINE\n") || !strings.Contains(out.Content, "…[truncated: elided the first ") ||
		!strings.Contains(out.Content, " of "+strconv.Itoa(len(content))+" bytes") {
		t.Errorf("read_file(huge.log) = %q, want a note and the tail", out.Content)
	}
	if n := utf8.RuneCountInString(out.Content); n > env.EntryCap {
		t.Errorf("read_file(huge.log) returned %d chars, over the cap of %d", n, env.EntryCap)
	}
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		args        map[string]any
		wantCode    protocol.Code
		wantChanged bool
		wantSub     string
		wantFile    string // path whose content must then be content
	}{
		{"create", nil, map[string]any{"path": "a.txt", "content": "hi"}, 0, true, "created a.txt (2 bytes)", "a.txt"},
		{"create with parents", nil, map[string]any{"path": "x/y/z.go", "content": "package z\n"}, 0, true, "created x/y/z.go", "x/y/z.go"},
		{"create empty", nil, map[string]any{"path": "e", "content": ""}, 0, true, "created e (0 bytes)", "e"},
		{"overwrite", map[string]string{"a.txt": "old content"}, map[string]any{"path": "a.txt", "content": "new"}, 0, true, "changed a.txt (3 bytes, was 11)", "a.txt"},
		{"overwrite longer", map[string]string{"a.txt": "ab"}, map[string]any{"path": "a.txt", "content": "abcdef"}, 0, true, "changed a.txt (6 bytes, was 2)", "a.txt"},
		{"same size, different bytes", map[string]string{"a.txt": "abc"}, map[string]any{"path": "a.txt", "content": "xyz"}, 0, true, "changed a.txt", "a.txt"},
		{"identical", map[string]string{"a.txt": "same"}, map[string]any{"path": "a.txt", "content": "same"}, 0, false, "identical", "a.txt"},
		{"glob characters are literal", map[string]string{"b.txt": "keep"}, map[string]any{"path": "*.txt", "content": "star"}, 0, true, "created *.txt", "*.txt"},
		{"onto a directory", map[string]string{"d/f": ""}, map[string]any{"path": "d", "content": "x"}, protocol.CodeBadArguments, false, "", ""},
		{"the root", nil, map[string]any{"path": ".", "content": "x"}, protocol.CodeBadArguments, false, "", ""},
		{"parent is a file", map[string]string{"f": ""}, map[string]any{"path": "f/g", "content": "x"}, protocol.CodeBadArguments, false, "", ""},
		{"content missing", nil, map[string]any{"path": "a"}, protocol.CodeBadArguments, false, "", ""},
		{"content not a string", nil, map[string]any{"path": "a", "content": 3}, protocol.CodeBadArguments, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			dir := env.Workspace.Dir()
			writeFiles(t, dir, tt.files)
			var before time.Time
			if tt.wantFile != "" {
				if _, err := os.Stat(filepath.Join(dir, tt.wantFile)); err == nil {
					before = time.Now().Add(-time.Hour).Truncate(time.Second)
					if err := os.Chtimes(filepath.Join(dir, tt.wantFile), before, before); err != nil {
						t.Fatal(err)
					}
				}
			}
			args := argsJSON(t, tt.args)
			out, err := invoke(t, env, "write_file", args)
			if codeOf(err) != tt.wantCode {
				t.Fatalf("write_file(%s) = %v, %v; want code %v", args, out, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if out.Changed != tt.wantChanged || !strings.Contains(out.Content, tt.wantSub) {
				t.Errorf("write_file(%s) = %+v, want Changed %v and %q", args, out, tt.wantChanged, tt.wantSub)
			}
			p := filepath.Join(dir, tt.wantFile)
			b, err := os.ReadFile(p)
			if err != nil || string(b) != tt.args["content"] {
				t.Errorf("after write_file(%s) the file holds %q, %v; want %q", args, b, err, tt.args["content"])
			}
			fi, _ := os.Stat(p)
			if !before.IsZero() && !tt.wantChanged && !fi.ModTime().Equal(before) {
				t.Errorf("identical write_file(%s) moved the mtime from %v to %v", args, before, fi.ModTime())
			}
			if len(tt.files) == 0 && fi.Mode().Perm()&^0o644 != 0 {
				t.Errorf("created file mode = %v, want at most 0644", fi.Mode())
			}
			for p, c := range tt.files {
				if p == tt.wantFile {
					continue
				}
				if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != c {
					t.Errorf("write_file(%s) changed %s to %q", args, p, b)
				}
			}
		})
	}
}

func TestEditFile(t *testing.T) {
	const orig = "func a() {}\nfunc b() {}\nfunc b() {}\n"
	tests := []struct {
		name        string
		args        map[string]any
		wantCode    protocol.Code
		wantContent string
		wantSub     string
		wantChanged bool
	}{
		{"replace once", map[string]any{"path": "f.go", "search": "func a() {}", "replace": "func a() { return }"}, 0,
			"func a() { return }\nfunc b() {}\nfunc b() {}\n", "edited f.go: replaced 1 occurrence", true},
		{"delete", map[string]any{"path": "f.go", "search": "func a() {}\n", "replace": ""}, 0,
			"func b() {}\nfunc b() {}\n", "edited f.go", true},
		{"unique with context", map[string]any{"path": "f.go", "search": "}\nfunc b() {}\nfunc b", "replace": "}\nfunc c() {}\nfunc b"}, 0,
			"func a() {}\nfunc c() {}\nfunc b() {}\n", "edited", true},
		{"same text", map[string]any{"path": "f.go", "search": "func a", "replace": "func a"}, 0, orig, "identical", false},
		{"not found", map[string]any{"path": "f.go", "search": "func z", "replace": "x"}, protocol.CodeBadArguments, orig, "found 0 times", false},
		{"found twice", map[string]any{"path": "f.go", "search": "func b() {}", "replace": "x"}, protocol.CodeBadArguments, orig, "found 2 times", false},
		{"empty search", map[string]any{"path": "f.go", "search": "", "replace": "x"}, protocol.CodeBadArguments, orig, "search is empty", false},
		{"replace missing", map[string]any{"path": "f.go", "search": "func a"}, protocol.CodeBadArguments, orig, "replace", false},
		{"missing file", map[string]any{"path": "new.go", "search": "a", "replace": "b"}, protocol.CodeNotFound, orig, "write_file", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			dir := env.Workspace.Dir()
			writeFiles(t, dir, map[string]string{"f.go": orig})
			args := argsJSON(t, tt.args)
			out, err := invoke(t, env, "edit_file", args)
			if codeOf(err) != tt.wantCode {
				t.Fatalf("edit_file(%s) = %v, %v; want code %v", args, out, err, tt.wantCode)
			}
			msg := ""
			if err != nil {
				msg = protocol.AsError(err).Message
			} else {
				msg = out.Content
				if out.Changed != tt.wantChanged {
					t.Errorf("edit_file(%s).Changed = %v, want %v", args, out.Changed, tt.wantChanged)
				}
			}
			if !strings.Contains(msg, tt.wantSub) {
				t.Errorf("edit_file(%s) says %q, want it to contain %q", args, msg, tt.wantSub)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "f.go")); string(b) != tt.wantContent {
				t.Errorf("after edit_file(%s) f.go = %q, want %q", args, b, tt.wantContent)
			}
			if _, err := os.Stat(filepath.Join(dir, "new.go")); err == nil {
				t.Errorf("edit_file(%s) created new.go", args)
			}
		})
	}
}

func TestEditKeepsMode(t *testing.T) {
	env := newEnv(t)
	p := filepath.Join(env.Workspace.Dir(), "run.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho a\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := invoke(t, env, "edit_file", `{"path":"run.sh","search":"echo a","replace":"echo b"}`); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("after edit_file run.sh mode = %v, %v; want 0755", fi.Mode(), err)
	}
}
