package trace_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// TestDecideOnlyWhatExists accepts a decision for an action that is
// pending, or that the run has reached, and refuses one for anything else
// with a coded error, writing nothing.
func TestDecideOnlyWhatExists(t *testing.T) {
	js, tr, _ := open(t)
	ctx := t.Context()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "approvals"})
	if err != nil {
		t.Fatal(err)
	}
	a := trace.NewApprovals(kv, tr)
	w := tr.Writer("r", 0)
	appendRec := func(rec *protocol.Record) {
		t.Helper()
		if err := w.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	appendRec(&protocol.Record{Kind: protocol.RecordStarted, Contract: &protocol.Contract{Task: "t"}})
	// Step 1 deferred its first call; the pause is not recorded yet.
	appendRec(&protocol.Record{Kind: protocol.RecordStep, Step: 1, Observations: []protocol.Observation{{CallID: "c", Approval: "r.1.0"}}})

	decide := func(id string, want error) {
		t.Helper()
		_, err := a.Decide(ctx, id, &protocol.Decision{Approve: true, By: "alice"})
		switch {
		case want == nil && err != nil:
			t.Errorf("Decide(%s) = %v, want accepted", id, err)
		case want != nil && !errors.Is(err, want):
			t.Errorf("Decide(%s) = %v, want %v", id, err, want)
		case want != nil:
			if _, gerr := a.Get(ctx, id); !errors.Is(gerr, protocol.ErrUnknownRun) && !errors.Is(want, protocol.ErrRunFinished) {
				t.Errorf("a refused decision on %s was written: %v", id, gerr)
			}
		}
	}
	decide("nobody.1.0", protocol.ErrUnknownRun) // no such run
	decide("r.3.0", protocol.ErrUnknownRun)      // a step the run has not reached
	decide("r.1.1", protocol.ErrUnknownRun)      // a past step's call that asked nobody
	decide("r.0.0", protocol.ErrUnknownRun)      // a provider endpoint nobody asked about
	decide("r.1.0", nil)                         // deferred, its pause not seen yet
	decide("r.2.0", nil)                         // early, for the step in hand
	decide("r.2.0", protocol.ErrRunFinished)     // already decided
	if ap, err := a.Get(ctx, "r.2.0"); err != nil || ap.Decision == nil || ap.Decision.By != "alice" {
		t.Errorf("approval r.2.0 = %+v, %v; want decided by alice", ap, err)
	}

	// Paused, the run takes no step: the next one is not reached.
	appendRec(&protocol.Record{Kind: protocol.RecordPaused, Step: 1, Approval: "r.1.0"})
	decide("r.2.1", protocol.ErrUnknownRun)
	// A provider endpoint that waits is decided like any pending action.
	if _, err := a.Defer(ctx, "r.0.0", &protocol.Pending{Run: "r", Step: 1, Act: "net", Target: "api.example.com:443"}); err != nil {
		t.Fatal(err)
	}
	decide("r.0.0", nil)

	if _, err := a.Defer(ctx, "r.1.2", &protocol.Pending{Run: "r", Step: 1, Call: 2}); err != nil {
		t.Fatal(err)
	}
	appendRec(&protocol.Record{Kind: protocol.RecordFinished, Step: 1, Outcome: protocol.OutcomeCancelled})
	decide("r.1.2", protocol.ErrRunFinished) // pending, but the run is over
	decide("r.x.0", protocol.ErrInvalidField)
}
