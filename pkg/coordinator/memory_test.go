package coordinator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// says reports whether any message of req holds text: which run a
// scripted agent answers, whatever the request's assembly puts first.
func says(req *protocol.CompletionRequest, text string) bool {
	return slices.ContainsFunc(req.Messages, func(m protocol.Message) bool { return strings.Contains(m.Content, text) })
}

// answered reports whether req carries the results of tool calls.
func answered(req *protocol.CompletionRequest) bool {
	return slices.ContainsFunc(req.Messages, func(m protocol.Message) bool { return m.Role == protocol.RoleTool })
}

func remember(id, args string) protocol.ToolCall {
	return protocol.ToolCall{ID: id, Name: coordinator.RememberTool, Arguments: json.RawMessage(args)}
}

// startedOf returns the started record of h's run.
func startedOf(t *testing.T, h *harness.RunHandle) *protocol.Record {
	t.Helper()
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0].Kind != protocol.RecordStarted {
		t.Fatalf("the trace of %s does not begin with a started record", h.ID())
	}
	return &recs[0]
}

func memoryBucket(t *testing.T, cl *harness.Cluster) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), wire.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestRememberReachesTheNextRun: a run whose policy denies every act
// remembers a note into a full memory (the oldest note is evicted, and
// the model and the memory event say so) and has a malformed call refused;
// the next run on the same workspace starts with the note in its started
// record, attributed to the run and step that wrote it.
func TestRememberReachesTheNextRun(t *testing.T) {
	ws := t.TempDir()
	var mu sync.Mutex
	var offered []string
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch {
		case says(req, "remember the test command") && !answered(req):
			mu.Lock()
			for _, tl := range req.Tools {
				offered = append(offered, tl.Name)
			}
			mu.Unlock()
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{
				remember("r1", `{"key":"test command","value":"go test ./... (needs no network)"}`),
				remember("r2", `{"key":"half"}`),
			}}, nil
		default:
			return &protocol.Turn{Text: "done"}, nil
		}
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	store := memory.New(memoryBucket(t, cl))
	workspace := protocol.Workspace{Root: ws}
	for i := range memory.MaxNotes {
		if _, err := store.Put(t.Context(), workspace, protocol.Note{Key: fmt.Sprintf("old%02d", i), Value: "v"}); err != nil {
			t.Fatal(err)
		}
	}
	events, err := cl.Conn().SubscribeSync(wire.Event("mem-1", protocol.EventMemory))
	if err != nil {
		t.Fatal(err)
	}

	c := contract(ws)
	c.Task = "remember the test command"
	c.Policy = &protocol.Policy{Defaults: &protocol.Defaults{Read: "deny", Write: "deny", Exec: "deny", Net: "deny"}}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("mem-1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("the remembering run = %s (%s), want finished", res.Outcome, res.Reason)
	}
	mu.Lock()
	if !slices.Contains(offered, coordinator.RememberTool) {
		t.Errorf("the tools offered were %v, without %s", offered, coordinator.RememberTool)
	}
	mu.Unlock()
	kept := observation(t, h, "r1")
	if kept == nil || kept.IsError || kept.State() != protocol.CallOK ||
		!strings.Contains(kept.Content, `[remembered] "test command"`) || !strings.Contains(kept.Content, `"old00"`) || strings.Contains(kept.Content, "mem-1") {
		t.Errorf("the remember call's observation = %+v, want it kept, naming the evicted old00 and not the run", kept)
	}
	bad := observation(t, h, "r2")
	if bad == nil || !bad.IsError || !strings.Contains(bad.Content, "[remember refused]") {
		t.Errorf("the call without a value = %+v, want it refused", bad)
	}
	msg, err := events.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no memory event: %v", err)
	}
	var ev protocol.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil || ev.Kind != protocol.EventMemory || ev.Target != "test command" || ev.Step != 1 ||
		!strings.Contains(ev.Text, "old00") {
		t.Errorf("memory event = %s, want the key at step 1 and old00 evicted", msg.Data)
	}
	if msg, err := events.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("a second memory event for a refused call: %s", msg.Data)
	}

	c2 := contract(ws)
	c2.Task = "read what was remembered"
	h2, err := cl.Submit(t.Context(), c2, harness.WithRunID("mem-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	notes := startedOf(t, h2).Memory
	if len(notes) != memory.MaxNotes || notes[0].Key != "old01" {
		t.Fatalf("the next run started with %d notes from %v, want %d from old01", len(notes), keysOf(notes), memory.MaxNotes)
	}
	got := notes[len(notes)-1]
	if got.Key != "test command" || got.Value != "go test ./... (needs no network)" || got.Run != "mem-1" || got.Step != 1 || got.Time.IsZero() {
		t.Errorf("the newest note = %+v, want test command from mem-1 step 1", got)
	}
	if first := startedOf(t, h).Memory; len(first) != memory.MaxNotes || first[memory.MaxNotes-1].Key != "old63" {
		t.Errorf("the remembering run started with %v, want the notes as they were before it", keysOf(first))
	}
}

func keysOf(notes []protocol.Note) []string {
	var ks []string
	for _, n := range notes {
		ks = append(ks, n.Key)
	}
	return ks
}

// TestSubAgentStartsWithItsTreesNotes: a note its parent remembered before
// spawning it is in a sub-agent's started record: the agents of a tree
// share the workspace's memory.
func TestSubAgentStartsWithItsTreesNotes(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch {
		case says(req, "Task: the child part"):
			if answered(req) {
				return &protocol.Turn{Text: "done"}, nil
			}
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file", Arguments: json.RawMessage(`{"path":"child.txt","content":"ok"}`)}}}, nil
		case says(req, "[child "), says(req, "-> success"):
			return &protocol.Turn{Text: "done"}, nil
		case answered(req):
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "s", Name: coordinator.SpawnTool,
				Arguments: json.RawMessage(`{"goal":"the child part","verify_file":"child.txt","verify_contains":"ok","max_steps":3}`)}}}, nil
		default:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{remember("m", `{"key":"layout","value":"the code is in src/"}`)}}, nil
		}
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	c := contract(ws)
	c.Task = "the parent part"
	c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("tree-1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("the parent = %s (%s), want finished", res.Outcome, res.Reason)
	}
	runs, err := cl.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var child string
	for _, st := range runs {
		if st.Parent == "tree-1" {
			child = st.Run
		}
	}
	if child == "" {
		t.Fatal("the parent started no sub-agent")
	}
	notes := startedOf(t, cl.Run(child)).Memory
	if len(notes) != 1 || notes[0].Key != "layout" || notes[0].Run != "tree-1" {
		t.Errorf("the sub-agent started with %+v, want its parent's layout note", notes)
	}
}

// TestRunStartsWithoutItsMemory: with the memory bucket gone, a run is
// admitted without notes and its remember call fails as an observation;
// the run itself goes on to its end.
func TestRunStartsWithoutItsMemory(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if answered(req) {
			return &protocol.Turn{Text: "done"}, nil
		}
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{remember("m", `{"key":"k","value":"v"}`)}}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(t.Context(), wire.BucketMemory); err != nil {
		t.Fatal(err)
	}
	h, err := cl.Submit(t.Context(), contract(ws), harness.WithRunID("no-memory"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("the run = %s (%s), want finished", res.Outcome, res.Reason)
	}
	if notes := startedOf(t, h).Memory; len(notes) != 0 {
		t.Errorf("started with notes %v from a memory that is gone", keysOf(notes))
	}
	if o := observation(t, h, "m"); o == nil || !o.IsError || !strings.Contains(o.Content, "[remember failed]") {
		t.Errorf("the remember call = %+v, want it failed", o)
	}
}

// TestNoteOutlivesTheCluster remembers a note in one run, stops the whole
// embedded cluster, starts it again on the same data (another coordinator,
// another NATS server process state read back from disk), and runs again
// on the same workspace: the first request of the second run carries the
// note, and the second run's coordinator is not the first's.
func TestNoteOutlivesTheCluster(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	first := provider.NewScripted(
		&protocol.Turn{ToolCalls: []protocol.ToolCall{remember("m", `{"key":"test command","value":"go test -count=1 ./... is the one to trust"}`)}},
		&protocol.Turn{Text: "noted"},
	)
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: first, NoTakeover: true, DataDir: data})
	h, err := cl.Submit(t.Context(), contract(ws), harness.WithRunID("writes-a-note"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("first run = %+v, %v; want finished", res, err)
	}
	before := startedOf(t, h).Coordinator
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var firstRequest *protocol.CompletionRequest
	second := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		mu.Lock()
		defer mu.Unlock()
		if call == 1 {
			firstRequest = req
		}
		return &protocol.Turn{Text: "done"}, nil
	})
	cl = clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: second, NoTakeover: true, DataDir: data})
	h, err = cl.Submit(t.Context(), contract(ws), harness.WithRunID("reads-the-note"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("second run = %+v, %v; want finished", res, err)
	}
	if after := startedOf(t, h).Coordinator; after == before || after == "" {
		t.Errorf("both runs were admitted by coordinator %q, want two", after)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstRequest == nil || !says(firstRequest, "go test -count=1 ./... is the one to trust") {
		t.Fatalf("the second run's first request does not carry the note: %+v", firstRequest)
	}
}
