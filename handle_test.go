package harness_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestRunHandle drives one run through its handle on a started cluster:
// Submit with an observer, Wait to the pause, Decide refused for another
// run's approval, Resume with the decision, then Trace, Patch and Status;
// and checks the typed status of every observation, in the trace and in
// the observed events, against what each call really met.
func TestRunHandle(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(id, name, args string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	agent := provider.NewScripted(
		&protocol.Turn{ToolCalls: []protocol.ToolCall{
			call("ok", "read_file", `{"path":"notes.txt"}`),
			call("bad", "read_file", `{"path":5}`),
			call("refused", "write_file", `{"path":"secret.txt","content":"x"}`),
			call("unknown", "no_such_tool", `{}`),
		}},
		&protocol.Turn{ToolCalls: []protocol.ToolCall{
			call("asks", "write_file", `{"path":"out.txt","content":"done\n"}`),
			call("after", "read_file", `{"path":"notes.txt"}`),
		}},
		&protocol.Turn{Text: "done"},
	)
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: agent, NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := &protocol.Contract{Task: "look, then write out.txt", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "out.txt", Needle: "done"}},
		Policy: &protocol.Policy{
			Layers:   []protocol.Layer{{Name: "t", Rules: []protocol.Rule{{Act: "write", Effect: "deny", Pattern: "secret.txt"}}}},
			Defaults: &protocol.Defaults{Read: "allow", Write: "ask", Exec: "deny", Net: "deny"}}}

	var mu sync.Mutex
	observed := map[protocol.CallStatus]int{}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("handle"), harness.WithObserver(func(ev *protocol.Event) {
		if ev.Kind == protocol.EventObserved {
			mu.Lock()
			observed[ev.Status]++
			mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if h.ID() != protocol.RunIDFor("handle") {
		t.Fatalf("handle id = %q, want %q", h.ID(), protocol.RunIDFor("handle"))
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("first wait = %s (%s), want awaiting_approval", res.Outcome, res.Reason)
	}
	mu.Lock()
	want := map[protocol.CallStatus]int{protocol.CallOK: 1, protocol.CallFailed: 2, protocol.CallRefused: 1, protocol.CallAwaitingApproval: 1, protocol.CallNotRun: 1}
	for s, n := range want {
		if s != protocol.CallNotRun && observed[s] != n { // an unrun call is not observed
			t.Errorf("observed events with status %q: %d, want %d (all: %v)", s, observed[s], n, observed)
		}
	}
	mu.Unlock()

	approval := protocol.ApprovalID(h.ID(), 2, 0)
	if _, err := h.Decide(t.Context(), protocol.ApprovalID("another", 2, 0), &protocol.Decision{Approve: true}); !errors.Is(err, protocol.ErrInvalidField) {
		t.Errorf("deciding another run's approval through this handle = %v, want invalid_field", err)
	}
	res, err = cl.Run(h.ID()).Resume(t.Context(), harness.WithDecision(approval, &protocol.Decision{Approve: true, By: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("resumed = %s (%s), want success", res.Outcome, res.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]protocol.CallStatus{}
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.Status == "" {
				t.Errorf("step %d call %s has no status", r.Step, o.CallID)
			}
			if r.Kind == protocol.RecordStep {
				got[o.CallID] = o.Status
			} else {
				got[r.Kind+" "+o.Tool] = o.Status
			}
		}
	}
	for id, s := range map[string]protocol.CallStatus{"ok": protocol.CallOK, "bad": protocol.CallFailed, "refused": protocol.CallRefused,
		"unknown": protocol.CallFailed, "asks": protocol.CallAwaitingApproval, "after": protocol.CallNotRun, protocol.RecordDecision + " write_file": protocol.CallOK} {
		if got[id] != s {
			t.Errorf("call %s: status %q, want %q (all: %v)", id, got[id], s, got)
		}
	}
	if _, _, err := h.Patch(t.Context()); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("Patch of a run in a directory = %v, want not_found", err)
	}
	st, err := h.Status(t.Context())
	if err != nil || st.Outcome != protocol.OutcomeSuccess {
		t.Errorf("Status = %+v, %v; want success", st, err)
	}
	if _, err := cl.Run("no-such-run").Status(t.Context()); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("Status of a typo'd id = %v, want unknown_run", err)
	}
	if _, err := cl.Run("no-such-run").Resume(t.Context()); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("Resume of a typo'd id = %v, want unknown_run", err)
	}
}
