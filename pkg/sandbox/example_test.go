//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

func ExampleFloor_Run() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	res, err := sandbox.NewFloor().Run(context.Background(), sandbox.Spec{
		Argv:   []string{"sh", "-c", "echo hello; exit 3"},
		Dir:    dir,
		Env:    sandbox.MinimalEnv(),
		Limits: protocol.Limits{WallSecs: 10},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q exited=%v code=%d unenforced=%v\n", res.Stdout, res.Report.Exited, res.Report.ExitCode, res.Report.Unenforced)
	// Output:
	// "hello\n" exited=true code=3 unenforced=[memory pids network]
}

func ExampleMinimalEnv() {
	os.Setenv("OPENAI_API_KEY", "sk-example") // a secret in the sandboxer's environment
	defer os.Unsetenv("OPENAI_API_KEY")
	for _, kv := range sandbox.MinimalEnv("GOFLAGS=-mod=mod") {
		if kv == "GOFLAGS=-mod=mod" || kv == "OPENAI_API_KEY=sk-example" {
			fmt.Println(kv)
		}
	}
	// Output:
	// GOFLAGS=-mod=mod
}
