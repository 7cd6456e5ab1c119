package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestBuildStory checks the timeline of a trace: each call's verdict with
// the rule and layer that decided it (judged again under the policy as the
// trace had it, a remembered rule included), a refused call without its
// content, a call waiting for a person, the change a write makes, and a
// person's decision by name.
func TestBuildStory(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pol := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "ask", Exec: "deny", Net: "deny"},
		Layers: []protocol.Layer{{Name: "house", Rules: []protocol.Rule{
			{Act: "read", Effect: "deny", Pattern: "secret.txt"},
			{Act: "write", Effect: "allow", Pattern: "*.go"},
		}}}}
	call := func(id, name, args string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	recs := []protocol.Record{
		{Kind: protocol.RecordStarted, Run: "r", Time: at, Contract: &protocol.Contract{Task: "fix it", Workspace: protocol.Workspace{Root: "/w"},
			Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 4}, Policy: pol}},
		{Kind: protocol.RecordStep, Run: "r", Step: 1, Time: at, Tokens: 10,
			Turn: &protocol.Turn{Text: "Looking.", ToolCalls: []protocol.ToolCall{
				call("a", "read_file", `{"path":"secret.txt"}`),
				call("b", "write_file", `{"path":"main.go","content":"package main\n"}`),
				call("c", "write_file", `{"path":"notes.txt","content":"x"}`),
				call("s", "spawn_agent", `{"goal":"help"}`),
			}},
			Observations: []protocol.Observation{
				{CallID: "a", Tool: "read_file", Status: protocol.CallRefused, Content: "refused: read secret.txt",
					Refused: &protocol.Refusal{Act: "read", Target: "secret.txt", Effect: "deny", Rule: "secret.txt", Layer: "house"}},
				{CallID: "b", Tool: "write_file", Status: protocol.CallOK, Content: "wrote main.go"},
				{CallID: "c", Tool: "write_file", Approval: "r.1.2", Content: "[awaiting approval]"},
				{CallID: "s", Tool: "spawn_agent", Status: protocol.CallOK, Content: "[child -> success]"},
			}},
		{Kind: protocol.RecordPaused, Run: "r", Step: 1, Time: at, Approval: "r.1.2"},
		{Kind: protocol.RecordDecision, Run: "r", Step: 1, Time: at, Approval: "r.1.2",
			Decision:     &protocol.Decision{Approve: true, Remember: true, By: "console:alice"},
			Remember:     []protocol.Rule{{Act: "write", Effect: "allow", Pattern: "notes.txt"}},
			Observations: []protocol.Observation{{CallID: "c", Tool: "write_file", Status: protocol.CallOK, Content: "wrote notes.txt"}}},
		{Kind: protocol.RecordStep, Run: "r", Step: 2, Time: at,
			Turn:         &protocol.Turn{ToolCalls: []protocol.ToolCall{call("d", "write_file", `{"path":"notes.txt","content":"y"}`)}},
			Observations: []protocol.Observation{{CallID: "d", Tool: "write_file", Status: protocol.CallOK, Content: "wrote notes.txt"}}},
		{Kind: protocol.RecordFinished, Run: "r", Step: 2, Time: at, Outcome: protocol.OutcomeFinished, Reason: "done"},
	}
	st := BuildStory("r", recs)
	var kinds []string
	for _, e := range st.Entries {
		kinds = append(kinds, e.Kind)
	}
	if diff := cmp.Diff([]string{"started", "step", "paused", "decision", "step", "finished"}, kinds); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
	type verdict struct{ Name, Target, Verdict, Rule, Layer, Approval, Output string }
	var got []verdict
	for _, e := range []Entry{st.Entries[1], st.Entries[4]} {
		for _, c := range e.Calls {
			got = append(got, verdict{c.Name, c.Target, c.Verdict, c.Rule, c.Layer, c.Approval, c.Output})
		}
	}
	want := []verdict{
		{"read_file", "secret.txt", "deny", "secret.txt", "house", "", ""},
		{"write_file", "main.go", "allow", "*.go", "house", "", "wrote main.go"},
		{"write_file", "notes.txt", "ask", "", "", "r.1.2", ""},
		{"spawn_agent", "", "coordinator", "", "", "", "[child -> success]"},
		// Remembered by the decision: allowed by the rule it added.
		{"write_file", "notes.txt", "allow", "notes.txt", "remembered", "", "wrote notes.txt"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if c := st.Entries[1].Calls[0]; !c.Refused || c.Output != "" || c.Diff != nil {
		t.Errorf("the refused read = %+v, want refused with no output and no diff", c)
	}
	if d := st.Entries[1].Calls[1].Diff; len(d) != 2 || d[0].Op != "@" || d[1] != (DiffLine{"+", "package main"}) {
		t.Errorf("the write's diff = %+v, want a heading and + package main", d)
	}
	if d := st.Entries[3].Decision; d == nil || !d.Approve || d.By != "console:alice" || !d.Remember || len(d.Calls) != 1 || d.Calls[0].Output != "wrote notes.txt" {
		t.Errorf("the decision = %+v, want approved and remembered by console:alice, with the write performed", d)
	}
	if e := st.Entries[0]; e.Task != "fix it" || e.Workspace != "/w" || e.Budget != "4 steps" {
		t.Errorf("the start = %+v", e)
	}
}

// TestTreeOf checks a run's agent tree is drawn from the run index: the
// root, its sub-agents under it, the run shown marked; a run alone has
// none.
func TestTreeOf(t *testing.T) {
	runs := []protocol.RunState{
		{Run: "root", Tree: "root"},
		{Run: "b", Tree: "root", Parent: "root"},
		{Run: "a", Tree: "root", Parent: "root"},
		{Run: "a1", Tree: "root", Parent: "a"},
		{Run: "other", Tree: "other"},
	}
	tree := treeOf(runs, &runs[3], time.Now())
	var draw func(n *Node, depth int) string
	draw = func(n *Node, depth int) string {
		s := strings.Repeat(" ", depth) + n.ID
		if n.Current {
			s += "*"
		}
		s += "\n"
		for _, c := range n.Children {
			s += draw(c, depth+1)
		}
		return s
	}
	if tree == nil {
		t.Fatal("no tree for a sub-agent's run")
	}
	if got, want := draw(tree, 0), "root\n a\n  a1*\n b\n"; got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
	if tree := treeOf(runs, &runs[4], time.Now()); tree != nil {
		t.Errorf("a run alone has tree %+v, want none", tree)
	}
}
