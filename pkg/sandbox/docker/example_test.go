//go:build linux

package docker_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/docker"
)

// A sandboxer's use of the docker backend: remove what a previous process
// left behind, run commands labelled with their run, shut down. It needs a
// Docker engine with the image already built or loaded, so it is compiled
// but not run by go test.
func Example() {
	d, err := docker.New(docker.Config{Image: "harness-sandbox:latest", SandboxerID: "sandboxer-1"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Ping(ctx); err != nil {
		log.Fatal(err) // no engine: fall back to another backend
	}
	liveRuns := map[string]bool{"run-42": true}
	if n, err := d.Reconcile(ctx, func(run string) bool { return liveRuns[run] }); err == nil && n > 0 {
		log.Printf("removed %d leftover containers", n)
	}

	res, err := d.Run(sandbox.WithRun(ctx, "run-42", "op-3"), sandbox.Spec{
		Argv:   []string{"go", "test", "./..."},
		Dir:    os.TempDir(),
		Env:    sandbox.MinimalEnv(),
		Limits: protocol.Limits{WallSecs: 300, MemoryBytes: 1 << 30},
	})
	if err != nil {
		log.Fatal(err) // not started: the image is missing, the program is not in it, ...
	}
	fmt.Println(res.Report.Exited, res.Report.ExitCode, res.Report.CapHit)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.Shutdown(sctx); err != nil {
		log.Print(err)
	}
}
