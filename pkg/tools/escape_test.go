//go:build unix

package tools

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ioharness/harness/pkg/protocol"
)

// fileState is what the escape tests check did not change outside.
type fileState struct {
	Mode    fs.FileMode
	ModTime time.Time
	Content string
}

// snapshot records every file under dir, without following symlinks.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	m := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		s := fileState{Mode: fi.Mode(), ModTime: fi.ModTime()}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.Content = string(b)
		}
		m[p] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEscapes drives the real tools with paths that try to leave the
// workspace or reach something that is not a regular file. Each must be
// refused with its code, and nothing outside the workspace may change.
func TestEscapes(t *testing.T) {
	type layout struct{ ws, out string }
	symlink := func(target, name string) func(*testing.T, layout) {
		return func(t *testing.T, l layout) {
			target := strings.ReplaceAll(target, "$OUT", l.out)
			target = strings.ReplaceAll(target, "$WS", l.ws)
			if err := os.Symlink(target, filepath.Join(l.ws, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	both := func(fns ...func(*testing.T, layout)) func(*testing.T, layout) {
		return func(t *testing.T, l layout) {
			for _, f := range fns {
				f(t, l)
			}
		}
	}
	hardlink := func(t *testing.T, l layout) {
		if err := os.Link(filepath.Join(l.out, "secret.txt"), filepath.Join(l.ws, "hard")); err != nil {
			t.Skipf("cannot make a hard link here: %v", err)
		}
	}
	fifo := func(t *testing.T, l layout) {
		if err := syscall.Mkfifo(filepath.Join(l.ws, "fifo"), 0o644); err != nil {
			t.Skipf("cannot make a FIFO here: %v", err)
		}
	}
	device := func(t *testing.T, l layout) {
		// The same device numbers as /dev/null (1, 3); needs root.
		if err := syscall.Mknod(filepath.Join(l.ws, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("cannot make a device node here (needs root): %v", err)
		}
	}
	socket := func(t *testing.T, l layout) {
		ln, err := net.Listen("unix", filepath.Join(l.ws, "sock"))
		if err != nil {
			t.Skipf("cannot make a unix socket here: %v", err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	a := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return argsJSON(t, m)
	}
	const (
		escape = protocol.CodePathEscape
		bad    = protocol.CodeBadArguments
	)
	tests := []struct {
		name  string
		setup func(*testing.T, layout)
		tool  string
		args  string // $OUT is replaced by the outside directory
		want  protocol.Code
	}{
		{"dotdot at start, read", nil, "read_file", a("path", "../outside/secret.txt"), escape},
		{"dotdot at start, write", nil, "write_file", a("path", "../outside/secret.txt", "content", "pwned"), escape},
		{"dotdot at start, edit", nil, "edit_file", a("path", "../outside/secret.txt", "search", "TOP", "replace", "pwned"), escape},
		{"dotdot in the middle, read", nil, "read_file", a("path", "a/../../outside/secret.txt"), escape},
		{"dotdot in the middle, write new", nil, "write_file", a("path", "a/../../outside/new.txt", "content", "pwned"), escape},
		{"dotdot at the end", nil, "read_file", a("path", "a/../.."), escape},
		{"bare dotdot, write", nil, "write_file", a("path", "..", "content", "x"), escape},
		{"absolute /etc/passwd", nil, "read_file", a("path", "/etc/passwd"), escape},
		{"absolute outside file, write", nil, "write_file", a("path", "$OUT/secret.txt", "content", "pwned"), escape},
		{"/proc/self/root", nil, "read_file", a("path", "/proc/self/root/etc/passwd"), escape},
		{"absolute symlink to outside file, read", symlink("$OUT/secret.txt", "link"), "read_file", a("path", "link"), escape},
		{"absolute symlink to outside file, write", symlink("$OUT/secret.txt", "link"), "write_file", a("path", "link", "content", "pwned"), escape},
		{"absolute symlink to outside file, edit", symlink("$OUT/secret.txt", "link"), "edit_file", a("path", "link", "search", "TOP", "replace", "pwned"), escape},
		{"relative symlink to outside file, read", symlink("../outside/secret.txt", "link"), "read_file", a("path", "link"), escape},
		{"relative symlink to outside file, write", symlink("../outside/secret.txt", "link"), "write_file", a("path", "link", "content", "pwned"), escape},
		{"symlink to outside dir, read through it", symlink("$OUT", "dirlink"), "read_file", a("path", "dirlink/secret.txt"), escape},
		{"symlink to outside dir, write through it", symlink("../outside", "dirlink"), "write_file", a("path", "dirlink/new.txt", "content", "pwned"), escape},
		{"symlink to outside dir, mkdir through it", symlink("../outside", "dirlink"), "write_file", a("path", "dirlink/sub/deep/new.txt", "content", "pwned"), escape},
		{"symlink to outside dir, edit through it", symlink("../outside", "dirlink"), "edit_file", a("path", "dirlink/secret.txt", "search", "TOP", "replace", "pwned"), escape},
		{"symlink chain leading out, read", both(symlink("l2", "l1"), symlink("./l3", "l2"), symlink("../outside/secret.txt", "l3")), "read_file", a("path", "l1"), escape},
		{"symlink chain leading out, write", both(symlink("l2", "l1"), symlink("../outside/secret.txt", "l2")), "write_file", a("path", "l1", "content", "pwned"), escape},
		{"dangling symlink pointing outside, write", symlink("../outside/created.txt", "dangle"), "write_file", a("path", "dangle", "content", "pwned"), escape},
		{"dangling absolute symlink pointing outside, write", symlink("$OUT/created.txt", "dangle"), "write_file", a("path", "dangle", "content", "pwned"), escape},
		{"absolute symlink even to inside is refused", both(symlink("$WS/inside.txt", "abs")), "read_file", a("path", "abs"), escape},
		{"hard link to outside file, read", hardlink, "read_file", a("path", "hard"), escape},
		{"hard link to outside file, write", hardlink, "write_file", a("path", "hard", "content", "pwned"), escape},
		{"hard link to outside file, identical write", hardlink, "write_file", a("path", "hard", "content", "TOP SECRET\n"), escape},
		{"hard link to outside file, edit", hardlink, "edit_file", a("path", "hard", "search", "TOP", "replace", "pwned"), escape},
		{"FIFO, read", fifo, "read_file", a("path", "fifo"), bad},
		{"FIFO, write", fifo, "write_file", a("path", "fifo", "content", "x"), bad},
		{"FIFO, edit", fifo, "edit_file", a("path", "fifo", "search", "x", "replace", "y"), bad},
		{"/dev/null via symlink, read", symlink("/dev/null", "null"), "read_file", a("path", "null"), escape},
		{"/dev/null via symlink, write", symlink("/dev/null", "null"), "write_file", a("path", "null", "content", "x"), escape},
		{"device node inside, read", device, "read_file", a("path", "null"), bad},
		{"device node inside, write", device, "write_file", a("path", "null", "content", "x"), bad},
		{"socket inside, read", socket, "read_file", a("path", "sock"), bad},
		{"socket inside, write", socket, "write_file", a("path", "sock", "content", "x"), bad},
		{"NUL in name, read", nil, "read_file", a("path", "a\x00b"), bad},
		{"NUL in name, write", nil, "write_file", a("path", "a\x00/../../outside/x", "content", "x"), bad},
		{"newline in name, write", nil, "write_file", a("path", "a\nb", "content", "x"), bad},
		{"very long path, write", nil, "write_file", a("path", strings.Repeat("d/", 2100)+"x", "content", "x"), bad},
		{"long name component, write", nil, "write_file", a("path", strings.Repeat("n", 300), "content", "x"), bad},
		{"symlink loop", both(symlink("loop2", "loop1"), symlink("loop1", "loop2")), "read_file", a("path", "loop1"), bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			l := layout{ws: filepath.Join(base, "ws"), out: filepath.Join(base, "outside")}
			writeFiles(t, base, map[string]string{"outside/secret.txt": "TOP SECRET\n", "outside/sub/keep": "k", "ws/inside.txt": "in"})
			old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
			for _, p := range []string{"outside/secret.txt", "outside/sub/keep", "outside/sub", "outside"} {
				if err := os.Chtimes(filepath.Join(base, p), old, old); err != nil {
					t.Fatal(err)
				}
			}
			if tt.setup != nil {
				tt.setup(t, l)
			}
			before := snapshot(t, l.out)
			w, err := OpenWorkspace(l.ws)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			env := &Env{Workspace: w}
			args := strings.ReplaceAll(tt.args, "$OUT", l.out)

			done := make(chan struct{})
			var out *Output
			go func() {
				defer close(done)
				out, err = invoke(t, env, tt.tool, args)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s(%s) blocked", tt.tool, args)
			}
			if codeOf(err) != tt.want {
				t.Fatalf("%s(%s) = %+v, %v; want code %v", tt.tool, args, out, err, tt.want)
			}
			if msg := protocol.AsError(err).Message; len(msg) < 20 {
				t.Errorf("%s(%s) message %q does not explain the refusal", tt.tool, args, msg)
			}
			if diff := cmp.Diff(before, snapshot(t, l.out)); diff != "" {
				t.Errorf("%s(%s) changed the outside directory (-before +after):\n%s", tt.tool, args, diff)
			}
			entries, _ := os.ReadDir(base)
			if len(entries) != 2 {
				t.Errorf("%s(%s) left %d entries beside the workspace, want only ws and outside", tt.tool, args, len(entries))
			}
		})
	}
}

// TestSearchDoesNotEscape checks that grep and find neither follow links
// out of the workspace nor read a hard link to an outside file.
func TestSearchDoesNotEscape(t *testing.T) {
	base := t.TempDir()
	ws, out := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	writeFiles(t, base, map[string]string{"outside/secret.txt": "TOP SECRET\n", "ws/ok.txt": "nothing here\n"})
	for target, name := range map[string]string{out: "dirlink", filepath.Join(out, "secret.txt"): "filelink", "../outside": "reldirlink"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(out, "secret.txt"), filepath.Join(ws, "hard")); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	env := &Env{Workspace: w}
	tests := []struct {
		name, tool, args string
	}{
		{"grep everything", "grep", `{"pattern":"SECRET"}`},
		{"grep through the link", "grep", `{"pattern":"SECRET","path_glob":"dirlink/*"}`},
		{"find through the link", "find", `{"name_glob":"dirlink/*"}`},
		{"find by name", "find", `{"name_glob":"secret*"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := invoke(t, env, tt.tool, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(o.Content, "SECRET\n") || strings.Contains(o.Content, "TOP") || strings.Contains(o.Content, "secret.txt") {
				t.Errorf("%s(%s) = %q, shows something from outside the workspace", tt.tool, tt.args, o.Content)
			}
		})
	}
}

// TestGlobCharactersAreLiteral checks that read_file and write_file take
// glob characters in a path as plain name bytes.
func TestGlobCharactersAreLiteral(t *testing.T) {
	env := newEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, map[string]string{"a.txt": "A", "b.txt": "B", "[ab].txt": "brackets", "?.txt": "question"})
	tests := []struct {
		name, tool, args, want string
	}{
		{"read brackets", "read_file", `{"path":"[ab].txt"}`, "brackets"},
		{"read question mark", "read_file", `{"path":"?.txt"}`, "question"},
		{"read star is missing, not a match", "read_file", `{"path":"*.txt"}`, "*.txt does not exist yet; it reads as empty. write_file creates it."},
		{"write star", "write_file", `{"path":"*.txt","content":"star"}`, "created *.txt (4 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := invoke(t, env, tt.tool, tt.args)
			if err != nil || out.Content != tt.want {
				t.Errorf("%s(%s) = %+v, %v; want %q", tt.tool, tt.args, out, err, tt.want)
			}
		})
	}
	for p, want := range map[string]string{"a.txt": "A", "b.txt": "B", "*.txt": "star"} {
		if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != want {
			t.Errorf("%s = %q, want %q", p, b, want)
		}
	}
}
