package git

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestEnvKeepsNothingOfTheCallers checks that the environment of the
// harness's git drops every GIT_* variable and the home, pager and editor
// the sandboxer's command environment has, and sets the identity only
// when there is one.
func TestEnvKeepsNothingOfTheCallers(t *testing.T) {
	cmdEnv := []string{"PATH=/usr/bin", "GIT_DIR=/elsewhere", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=/evil",
		"HOME=/home/me", "XDG_CONFIG_HOME=/home/me/.config", "PAGER=less", "EDITOR=vi", "VISUAL=vi", "LANG=C.UTF-8"}
	env := Env(cmdEnv, Identity{}, "GIT_DIR=/ours")
	for _, kv := range env {
		switch {
		case kv == "GIT_DIR=/elsewhere", strings.HasPrefix(kv, "GIT_CONFIG_COUNT"), strings.HasPrefix(kv, "GIT_CONFIG_KEY"), kv == "HOME=/home/me",
			strings.HasPrefix(kv, "XDG_CONFIG_HOME=/home"), kv == "PAGER=less", kv == "EDITOR=vi", kv == "VISUAL=vi", strings.HasPrefix(kv, "GIT_AUTHOR"):
			t.Errorf("Env kept %q", kv)
		}
	}
	for _, want := range []string{"PATH=/usr/bin", "LANG=C.UTF-8", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=false", "GIT_DIR=/ours"} {
		if !slices.Contains(env, want) {
			t.Errorf("Env lacks %q: %q", want, env)
		}
	}
	signed := Env(nil, Identity{Name: "Ada", Email: "ada@example.com"})
	for _, want := range []string{"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com"} {
		if !slices.Contains(signed, want) {
			t.Errorf("Env with an identity lacks %q", want)
		}
	}
	o := strings.Join(Overrides(), " ")
	for _, want := range []string{"core.hooksPath=/dev/null", "core.fsmonitor=false", "protocol.allow=never", "diff.external=", "diff.ignoreSubmodules=all"} {
		if !strings.Contains(o, "-c "+want) {
			t.Errorf("Overrides lack %s", want)
		}
	}
	if id, err := IdentityOf(&protocol.GitSpec{Author: "Ada <ada@example.com>"}); err != nil || id != (Identity{Name: "Ada", Email: "ada@example.com"}) {
		t.Errorf("IdentityOf = %+v, %v", id, err)
	}
	if _, err := IdentityOf(&protocol.GitSpec{Author: "Ada"}); err == nil {
		t.Error("IdentityOf(Ada) = ok, want an error")
	}
}

// TestReadHead follows only what git's files backend writes.
func TestReadHead(t *testing.T) {
	const id = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
	tests := []struct {
		name  string
		files map[string]string
		want  Head
		bad   string
	}{
		{"loose branch", map[string]string{"HEAD": "ref: refs/heads/main\n", "refs/heads/main": id + "\n"}, Head{Ref: "refs/heads/main", Parent: id}, ""},
		{"packed branch", map[string]string{"HEAD": "ref: refs/heads/main\n", "packed-refs": "# pack-refs with: peeled\n" + id + " refs/heads/main\n"}, Head{Ref: "refs/heads/main", Parent: id}, ""},
		{"unborn branch", map[string]string{"HEAD": "ref: refs/heads/trunk\n"}, Head{Ref: "refs/heads/trunk"}, ""},
		{"detached", map[string]string{"HEAD": id + "\n"}, Head{Ref: "HEAD", Parent: id}, ""},
		{"a ref out of refs/heads", map[string]string{"HEAD": "ref: refs/../../config\n"}, Head{}, "not a branch"},
		{"a tag", map[string]string{"HEAD": "ref: refs/tags/v1\n"}, Head{}, "not a branch"},
		{"garbage in the ref", map[string]string{"HEAD": "ref: refs/heads/main\n", "refs/heads/main": "not an id\n"}, Head{}, "no commit id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{".git/objects", ".git/refs/heads"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, ".git", name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			h, err := ReadHead(root)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Errorf("ReadHead = %+v, %v; want an error saying %q", h, err, tt.bad)
				}
				return
			}
			if err != nil || h != tt.want {
				t.Errorf("ReadHead = %+v, %v; want %+v", h, err, tt.want)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	if _, err := ReadHead(root); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("ReadHead of a gitdir file = %v, want refused", err)
	}
}
