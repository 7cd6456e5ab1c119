//go:build linux && (amd64 || arm64)

package native

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/sandbox"
)

// BenchmarkNativeTrue measures a request to /bin/true through the native
// backend, from Run to its return: the sandbox's cgroups given their
// caps, its root completed with the workspace, the command confined, run
// and reaped, and whatever it left in the sandbox killed and reaped (the
// init's exit, the unmounting and the cgroups' removal follow in the
// background, as Run leaves them). Compare BenchmarkForkExecTrue of
// package floor, a plain fork/exec (go test -bench . ./pkg/sandbox/...
// runs both). Besides the mean it reports the median and the 99th
// percentile.
//
//   - idle: each request finds the warm pool full and at rest (no shim
//     being started), as when an agent's commands come between model
//     calls (the pause to refill is not timed);
//   - back-to-back: requests follow each other at once, so that the pool's
//     refill competes with them for the CPUs;
//   - cold: no warm pool; every request starts the sandbox's init.
//
// Each runs with harness-sandbox-init as the sandbox's init (init/...), as
// a sandboxer with it beside runs, and with the running program, this
// test binary, instead (self/...), as one without it runs; a sandboxer's
// own binary is several times this one's size and start-up.
func BenchmarkNativeTrue(b *testing.B) {
	for _, init := range []string{"init", "self"} {
		for _, bb := range []struct {
			name string
			warm int
			idle bool
		}{{"idle", 0, true}, {"back-to-back", 0, false}, {"cold", -1, false}} {
			b.Run(init+"/"+bb.name, func(b *testing.B) {
				cfg := Config{Warm: bb.warm}
				if init == "init" {
					cfg.Init = BuiltInit(b)
				}
				n, err := New(cfg)
				if err != nil {
					if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
						b.Fatal(err)
					}
					b.Skip(err)
				}
				defer n.Close()
				spec := sandbox.Spec{Argv: []string{"/bin/true"}, Dir: b.TempDir(), Env: sandbox.MinimalEnv()}
				var took []time.Duration
				for b.Loop() {
					if bb.idle {
						b.StopTimer()
						// Full, every root assembled, and no shim being started.
						for len(n.warm) < cap(n.warm) || !n.parked.Load() {
							time.Sleep(time.Millisecond)
						}
						b.StartTimer()
					}
					start := time.Now()
					if res, err := n.Run(context.Background(), spec); err != nil || !res.Report.Exited {
						b.Fatalf("Run(/bin/true) = %v, %v", res, err)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}
