//go:build unix

package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/tools"
)

func ExampleBuiltins() {
	dir, _ := os.MkdirTemp("", "workspace")
	defer os.RemoveAll(dir)
	w, err := tools.OpenWorkspace(dir)
	if err != nil {
		panic(err)
	}
	defer w.Close()
	env := &tools.Env{
		Workspace: w,
		Sandbox:   floor.New(),
		CmdEnv:    sandbox.MinimalEnv(),
		Limits:    protocol.Limits{WallSecs: 60},
	}
	set := tools.Builtins()
	fmt.Println(set.Names())
	for _, call := range []struct{ name, args string }{
		{"write_file", `{"path":"hello.txt","content":"hello\n"}`},
		{"write_file", `{"path":"hello.txt","content":"hello\n"}`},
		{"exec", `{"argv":["cat","hello.txt"]}`},
		{"read_file", `{"path":"../etc/passwd"}`},
	} {
		tool, _ := set.Get(call.name)
		out, err := tool.Invoke(context.Background(), env, json.RawMessage(call.args))
		if err != nil {
			fmt.Println("error:", protocol.AsError(err).Message)
			continue
		}
		fmt.Printf("%s (changed %v)\n", out.Content, out.Changed)
	}
	// Output:
	// [grep find read_file write_file edit_file exec]
	// created hello.txt (6 bytes) (changed true)
	// identical: hello.txt already holds these 6 bytes; the workspace did not change (changed false)
	// [stdout]
	// hello
	// [exit 0]
	// [unsandboxed: the sandboxer's operator runs commands on the floor backend, with no isolation] (changed true)
	// error: the path "../etc/passwd" climbs out of the workspace with ".."; use a path relative to the workspace root that stays inside it
}

// ExampleGit stages and commits a file in a fresh repository under the
// identity the contract gives (Env.GitAuthor), and shows that a flag given
// as a path is only a file name. It needs git installed.
func ExampleGit() {
	dir, _ := os.MkdirTemp("", "repo")
	defer os.RemoveAll(dir)
	initRepo := exec.Command("git", "init", "-q", "--template=", dir)
	initRepo.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=" + os.Getenv("PATH")}
	if err := initRepo.Run(); err != nil {
		panic(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\n"), 0o644)
	w, err := tools.OpenWorkspace(dir)
	if err != nil {
		panic(err)
	}
	defer w.Close()
	env := &tools.Env{Workspace: w, Sandbox: floor.New(), CmdEnv: sandbox.MinimalEnv(), GitAuthor: "Review Bot <bot@example.com>"}
	set := tools.Git()
	fmt.Println(set.Names())
	for _, call := range []struct{ name, args string }{
		{"git_add", `{"paths":["hello.txt"]}`},
		{"git_commit", `{"message":"Say hello"}`},
		{"git_add", `{"paths":["--upload-pack=touch pwned"]}`},
	} {
		tool, _ := set.Get(call.name)
		out, err := tool.Invoke(context.Background(), env, json.RawMessage(call.args))
		if err != nil {
			fmt.Println("error:", protocol.AsError(err).Message)
			continue
		}
		if call.name == "git_commit" { // the id differs on every run
			_, out.Content, _ = strings.Cut(out.Content, "\n")
		}
		fmt.Print(out.Content)
	}
	// Output:
	// [git_status git_diff git_log git_add git_commit]
	// Staged 1 file(s) for the next git_commit:
	//   hello.txt
	// Author: Review Bot <bot@example.com>
	// 1 file(s):
	//   hello.txt
	// Nothing to stage: the paths hold no change git would record (unchanged, already staged, or ignored).
}
