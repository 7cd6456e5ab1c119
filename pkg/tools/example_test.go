//go:build unix

package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

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
