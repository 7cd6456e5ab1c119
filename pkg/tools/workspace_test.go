//go:build unix

package tools

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestOpenWorkspace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		wantErr error
	}{
		{"directory", dir, nil},
		{"missing", filepath.Join(dir, "nope"), fs.ErrNotExist},
		{"a file", file, errors.New("any")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := OpenWorkspace(tt.dir)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("OpenWorkspace(%q) = %v, want success", tt.dir, err)
			case tt.wantErr == nil:
				if w.Dir() != tt.dir {
					t.Errorf("Dir() = %q, want %q", w.Dir(), tt.dir)
				}
				if err := w.Close(); err != nil {
					t.Errorf("Close() = %v", err)
				}
			case err == nil:
				t.Errorf("OpenWorkspace(%q) succeeded, want an error", tt.dir)
			case errors.Is(tt.wantErr, fs.ErrNotExist) && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("OpenWorkspace(%q) = %v, want fs.ErrNotExist", tt.dir, err)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	w, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tests := []struct {
		name     string
		in       string
		want     string
		wantCode protocol.Code
	}{
		{"plain", "src/main.go", "src/main.go", 0},
		{"dot slash", "./a/b", "a/b", 0},
		{"trailing slash", "a/b/", "a/b", 0},
		{"double slash", "a//b", "a/b", 0},
		{"dotdot that stays inside", "a/../b", "b", 0},
		{"dotdot back to the root", "a/..", ".", 0},
		{"the root", ".", ".", 0},
		{"dotdot-like name", "..a/b..", "..a/b..", 0},
		{"glob characters are literal", "*/[x]?.go", "*/[x]?.go", 0},
		{"backslash is a name byte", `a\..\..\b`, `a\..\..\b`, 0},
		{"empty", "", "", protocol.CodeBadArguments},
		{"NUL", "a\x00b", "", protocol.CodeBadArguments},
		{"newline", "a\nb", "", protocol.CodeBadArguments},
		{"carriage return", "a\rb", "", protocol.CodeBadArguments},
		{"too long", strings.Repeat("a/", MaxPathLen/2) + "x", "", protocol.CodeBadArguments},
		{"longest allowed", strings.Repeat("a", MaxPathLen), strings.Repeat("a", MaxPathLen), 0},
		{"absolute", "/etc/passwd", "", protocol.CodePathEscape},
		{"dotdot", "..", "", protocol.CodePathEscape},
		{"dotdot at start", "../x", "", protocol.CodePathEscape},
		{"dotdot in the middle", "a/../../x", "", protocol.CodePathEscape},
		{"dotdot at the end", "a/../..", "", protocol.CodePathEscape},
		{"deep climb", "a/b/../../../etc", "", protocol.CodePathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.Resolve(tt.in)
			if c := codeOf(err); c != tt.wantCode {
				t.Fatalf("Resolve(%q) = %q, %v; want code %v", tt.in, got, err, tt.wantCode)
			}
			if got != tt.want {
				t.Errorf("Resolve(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if err != nil && !strings.Contains(protocol.AsError(err).Message, "path") {
				t.Errorf("Resolve(%q) message %q does not talk about the path", tt.in, protocol.AsError(err).Message)
			}
		})
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/../..", "/etc", "a/./b/../../c", "../", "a\x00", "a//../b", "...", "./..", "a/b/../../.."} {
		f.Add(s)
	}
	w, err := OpenWorkspace(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer w.Close()
	f.Fuzz(func(t *testing.T, p string) {
		got, err := w.Resolve(p)
		if err != nil {
			if got != "" {
				t.Errorf("Resolve(%q) = %q with error %v, want no path", p, got, err)
			}
			return
		}
		if path.IsAbs(got) || got == ".." || strings.HasPrefix(got, "../") || strings.ContainsAny(got, "\x00\n\r") || got == "" {
			t.Errorf("Resolve(%q) = %q, which is not a clean relative path inside the workspace", p, got)
		}
		if path.Clean(got) != got {
			t.Errorf("Resolve(%q) = %q, not clean", p, got)
		}
	})
}

func TestWorkspaceReadFile(t *testing.T) {
	env := newEnv(t)
	writeFiles(t, env.Workspace.Dir(), map[string]string{"a.txt": "hello"})
	tests := []struct {
		name     string
		path     string
		want     string
		wantCode protocol.Code
	}{
		{"file", "a.txt", "hello", 0},
		{"missing", "b.txt", "", protocol.CodeNotFound},
		{"directory", ".", "", protocol.CodeBadArguments},
		{"escape", "../x", "", protocol.CodePathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := env.Workspace.ReadFile(tt.path)
			if codeOf(err) != tt.wantCode || string(got) != tt.want {
				t.Errorf("ReadFile(%q) = %q, %v; want %q, code %v", tt.path, got, err, tt.want, tt.wantCode)
			}
		})
	}
}
