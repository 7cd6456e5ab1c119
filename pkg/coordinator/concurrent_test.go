package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/trace"
)

// spawnPart asks for a sub-agent that writes name.txt.
func spawnPart(id, name string) protocol.ToolCall {
	return protocol.ToolCall{ID: id, Name: "spawn_agent",
		Arguments: json.RawMessage(fmt.Sprintf(`{"goal":"part %s","verify_file":"%s.txt","verify_contains":"ok","max_steps":2}`, name, name))}
}

// partOf returns the name of the part a sub-agent's task asks for, or "".
func partOf(req *protocol.CompletionRequest) string {
	task := req.Messages[0].Content
	if !strings.Contains(task, "Task: part ") {
		return ""
	}
	return strings.Fields(strings.SplitN(task, "part ", 2)[1])[0]
}

// writePart is a sub-agent's turn: it writes the file its check reads.
func writePart(name string) *protocol.Turn {
	return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file",
		Arguments: json.RawMessage(`{"path":"` + name + `.txt","content":"ok"}`)}}}
}

// treeRecord is a started or finished record of the trace, in the order
// the trace stream holds them.
type treeRecord struct {
	kind, run, tree string
}

// traceOrder reads every started and finished record of the trace stream
// in the stream's order: one total order of every run's start and
// finish, whichever coordinator wrote them, with no clock in it.
func traceOrder(t *testing.T, cl *harness.Cluster) []treeRecord {
	t.Helper()
	ctx := t.Context()
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, trace.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []treeRecord
	for seq := uint64(0); seq < info.State.LastSeq; {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("read the trace stream at %d of %d: %v", seq, info.State.LastSeq, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		seq = meta.Sequence.Stream
		var rec protocol.Record
		if err := json.Unmarshal(msg.Data(), &rec); err != nil {
			continue
		}
		if rec.Kind == protocol.RecordStarted || rec.Kind == protocol.RecordFinished {
			out = append(out, treeRecord{rec.Kind, rec.Run, rec.Tree})
		}
	}
	return out
}

// mostAtOnce is the most runs of tree that had started and not finished
// at any one point of the trace's order.
func mostAtOnce(recs []treeRecord, tree string) int {
	in := map[string]bool{}
	running, most := 0, 0
	for _, r := range recs {
		switch {
		case r.kind == protocol.RecordStarted && r.tree == tree:
			in[r.run] = true
			running++
		case r.kind == protocol.RecordFinished && in[r.run]:
			delete(in, r.run)
			running--
		}
		most = max(most, running)
	}
	return most
}

// TestConcurrentCapQueuesSpawns has a root whose tree may run two agents
// at once ask for four sub-agents in one turn: none is refused; they run
// one at a time beside the root, each started only once the one before
// it finished, as the trace's own order shows; each does its part, and the
// root hears the four outcomes in the order it asked. So it goes on the
// embedded ledger and on Redis.
func TestConcurrentCapQueuesSpawns(t *testing.T) {
	for _, tt := range []struct {
		name string
		led  func(t *testing.T) ledger.Ledger
	}{
		{"memory", func(*testing.T) ledger.Ledger { return ledger.NewMemory() }},
		{"redis", func(t *testing.T) ledger.Ledger { return clustertest.RedisLedger(t, redistest.Start(t)) }},
	} {
		t.Run(tt.name, func(t *testing.T) { testCapQueuesSpawns(t, tt.led(t)) })
	}
}

func testCapQueuesSpawns(t *testing.T, led ledger.Ledger) {
	const children = 4
	ws := t.TempDir()
	var mu sync.Mutex
	var heard []string
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if name := partOf(req); name != "" {
			return writePart(name), nil
		}
		if answered(req) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range req.Messages {
				if m.Role == protocol.RoleTool {
					heard = append(heard, m.Content)
				}
			}
			return &protocol.Turn{Text: "done"}, nil
		}
		var calls []protocol.ToolCall
		for k := range children {
			calls = append(calls, spawnPart(fmt.Sprintf("s%d", k), fmt.Sprintf("c%d", k)))
		}
		return &protocol.Turn{ToolCalls: calls}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, Ledger: led})
	c := contract(ws)
	c.Task = "parent"
	c.Budget.MaxSteps = 3
	c.Budget.Tree = &protocol.TreeBudget{MaxAgents: children + 1, MaxSteps: 20, MaxConcurrent: 2}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("two-at-once"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("parent = %s (%s), want finished", res.Outcome, res.Reason)
	}

	order := traceOrder(t, cl)
	if most := mostAtOnce(order, h.ID()); most != 2 {
		t.Errorf("at most %d agents of the tree ran at once, want 2 (the root and one sub-agent): %v", most, order)
	}
	started := 0
	for _, r := range order {
		if r.kind == protocol.RecordStarted && r.tree == h.ID() && r.run != h.ID() {
			started++
		}
	}
	if started != children {
		t.Errorf("%d sub-agents started, want %d", started, children)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != children {
		t.Fatalf("the parent heard %d outcomes, want %d: %q", len(heard), children, heard)
	}
	for k, o := range heard {
		if !strings.Contains(o, fmt.Sprintf("part c%d", k)) || !strings.Contains(o, "-> success") {
			t.Errorf("outcome %d = %q, want part c%d's success, in the order asked", k, o, k)
		}
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("c%d.txt", k))); err != nil {
			t.Errorf("sub-agent c%d wrote nothing: %v", k, err)
		}
	}
	// No sub-agent holds a place once it finished, nor waits for one.
	tot, err := led.Totals(t.Context(), h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(tot.Places, func(a string) bool { return a != h.ID() }) || tot.Queued != nil {
		t.Errorf("after the tree finished, places %q and queue %q; want no sub-agent in either", tot.Places, tot.Queued)
	}
}

// TestConcurrentQueuedSpawnLeavesOnCancel cancels a root while one of its
// sub-agents runs and the next waits for a place: the waiting spawn
// leaves the queue and its sub-agent is never submitted.
func TestConcurrentQueuedSpawnLeavesOnCancel(t *testing.T) {
	ws := t.TempDir()
	began := make(chan struct{}, 1)
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch partOf(req) {
		case "":
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{spawnPart("s0", "held"), spawnPart("s1", "waits")}}, nil
		case "held":
			began <- struct{}{}
			return nil, errors.New("unreachable") // the blocking provider below answers this one
		}
		return writePart(partOf(req)), nil
	})
	led := ledger.NewMemory()
	blocking := &blockPart{next: agent, part: "held", began: began}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: blocking, NoTakeover: true, Ledger: led})
	c := contract(ws)
	c.Task = "parent"
	c.Budget.MaxSteps = 3
	c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 3, MaxSteps: 20, MaxConcurrent: 2}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("cancelled-in-queue"))
	if err != nil {
		t.Fatal(err)
	}
	<-began
	var waiting string
	testkit.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		tot, err := led.Totals(t.Context(), h.ID())
		if err != nil {
			return err
		}
		if len(tot.Queued) != 1 {
			return fmt.Errorf("queue %q, want the second sub-agent in it", tot.Queued)
		}
		waiting = tot.Queued[0]
		return nil
	})
	if _, err := h.Cancel(t.Context(), "test", "stop the tree"); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("root after the cancel = %+v, %v; want cancelled", res, err)
	}
	tot, err := led.Totals(t.Context(), h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tot.Queued, waiting) || slices.Contains(tot.Places, waiting) {
		t.Errorf("after the cancel, places %q and queue %q; want %s in neither", tot.Places, tot.Queued, waiting)
	}
	if _, err := cl.Run(waiting).Status(t.Context()); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("Status of the spawn that waited = %v, want ErrUnknownRun: it was never submitted", err)
	}
}

// blockPart answers the first call of the sub-agent doing part only when
// its call is abandoned, after reporting it began; every other call goes
// to next.
type blockPart struct {
	next  provider.Provider
	part  string
	began chan struct{}
}

func (b *blockPart) Name() string { return "block" }

func (b *blockPart) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	if partOf(req) != b.part {
		return b.next.Complete(ctx, req)
	}
	b.began <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestConcurrentSubAgentGivesItsPlaceBack has a root whose tree may run
// two agents at once spawn a sub-agent that spawns one of its own: the
// sub-agent gives its place back while it waits, so the grandchild runs
// (root and sub-agent holding both places, it would wait for ever), and
// the sub-agent takes a place again to finish its part.
func TestConcurrentSubAgentGivesItsPlaceBack(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch name := partOf(req); {
		case name == "" && !answered(req):
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{spawnPart("s0", "mid")}}, nil
		case name == "":
			return &protocol.Turn{Text: "done"}, nil
		case name == "mid" && !answered(req):
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{spawnPart("s0", "leaf")}}, nil
		default:
			return writePart(name), nil
		}
	})
	led := ledger.NewMemory()
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, Ledger: led})
	c := contract(ws)
	c.Task = "parent"
	c.Budget.MaxSteps = 3
	c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 3, MaxSteps: 20, MaxConcurrent: 2}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("nested"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatalf("the tree did not finish: %v", err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("parent = %s (%s), want finished", res.Outcome, res.Reason)
	}
	runs, err := cl.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, st := range runs {
		if st.Tree == h.ID() && st.Run != h.ID() {
			if st.Outcome != protocol.OutcomeSuccess {
				t.Errorf("sub-agent %s = %s (%s), want success", st.Run, st.Outcome, st.Reason)
			}
			done++
		}
	}
	if done != 2 {
		t.Errorf("%d sub-agents ran, want the sub-agent and its own", done)
	}
}
