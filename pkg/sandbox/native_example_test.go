//go:build linux && (amd64 || arm64)

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// ExampleNewNative runs one command in the native sandbox, falling back to
// the floor where this machine cannot run it. The program's main (here
// TestMain) calls sandbox.RunShimIfRequested first thing.
func ExampleNewNative() {
	var b sandbox.Backend
	n, err := sandbox.NewNative(sandbox.NativeConfig{})
	switch {
	case errors.Is(err, sandbox.ErrNativeUnavailable):
		fmt.Fprintln(os.Stderr, "falling back to the floor:", err)
		b = sandbox.NewFloor()
	case err != nil:
		panic(err)
	default:
		defer n.Close()
		b = n
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	res, err := b.Run(context.Background(), sandbox.Spec{
		Argv:   []string{"sh", "-c", "echo hello > greeting; cat greeting; exit 3"},
		Dir:    dir,
		Env:    sandbox.MinimalEnv(),
		Limits: protocol.Limits{WallSecs: 10, MemoryBytes: 256 << 20},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q exited=%v code=%d\n", res.Stdout, res.Report.Exited, res.Report.ExitCode)
	// Output:
	// "hello\n" exited=true code=3
}
