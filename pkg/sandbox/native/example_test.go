//go:build linux && (amd64 || arm64)

package native_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// ExampleNew runs one command in the native sandbox, falling back to the
// floor where this machine cannot run it. The program's main (here
// TestMain) calls native.RunShimIfRequested first thing.
func ExampleNew() {
	var b sandbox.Backend
	n, err := native.New(native.Config{})
	switch {
	case errors.Is(err, native.ErrUnavailable):
		fmt.Fprintln(os.Stderr, "falling back to the floor:", err)
		b = floor.New()
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
