package harness_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/mcptest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// TestMain lets the native sandbox re-execute this test binary as its init,
// as the harness binaries' mains do, and the MCP tests start it as their
// server.
func TestMain(m *testing.M) {
	native.RunShimIfRequested()
	mcptest.ServeIfRequested()
	os.Exit(m.Run())
}

// TestExampleInTheNativeSandbox runs the example with its verification,
// `go test ./...`, inside the native sandbox: the Go toolchain works there,
// and the trace says which backend ran it.
func TestExampleInTheNativeSandbox(t *testing.T) {
	bs, _, err := backends.Build(t.Context(), "native", backends.Options{GoCache: backends.UserGoCache(os.Getenv)}, slog.New(slog.DiscardHandler))
	if err != nil {
		if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no native sandbox here (HARNESS_REQUIRE_NATIVE=1 makes this a failure): %v", err)
	}
	c := clustertest.ExampleContract(t)
	c.Sandbox.Backend = "native"
	replay := clustertest.ExampleReplay(t)
	data := t.TempDir()
	res, err := harness.Run(t.Context(), c, harness.WithProvider(replay), harness.WithDataDir(data), harness.WithBackends(bs...), harness.WithRunID("native"))
	if err != nil {
		t.Fatal(err)
	}
	recs := clustertest.ReadTrace(t, data, "native")
	if res.Outcome != protocol.OutcomeSuccess {
		for _, r := range recs {
			if r.Check != nil {
				t.Logf("step %d check: %s\n%s", r.Step, r.Check.Detail, r.Check.Output)
			}
		}
		t.Fatalf("example in the native sandbox = %s (%s), want success", res.Outcome, res.Reason)
	}
	if chk := recs[3].Check; chk == nil || chk.Exec == nil || chk.Exec.Backend != "native" {
		t.Errorf("the passing check ran on %+v, want the native backend", chk)
	}
}
