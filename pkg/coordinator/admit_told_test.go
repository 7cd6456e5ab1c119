package coordinator_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// TestDriverStartsBesideTheIndexEntry holds a new run's first index
// entry, its admission's, until something of the run waits for it: the
// run's driver starts while the entry is written, and nothing it does is
// seen before the entry and the started event (no event, no model call),
// and the submitter's answer comes once the entry is there.
func TestDriverStartsBesideTheIndexEntry(t *testing.T) {
	const run = "told-late"
	waiting := make(chan struct{})
	var waitOnce sync.Once
	t.Cleanup(coordinator.SetAdmissionWaitHook(func(r string) {
		if r == run {
			waitOnce.Do(func() { close(waiting) })
		}
	}))
	var called, calledWhileHeld atomic.Int32
	var held atomic.Bool
	t.Cleanup(coordinator.SetIndexPutHook(func(st *protocol.RunState) error {
		if st.Run != run || !held.CompareAndSwap(false, true) {
			return nil
		}
		// The run's first entry is its admission's.
		select {
		case <-waiting:
		case <-time.After(10 * time.Second):
			t.Error("nothing of the run waited for its admission's index entry: its driver did not start beside it, or did not wait")
		}
		calledWhileHeld.Store(called.Load())
		return nil
	}))
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		called.Add(1)
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl, nc, _ := withTrace(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: agent})
	var mu sync.Mutex
	var kinds []string
	if _, err := nc.Subscribe(wire.Event(run, "*"), func(m *nats.Msg) {
		var ev protocol.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			mu.Lock()
			kinds = append(kinds, ev.Kind)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := sayDone(ws)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	h, err := cl.Submit(ctx, c, harness.WithRunID(run))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Status(ctx); err != nil {
		t.Fatalf("status asked once the submission was answered: %v", err)
	}
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Errorf("run = %s (%s), want finished", res.Outcome, res.Reason)
	}
	if !held.Load() {
		t.Fatal("the run's index entry was never written")
	}
	if n := calledWhileHeld.Load(); n != 0 {
		t.Errorf("the model was called %d times before the run's admission was in the index", n)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) == 0 || kinds[0] != protocol.EventStarted {
		t.Errorf("events = %v, want the started event first", kinds)
	}
}

// TestAdmissionFencedByARecordWrittenMeanwhile appends a run's started
// record, as a coordinator whose lease ran out would have, between the
// admission's read of the trace, made beside its lease, and its own
// started record: that record is fenced off, the contract is taken again,
// and the run is carried on from the trace, with one start.
func TestAdmissionFencedByARecordWrittenMeanwhile(t *testing.T) {
	const run = "admit-fenced"
	ws := t.TempDir()
	c := sayDone(ws)
	var appended atomic.Bool
	var tr atomic.Pointer[trace.Trace]
	t.Cleanup(coordinator.SetReadHook(func(r string) {
		if r != run || !appended.CompareAndSwap(false, true) {
			return
		}
		// As the coordinator that admitted it first would have written
		// it: the contract decoded, its defaults filled in.
		data, err := json.Marshal(c)
		if err != nil {
			t.Error(err)
			return
		}
		decoded, err := protocol.DecodeContract(data)
		if err != nil {
			t.Error(err)
			return
		}
		st := &protocol.Record{Kind: protocol.RecordStarted, Contract: decoded, Coordinator: "gone", Time: time.Now().UTC(), Tree: run}
		if err := tr.Load().Writer(run, 0).Append(t.Context(), st); err != nil {
			t.Error(err)
		}
	}))
	cl, _, written := withTrace(t, harness.Config{AllowFloor: true, Roots: []string{ws},
		Provider: provider.NewScripted(&protocol.Turn{Text: "Done."})})
	tr.Store(written)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	h, err := cl.Submit(ctx, c, harness.WithRunID(run))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !appended.Load() {
		t.Fatal("the admission made no read beside its lease")
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Errorf("run = %s (%s), want finished", res.Outcome, res.Reason)
	}
	recs, _, err := written.Read(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, r := range recs {
		if r.Kind == protocol.RecordStarted {
			starts++
		}
	}
	if starts != 1 || recs[0].Coordinator != "gone" {
		t.Errorf("the trace has %d started records, the first by %q; want the one written meanwhile alone", starts, recs[0].Coordinator)
	}
}
