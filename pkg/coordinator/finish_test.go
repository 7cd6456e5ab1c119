package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestFinishReasonsActedOn scripts a model whose first turn is cut off at
// its output limit inside a write, whose second is a refusal that also
// calls a tool, whose third pauses (Anthropic's pause_turn) without a
// call, and whose fourth ends: neither write is carried out, each call's
// observation says why, the pause does not end the run, and the run
// finishes at the fourth turn.
func TestFinishReasonsActedOn(t *testing.T) {
	ws := t.TempDir()
	write := func(id, path string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: "write_file", Arguments: json.RawMessage(`{"path":"` + path + `","content":"x"}`)}
	}
	agent := provider.NewScripted(
		&protocol.Turn{FinishReason: "length", ToolCalls: []protocol.ToolCall{write("cut", "cut.txt")}},
		&protocol.Turn{FinishReason: "refusal", Text: "I won't.", ToolCalls: []protocol.ToolCall{write("refused", "refused.txt")}},
		&protocol.Turn{FinishReason: "pause_turn", Text: "searching…"},
		&protocol.Turn{FinishReason: "end_turn", Text: "done"},
	)
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	c := &protocol.Contract{Task: "write nothing", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 6},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("finishes"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 4 {
		t.Fatalf("run = %s after %d steps (%s), want finished after 4 (the pause carried on)", res.Outcome, res.Steps, res.Reason)
	}
	for _, f := range []string{"cut.txt", "refused.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
			t.Errorf("%s was written by a call that should not have run", f)
		}
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.CallID == "cut" || o.CallID == "refused" {
				seen++
				if o.State() != protocol.CallNotRun {
					t.Errorf("call %s: %s (%s), want not_run", o.CallID, o.State(), o.Content)
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d observations of the two unrun calls, want 2", seen)
	}
}
