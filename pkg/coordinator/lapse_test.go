package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestRunTakenAsTheHeartbeatLapsesIsKept lapses the coordinator's
// heartbeat just before it admits a run, so that taking the run's lease
// is what finds the lapse and begins a new epoch. The run taken under the
// new epoch is kept, though the renewal after it sees a lapse happened:
// only the run held under the old epoch is let go, and taken back. Both
// finish. (A coordinator that let go of every run at the renewal dropped
// the new one too, whose lease stayed alive with the heartbeat: nobody
// took it, and it stayed running for good.)
func TestRunTakenAsTheHeartbeatLapsesIsKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var skew time.Duration
	t.Cleanup(coordinator.SetLeaseClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(skew)
	}))
	ws := t.TempDir()
	agent := &heldProvider{all: make(chan struct{}), answer: make(chan struct{}), n: 2}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, Concurrency: 4})
	_, assets := streamsOf(t, cl)
	beats, err := assets.Leases.Watch(ctx, "coordinator.>", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = beats.Stop() }()
	renewal := func() {
		t.Helper()
		for {
			select {
			case e := <-beats.Updates():
				if e != nil {
					return
				}
			case <-ctx.Done():
				t.Fatal("no renewal of the heartbeat")
			}
		}
	}

	old, err := cl.Submit(ctx, contract(ws), harness.WithRunID("lapse-old"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if w := gauge(t, cl, "harness_coordinator_runs_waiting"); w != 1 {
			return fmt.Errorf("runs waiting = %v, want the first run", w)
		}
		return nil
	})
	// Just after a renewal the next is a third of the TTL away: the clock
	// jumps a whole TTL now, and the next beat is the admission's.
	renewal()
	mu.Lock()
	skew = coordinator.DefaultLeaseTTL
	mu.Unlock()
	fresh, err := cl.Submit(ctx, contract(ws), harness.WithRunID("lapse-new"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-agent.all:
	case <-ctx.Done():
		t.Fatal("the second run never asked the model")
	}
	// Two renewals after the run was taken: the coordinator has seen the
	// lapse by then, however it looks for one.
	renewal()
	renewal()
	close(agent.answer)
	for _, h := range []*harness.RunHandle{old, fresh} {
		res, err := h.Wait(ctx)
		if err != nil {
			t.Fatalf("run %s: %v (still running: let go of and never taken back)", h.ID(), err)
		}
		if res.Outcome != protocol.OutcomeFinished {
			t.Errorf("run %s = %s (%s), want finished", h.ID(), res.Outcome, res.Reason)
		}
	}
}
