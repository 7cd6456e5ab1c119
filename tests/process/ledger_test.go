package process

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestLedgerCrashBeforeSettle kills the coordinator process after a
// provider call answered and before its draw was settled; the coordinator
// that takes the run over settles that same call once, so the run is
// charged exactly what its trace says.
func TestLedgerCrashBeforeSettle(t *testing.T) {
	bin := roleBinaries(t)
	rs := redistest.Start(t)
	l := clustertest.RedisLedger(t, rs)
	cassette := recordSlow(t)
	url, c := serverAndClient(t)
	ws := clustertest.ExampleWorkspace(t)
	env := []string{"NATS_URL=" + url, "REDIS_URL=" + rs.URL()}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	first := startProcess(t, filepath.Join(bin, "coordinator"), append(env, "HARNESS_FAULT=before-settle:2"), "--id", "first")
	if _, err := clustertest.SubmitJSON(t.Context(), c, slowContract(t, ws), "unsettled"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	select {
	case err := <-done:
		if ws, ok := first.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the first coordinator ended with %v, want killed at before-settle", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the first coordinator never reached its second settle")
	}
	// The second call's reservation is held and its turn is durable.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if tot, err := l.Totals(ctx, "unsettled"); err != nil || tot.Reserved.Steps != 1 || tot.Spent.Steps != 1 {
		t.Fatalf("after the crash the ledger shows %+v, %v; want one call spent and one held", tot, err)
	}
	startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "second")
	res, err := c.Run("unsettled").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 {
		t.Fatalf("run = %s after %d (%s), want success after 3", res.Outcome, res.Steps, res.Reason)
	}
	recs, err := c.Run("unsettled").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckTrace(t, recs, res)
	clustertest.CheckCharged(t, l, "unsettled", recs)
	// The second step acts on the call made before the crash: no new
	// attempt, so no second payment.
	if d := recs[2].Draws; len(d) != 1 || d[0].Key != "unsettled.2.1" {
		t.Errorf("step 2 draws %+v, want the one call unsettled.2.1", d)
	}
}
