//go:build linux

package floor_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
)

func ExampleBackend_Run() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	res, err := floor.New().Run(context.Background(), sandbox.Spec{
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
