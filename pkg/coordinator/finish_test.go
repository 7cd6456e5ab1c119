package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestFinishReasonsActedOn scripts a model whose first turn is cut off at
// its output limit inside a write, whose second pauses (Anthropic's
// pause_turn) without a call, whose third is cut off in its text, and
// whose fourth ends: the write is not carried out and its observation
// says why, neither the pause nor the cut text ends the run (the model is
// told to go on after the cut), and the run finishes at the fourth turn.
func TestFinishReasonsActedOn(t *testing.T) {
	ws := t.TempDir()
	var mu sync.Mutex // the scripted provider answers on the worker's goroutine
	var sent []*protocol.CompletionRequest
	turns := []*protocol.Turn{
		{FinishReason: "length", ToolCalls: []protocol.ToolCall{write("cut", "cut.txt")}},
		{FinishReason: "pause_turn", Text: "searching…"},
		{FinishReason: "max_tokens", Text: "The answer is a long"},
		{FinishReason: "end_turn", Text: "done"},
	}
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, req)
		return turns[call-1], nil
	})
	res, h := runNone(t, ws, agent, "finishes")
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 4 {
		t.Fatalf("run = %s after %d steps (%s), want finished after 4 (the pause and the cut carried on)", res.Outcome, res.Steps, res.Reason)
	}
	if _, err := os.Stat(filepath.Join(ws, "cut.txt")); err == nil {
		t.Errorf("cut.txt was written by a call cut off at the token limit")
	}
	if obs := observation(t, h, "cut"); obs == nil || obs.State() != protocol.CallNotRun {
		t.Errorf("the cut call's observation = %+v, want not_run", obs)
	}
	mu.Lock()
	defer mu.Unlock()
	// After the pause the transcript ends with the paused turn, as the
	// provider continues it; after the cut the model is told to go on.
	if last := lastMessage(sent[2]); last.Role != protocol.RoleAssistant || last.Content != "searching…" {
		t.Errorf("the request after the pause ends with %s %q, want the paused turn as it stood", last.Role, last.Content)
	}
	if last := lastMessage(sent[3]); last.Role != protocol.RoleUser || !strings.Contains(last.Content, "cut off") {
		t.Errorf("the request after the cut ends with %s %q, want a note that the answer was cut off", last.Role, last.Content)
	}
}

// TestRefusalEndsARunWithoutACheck: a refusal is the model's last word in
// a run with no check, with an outcome of its own, and its call is not
// carried out.
func TestRefusalEndsARunWithoutACheck(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScripted(
		&protocol.Turn{FinishReason: "refusal", Text: "I can't help with that.", ToolCalls: []protocol.ToolCall{write("refused", "refused.txt")}},
		&protocol.Turn{FinishReason: "end_turn", Text: "unreached"},
	)
	res, h := runNone(t, ws, agent, "refuses")
	if res.Outcome != protocol.OutcomeModelRefused || res.Steps != 1 || !strings.Contains(res.Reason, "I can't help with that.") {
		t.Fatalf("run = %s after %d steps (%s), want model_refused after 1 quoting the refusal", res.Outcome, res.Steps, res.Reason)
	}
	if _, err := os.Stat(filepath.Join(ws, "refused.txt")); err == nil {
		t.Errorf("refused.txt was written by a refusal's call")
	}
	if obs := observation(t, h, "refused"); obs == nil || obs.State() != protocol.CallNotRun {
		t.Errorf("the refusal's call observation = %+v, want not_run", obs)
	}
}

// TestRefusalToldOnceWithACheck: in a run with a check, the first refusal
// is reported to the model, which may go on; a second ends the run, and
// no refusal's call is carried out.
func TestRefusalToldOnceWithACheck(t *testing.T) {
	for _, tt := range []struct {
		name    string
		second  *protocol.Turn
		outcome protocol.Outcome
		steps   int
	}{
		{"refuses again", &protocol.Turn{FinishReason: "refusal", Text: "Still no."}, protocol.OutcomeModelRefused, 2},
		{"talked round", &protocol.Turn{FinishReason: "tool_use", ToolCalls: []protocol.ToolCall{write("w", "done.txt")}}, protocol.OutcomeSuccess, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			var mu sync.Mutex // the scripted provider answers on the worker's goroutine
			var sent []*protocol.CompletionRequest
			turns := []*protocol.Turn{
				{FinishReason: "refusal", Text: "No.", ToolCalls: []protocol.ToolCall{write("r", "refused.txt")}},
				tt.second,
			}
			agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, req)
				return turns[call-1], nil
			})
			cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
			c := contract(ws)
			c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "done.txt", Needle: "x"}}
			h, err := cl.Submit(t.Context(), c, harness.WithRunID("told-once"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.outcome || res.Steps != tt.steps {
				t.Fatalf("run = %s after %d steps (%s), want %s after %d", res.Outcome, res.Steps, res.Reason, tt.outcome, tt.steps)
			}
			if _, err := os.Stat(filepath.Join(ws, "refused.txt")); err == nil {
				t.Errorf("refused.txt was written by a refusal's call")
			}
			mu.Lock()
			defer mu.Unlock()
			if last := lastMessage(sent[1]); last.Role != protocol.RoleUser || !strings.Contains(last.Content, "[refusal]") {
				t.Errorf("the request after the refusal ends with %s %q, want the refusal note", last.Role, last.Content)
			}
		})
	}
}

func write(id, path string) protocol.ToolCall {
	return protocol.ToolCall{ID: id, Name: "write_file", Arguments: json.RawMessage(`{"path":"` + path + `","content":"x"}`)}
}

func contract(ws string) *protocol.Contract {
	return &protocol.Contract{Task: "write nothing", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 6},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
}

// runNone runs a verification-free contract on ws under id to its end.
func runNone(t *testing.T, ws string, agent provider.Provider, id string) (*protocol.Result, *harness.RunHandle) {
	t.Helper()
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	h, err := cl.Submit(t.Context(), contract(ws), harness.WithRunID(id))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res, h
}

// observation returns the observation of the call with id in h's trace.
func observation(t *testing.T, h *harness.RunHandle, id string) *protocol.Observation {
	t.Helper()
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.CallID == id {
				return &o
			}
		}
	}
	return nil
}

// observations returns every observation in h's trace, in order.
func observations(t *testing.T, h *harness.RunHandle) []protocol.Observation {
	t.Helper()
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var obs []protocol.Observation
	for _, r := range recs {
		obs = append(obs, r.Observations...)
	}
	return obs
}

func lastMessage(req *protocol.CompletionRequest) protocol.Message {
	return req.Messages[len(req.Messages)-1]
}
