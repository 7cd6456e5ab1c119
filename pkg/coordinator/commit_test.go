package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// reader reads notes/<call>.txt for its first reads calls, then stops.
func reader(reads int) *provider.Scripted {
	return provider.NewScriptedFunc(func(_ *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if call > reads {
			return &protocol.Turn{Text: "Done."}, nil
		}
		args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("notes/%d.txt", call)})
		return &protocol.Turn{Text: "Reading.", ToolCalls: []protocol.ToolCall{{ID: fmt.Sprint(call), Name: "read_file", Arguments: args}}}, nil
	})
}

func readerCluster(t *testing.T, reads int) (*harness.Cluster, *protocol.Contract) {
	return readerClusterOn(t, reads, nil)
}

func readerClusterOn(t *testing.T, reads int, l ledger.Ledger) (*harness.Cluster, *protocol.Contract) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= reads; i++ {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("notes/%d.txt", i)), []byte("a note\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: reader(reads), Ledger: l})
	return cl, &protocol.Contract{Schema: protocol.ContractSchema, Task: "Read the notes.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: reads + 2},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
}

// TestNextRequestGoesOutWhileTheStepCommits holds the write of step 2's
// record and shows both halves of the commit's overlap: the next step's
// request goes out and its turn comes back meanwhile, and nothing of step
// 3 is acted on, or told, until step 2 is in the trace.
func TestNextRequestGoesOutWhileTheStepCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(coordinator.SetCommitHook(func(rec *protocol.Record) error {
		if rec.Kind == protocol.RecordStep && rec.Step == 2 {
			close(holding)
			<-release
		}
		return nil
	}))
	cl, c := readerCluster(t, 3)
	t.Cleanup(free) // before the cluster's own
	run := protocol.RunIDFor(harness.NewRunID())

	events := make(chan *nats.Msg, 256)
	sub, err := cl.Conn().ChanSubscribe(wire.EventsPrefix+run+".>", events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	turns := make(chan *nats.Msg, 16)
	tsub, err := cl.Conn().ChanSubscribe(wire.TurnsPrefix+run+".3.>", turns)
	if err != nil {
		t.Fatal(err)
	}
	defer tsub.Unsubscribe()

	h, err := cl.Submit(ctx, c, harness.WithRunID(run))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-holding:
	case <-ctx.Done():
		t.Fatal("step 2's record was never written")
	}
	select {
	case <-turns: // step 3's request went out, and was answered, while step 2's record waits
	case <-ctx.Done():
		t.Fatal("no request for step 3 went out while step 2's record was written")
	}
	// The turn is durable and the coordinator has it: were it acted on
	// before step 2 is in the trace, its events would follow at once.
	var seen []string
	quiet := time.NewTimer(300 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case m := <-events:
			var ev protocol.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, fmt.Sprintf("%s:%d", ev.Kind, ev.Step))
			if ev.Step == 3 || (ev.Step == 2 && ev.Kind == protocol.EventStep) {
				t.Fatalf("%s of step %d told before step 2's record was written (events %v)", ev.Kind, ev.Step, seen)
			}
		case <-quiet.C:
			waiting = false
		}
	}
	if recs, err := cl.Run(run).Trace(ctx); err != nil {
		t.Fatal(err)
	} else if last := recs[len(recs)-1]; last.Kind != protocol.RecordStep || last.Step != 1 {
		t.Fatalf("the trace ends with %s %d while step 2's record is held, want step 1", last.Kind, last.Step)
	}
	free()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 4 {
		t.Fatalf("run = %s after %d steps (%s), want finished after 4", res.Outcome, res.Steps, res.Reason)
	}
	// Step 3's events, held while step 2 was written, come after its
	// step event, in order.
	for m := range drain(events) {
		var ev protocol.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, fmt.Sprintf("%s:%d", ev.Kind, ev.Step))
	}
	at := func(e string) int {
		for i, s := range seen {
			if s == e {
				return i
			}
		}
		t.Fatalf("no %s among the events %v", e, seen)
		return 0
	}
	if !(at("step:2") < at("assembled:3") && at("assembled:3") < at("turn:3") && at("turn:3") < at("tool_call:3")) {
		t.Errorf("events out of order: %v", seen)
	}
}

// runToEnd submits c and waits for its result.
func runToEnd(ctx context.Context, t *testing.T, cl *harness.Cluster, c *protocol.Contract) *protocol.Result {
	t.Helper()
	h, err := cl.Submit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// drain yields what ch holds now.
func drain(ch chan *nats.Msg) func(func(*nats.Msg) bool) {
	return func(yield func(*nats.Msg) bool) {
		for {
			select {
			case m := <-ch:
				if !yield(m) {
					return
				}
			default:
				return
			}
		}
	}
}

// TestStepWhoseRecordCannotBeWrittenIsNotCounted fails the write of step
// 2's record after the next request went out: the run finishes failed,
// saying why, its outcome counting the one step its trace holds.
func TestStepWhoseRecordCannotBeWrittenIsNotCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	t.Cleanup(coordinator.SetCommitHook(func(rec *protocol.Record) error {
		if rec.Kind == protocol.RecordStep && rec.Step == 2 {
			return errors.New("the disk is full")
		}
		return nil
	}))
	cl, c := readerCluster(t, 3)
	res := runToEnd(ctx, t, cl, c)
	if res.Outcome != protocol.OutcomeFailed || !strings.Contains(res.Reason, "the trace could not be written: the disk is full") {
		t.Fatalf("run = %s (%s), want failed for the trace", res.Outcome, res.Reason)
	}
	if res.Steps != 1 {
		t.Errorf("the outcome counts %d steps, want the 1 its trace holds", res.Steps)
	}
	recs, err := cl.Run(res.Run).Trace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, fmt.Sprintf("%s:%d", r.Kind, r.Step))
	}
	if got := strings.Join(kinds, " "); !strings.HasSuffix(got, "step:1 finished:1") {
		t.Errorf("trace = %s, want it to end with step 1 and the outcome", got)
	}
	if fin := recs[len(recs)-1]; len(fin.Draws) == 0 {
		t.Error("the outcome keeps no draw of the step that was not written: the ledger charged it")
	}
}

// TestFencedCommitLeavesNothingHeld fences off step 2's write once, as
// another coordinator taking the run over would, after the next step's
// task went out under a reservation: the driver stops without holding
// it, and the run, taken over once its lease lapses, finishes with the
// ledger holding nothing and charging what its trace drew.
func TestFencedCommitLeavesNothingHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var fenced atomic.Bool
	t.Cleanup(coordinator.SetCommitHook(func(rec *protocol.Record) error {
		if rec.Kind == protocol.RecordStep && rec.Step == 2 && fenced.CompareAndSwap(false, true) {
			return protocol.Errorf(protocol.CodeFenced, "run %s was advanced by another writer; this one must stop", rec.Run)
		}
		return nil
	}))
	l := ledger.NewMemory()
	cl, c := readerClusterOn(t, 3, l)
	res := runToEnd(ctx, t, cl, c)
	if !fenced.Load() || res.Outcome != protocol.OutcomeFinished || res.Steps != 4 {
		t.Fatalf("run = %s after %d steps (%s), fenced %v; want finished after 4, once fenced", res.Outcome, res.Steps, res.Reason, fenced.Load())
	}
	recs, err := cl.Run(res.Run).Trace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckCharged(t, l, res.Run, recs)
}
