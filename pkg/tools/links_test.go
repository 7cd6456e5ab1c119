//go:build unix

package tools

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// policyJudge is the hook the sandboxer gives the tools, without
// approvals: every path of a resolution must be allowed outright.
func policyJudge(pol *policy.Policy) func(act, rel string) error {
	return func(act, rel string) error {
		a := policy.Read
		if act == ActWrite {
			a = policy.Write
		}
		if v := pol.CheckPath(a, rel); v.Effect != policy.Allow {
			return protocol.Errorf(protocol.CodeRefused, "%s", v.Refusal())
		}
		return nil
	}
}

// linkPolicy is the policy of the link tests: the builtin secrets, a user
// rule for private/ and secrets/, and writes allowed elsewhere.
func linkPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	pol, err := policy.FromProtocol(&protocol.Policy{
		Layers: []protocol.Layer{{Name: "user", Rules: []protocol.Rule{
			{Act: "read", Effect: "deny", Pattern: "private/*"},
			{Act: "read", Effect: "deny", Pattern: "secrets/*"},
			{Act: "write", Effect: "deny", Pattern: "secrets/*"},
			{Act: "write", Effect: "deny", Pattern: "private/*"},
			{Act: "write", Effect: "allow", Pattern: "*"},
		}}},
		Defaults: &protocol.Defaults{Read: "allow", Write: "deny"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestLinksAreJudgedByTarget drives the file tools through links inside
// the workspace whose targets the policy denies: a link to a file, a
// directory link in the middle of a path, a chain, a loop, a dangling
// link a write would create the target of, and a hard link. Each call is
// refused naming the target and its rule, and no denied file's bytes come
// back or change.
func TestLinksAreJudgedByTarget(t *testing.T) {
	const secret = "SENTINEL-SECRET"
	files := map[string]string{
		".env":              secret + " env\n",
		"private/creds.txt": secret + " creds\n",
		"secrets/id":        secret + " id\n",
		"docs/readme.md":    "readme\n",
		"shot.png":          string(pngHeader),
	}
	links := map[string]string{ // name -> target
		"notes.txt":     ".env",
		"public.txt":    "private/creds.txt",
		"src/keys":      "../secrets",
		"l1":            "l2",
		"l2":            "sub/../l3",
		"l3":            ".env",
		"loop1":         "loop2",
		"loop2":         "loop1",
		"dangle":        "new/.env",
		"dangle-ok":     "made/ok.txt",
		"readme.lnk":    "docs/readme.md",
		"docs/up":       "..",
		"pic.png":       "private/pic.png",
		"sub/.keep.lnk": "../docs/readme.md",
	}
	a := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return argsJSON(t, m)
	}
	tests := []struct {
		name     string
		tool     string
		args     string
		want     protocol.Code
		contains []string // in the refusal, or in the output when want is 0
		created  string   // a file that must exist afterwards; "" for none
	}{
		{"file link, read", "read_file", a("path", "notes.txt"), protocol.CodeRefused, []string{`".env"`, `rule ".env"`, "notes.txt leads to .env through a symbolic link"}, ""},
		{"file link, write", "write_file", a("path", "notes.txt", "content", "pwned"), protocol.CodeRefused, []string{`".env"`, `rule ".env"`}, ""},
		{"file link, edit", "edit_file", a("path", "notes.txt", "search", "SENTINEL", "replace", "pwned"), protocol.CodeRefused, []string{`".env"`}, ""},
		{"link to a user-denied file", "read_file", a("path", "public.txt"), protocol.CodeRefused, []string{`"private/creds.txt"`, `rule "private/*" in layer "user"`}, ""},
		{"directory link to a denied directory, read", "read_file", a("path", "src/keys/id"), protocol.CodeRefused, []string{`"secrets/id"`, `rule "secrets/*"`}, ""},
		{"directory link to a denied directory, missing file", "read_file", a("path", "src/keys/nothing"), protocol.CodeRefused, []string{`"secrets/nothing"`}, ""},
		{"directory link to a denied directory, write new", "write_file", a("path", "src/keys/new.txt", "content", "x"), protocol.CodeRefused, []string{`"secrets/new.txt"`}, ""},
		{"directory link to a denied directory, below a file", "read_file", a("path", "src/keys/id/x"), protocol.CodeRefused, []string{`"secrets/id/x"`}, ""},
		{"directory link up and back down", "read_file", a("path", "docs/up/.env"), protocol.CodeRefused, []string{`".env"`}, ""},
		{"chain of links", "read_file", a("path", "l1"), protocol.CodeRefused, []string{`".env"`, "l1 leads to .env"}, ""},
		{"chain of links, write", "write_file", a("path", "l1", "content", "pwned"), protocol.CodeRefused, []string{`".env"`}, ""},
		{"link loop", "read_file", a("path", "loop1"), protocol.CodeBadArguments, []string{"too many symbolic links"}, ""},
		{"dangling link, write creating a denied target", "write_file", a("path", "dangle", "content", "pwned"), protocol.CodeRefused, []string{`"new/.env"`}, ""},
		{"dangling link, write creating an allowed target", "write_file", a("path", "dangle-ok", "content", "fine"), 0, []string{"created made/ok.txt (through the symbolic link dangle-ok)"}, "made/ok.txt"},
		{"allowed link reads its target", "read_file", a("path", "readme.lnk"), 0, []string{"readme"}, ""},
		{"allowed link from a subdirectory", "read_file", a("path", "sub/.keep.lnk"), 0, []string{"readme"}, ""},
		{"view_image through a link to a denied file", "view_image", a("path", "pic.png"), protocol.CodeRefused, []string{`"private/pic.png"`}, ""},
		{"grep does not follow links", "grep", a("pattern", "SENTINEL"), 0, []string{`no lines match "SENTINEL"`}, ""},
		{"grep through a directory link", "grep", a("pattern", "SENTINEL", "path_glob", "src/keys/*"), 0, []string{`no lines match`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			writeFiles(t, dir, map[string]string{"private/pic.png": string(pngHeader) + secret})
			for name, target := range links {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, dir)
			w, err := OpenWorkspace(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			env := &Env{Workspace: w, Judge: policyJudge(linkPolicy(t))}
			tool, ok := BuiltinsWithImages().Get(tt.tool)
			if !ok {
				t.Fatalf("no tool %s", tt.tool)
			}
			out, err := tool.Invoke(t.Context(), env, json.RawMessage(tt.args))
			if codeOf(err) != tt.want {
				t.Fatalf("%s(%s) = %+v, %v; want code %v", tt.tool, tt.args, out, err, tt.want)
			}
			text := ""
			if err != nil {
				text = protocol.AsError(err).Message
			} else {
				text = out.Content
				if out.Image != nil {
					text += string(out.Image.Data)
				}
			}
			for _, c := range tt.contains {
				if !strings.Contains(text, c) {
					t.Errorf("%s(%s) said %q, want it to contain %q", tt.tool, tt.args, text, c)
				}
			}
			if strings.Contains(text, secret) {
				t.Errorf("%s(%s) showed a denied file's bytes: %q", tt.tool, tt.args, text)
			}
			after := snapshot(t, dir)
			if tt.created != "" {
				full := filepath.Join(dir, tt.created)
				if _, ok := after[full]; !ok {
					t.Errorf("%s(%s) did not create %s", tt.tool, tt.args, tt.created)
				}
				for p := range after {
					if _, ok := before[p]; !ok && p != full && p != filepath.Dir(full) {
						t.Errorf("%s(%s) created %s as well", tt.tool, tt.args, p)
					}
				}
				return
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("%s(%s) changed the workspace (-before +after):\n%s", tt.tool, tt.args, diff)
			}
		})
	}
}

// pngHeader starts a file view_image takes for a PNG.
var pngHeader = append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...)

// TestHardLinkInsideIsRefused checks that a second name for a denied file,
// made with a hard link, reads and writes nothing: the tools cannot tell
// which name is the real one, so a file with several links is refused.
func TestHardLinkInsideIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{".env": "SENTINEL-SECRET\n"})
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "pub.txt")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	env := &Env{Workspace: w, Judge: policyJudge(linkPolicy(t))}
	for _, c := range []struct{ tool, args string }{
		{"read_file", `{"path":"pub.txt"}`},
		{"write_file", `{"path":"pub.txt","content":"pwned"}`},
		{"edit_file", `{"path":"pub.txt","search":"SENTINEL","replace":"pwned"}`},
		{"grep", `{"pattern":"SENTINEL"}`},
	} {
		out, err := invoke(t, env, c.tool, c.args)
		text := ""
		if out != nil {
			text = out.Content
		}
		if err != nil {
			text = protocol.AsError(err).Message
		}
		if strings.Contains(text, "SENTINEL-SECRET") {
			t.Errorf("%s(%s) = %q, shows the denied file through its hard link", c.tool, c.args, text)
		}
		if c.tool != "grep" && codeOf(err) != protocol.CodePathEscape {
			t.Errorf("%s(%s) = %v, want CodePathEscape", c.tool, c.args, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SENTINEL-SECRET\n" {
		t.Errorf(".env = %q after writes through its hard link", b)
	}
}

// TestFindLeavesOutLinksToHiddenFiles checks that find lists a link only
// where it leads may be read, so its name does not tell a hidden file is
// there, and lists the others.
func TestFindLeavesOutLinksToHiddenFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{".env": "x", "docs/readme.md": "r", "secrets/id": "s"})
	for name, target := range map[string]string{"notes.txt": ".env", "readme.txt": "docs/readme.md", "src.txt": "secrets/id", "dangling.txt": "nowhere/.env", "out.txt": "../outside"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	env := &Env{Workspace: w, Judge: policyJudge(linkPolicy(t))}
	out, err := invoke(t, env, "find", `{"name_glob":"*.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("out.txt\nreadme.txt", out.Content); diff != "" {
		t.Errorf("find(*.txt) mismatch (-want +got):\n%s", diff)
	}
}

// TestResolveLinks checks the paths a resolution reports.
func TestResolveLinks(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"secrets/id": "s", "a/b/c.txt": "c"})
	for name, target := range map[string]string{"src/keys": "../secrets", "notes": "l2", "l2": "a/b/c.txt", "a/up": "..", "abs": "/etc/passwd", "out": "../x"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tests := []struct {
		path  string
		paths []string
		final string
		code  protocol.Code
	}{
		{"a/b/c.txt", []string{"a/b/c.txt"}, "a/b/c.txt", 0},
		{"src/keys/id", []string{"src/keys/id", "secrets/id"}, "secrets/id", 0},
		{"src/keys/new/deep.txt", []string{"src/keys/new/deep.txt", "secrets/new/deep.txt"}, "secrets/new/deep.txt", 0},
		{"notes", []string{"notes", "l2", "a/b/c.txt"}, "a/b/c.txt", 0},
		{"a/up/a/up/secrets/id", []string{"a/up/a/up/secrets/id", "a/up/secrets/id", "secrets/id"}, "secrets/id", 0},
		{"missing/x", []string{"missing/x"}, "missing/x", 0},
		{"abs", []string{"abs"}, "", protocol.CodePathEscape},
		{"out", []string{"out"}, "", protocol.CodePathEscape},
		{"../x", []string{"../x"}, "", protocol.CodePathEscape},
	}
	for _, tt := range tests {
		r, err := w.ResolveLinks(tt.path)
		if codeOf(err) != tt.code {
			t.Errorf("ResolveLinks(%q) = %v, want code %v", tt.path, err, tt.code)
		}
		if diff := cmp.Diff(tt.paths, r.Paths); diff != "" {
			t.Errorf("ResolveLinks(%q) paths mismatch (-want +got):\n%s", tt.path, diff)
		}
		if r.Final != tt.final {
			t.Errorf("ResolveLinks(%q).Final = %q, want %q", tt.path, r.Final, tt.final)
		}
	}
}

// TestLinkSwappedInAfterJudging puts a link on a path between the judging
// and the open, as a command still running could: the open follows no
// link, so the call fails and the denied file is neither read nor written.
func TestLinkSwappedInAfterJudging(t *testing.T) {
	for _, tool := range []string{"read_file", "write_file", "edit_file"} {
		t.Run(tool, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"a/b.txt": "fine\n", "secrets/b.txt": "SENTINEL-SECRET\n"})
			w, err := OpenWorkspace(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			judge := policyJudge(linkPolicy(t))
			swapped := false
			env := &Env{Workspace: w, Judge: func(act, rel string) error {
				if err := judge(act, rel); err != nil {
					return err
				}
				if !swapped { // the path is judged; now it changes
					swapped = true
					if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "a.old")); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink("secrets", filepath.Join(dir, "a")); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			}}
			args := map[string]string{"path": "a/b.txt"}
			switch tool {
			case "write_file":
				args["content"] = "pwned\n"
			case "edit_file":
				args["search"], args["replace"] = "SENTINEL", "pwned"
			}
			out, err := invoke(t, env, tool, argsJSON(t, args))
			if codeOf(err) != protocol.CodePathEscape || !strings.Contains(protocol.AsError(err).Message, "changed while it was being opened") {
				t.Errorf("%s through a link swapped in after judging = %+v, %v; want path_escape saying the path changed", tool, out, err)
			}
			if out != nil && strings.Contains(out.Content, "SENTINEL") {
				t.Errorf("%s showed the denied file: %q", tool, out.Content)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "secrets/b.txt")); string(b) != "SENTINEL-SECRET\n" {
				t.Errorf("secrets/b.txt = %q, changed through a link swapped in after judging", b)
			}
		})
	}
}

// TestEnvWriteFileJudgesTheTarget: an embedder's tool writing through
// Env.WriteFile is judged on where a link leads, as write_file is.
func TestEnvWriteFileJudgesTheTarget(t *testing.T) {
	env := newEnv(t)
	env.Judge = policyJudge(linkPolicy(t))
	dir := env.Workspace.Dir()
	if err := os.MkdirAll(filepath.Join(dir, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("private/key.txt", filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WriteFile("notes.txt", []byte("x")); !errors.Is(err, protocol.ErrRefused) {
		t.Fatalf("a write through a link into private/: %v, want refused", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "private", "key.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused write created its target: %v", err)
	}
	changed, err := env.WriteFile("out/report.txt", []byte("done"))
	if err != nil || !changed {
		t.Fatalf("a plain write: changed %v, %v", changed, err)
	}
	if changed, err = env.WriteFile("out/report.txt", []byte("done")); err != nil || changed {
		t.Fatalf("the same bytes again: changed %v, %v; want unchanged", changed, err)
	}
}
