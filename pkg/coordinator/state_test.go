package coordinator

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/assemble"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func contract(edit func(*protocol.Contract)) *protocol.Contract {
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "fix it", Workspace: protocol.Workspace{Root: "/w"},
		Verification: protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"go", "test"}}},
		Budget:       protocol.Budget{MaxSteps: 3}}
	if edit != nil {
		edit(c)
	}
	return c
}

func started(c *protocol.Contract) protocol.Record {
	return protocol.Record{Kind: protocol.RecordStarted, Contract: c, Time: t0}
}

func step(n int, tokens int64, calls int, check *protocol.CheckResult) protocol.Record {
	turn := &protocol.Turn{Text: "t", Usage: protocol.Usage{InputTokens: tokens}}
	var obs []protocol.Observation
	for i := range calls {
		id := string(rune('a' + i))
		turn.ToolCalls = append(turn.ToolCalls, protocol.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"x"}`)})
		obs = append(obs, protocol.Observation{CallID: id, Tool: "read_file", Content: "x"})
	}
	return protocol.Record{Kind: protocol.RecordStep, Step: n, Turn: turn, Observations: obs, Tokens: tokens, Check: check}
}

func TestRebuildFromTheTrace(t *testing.T) {
	c := contract(nil)
	s1 := step(1, 10, 2, nil)
	s1.Note = "[verification] failed."
	s, err := newRunState("r", []protocol.Record{started(c), s1, step(2, 30, 0, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if s.step != 2 || s.tokens != 30 || s.finished != nil {
		t.Fatalf("state = step %d tokens %d, want step 2 tokens 30", s.step, s.tokens)
	}
	msgs := assemble.Assemble(s.assembleInput(inputs{})).Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role+":"+m.ToolCallID)
	}
	want := []string{"user:", "assistant:", "tool:a", "tool:b", "user:", "assistant:"}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(msgs[0].Content, "Task: fix it") || !strings.Contains(msgs[0].Content, "`go test`") {
		t.Errorf("first message = %q, want the task and the check", msgs[0].Content)
	}
}

func TestRebuildRefusesDamage(t *testing.T) {
	c := contract(nil)
	for name, recs := range map[string][]protocol.Record{
		"no records":       nil,
		"no started first": {step(1, 1, 0, nil)},
		"a step skipped":   {started(c), step(2, 1, 0, nil)},
		"a step repeated":  {started(c), step(1, 1, 0, nil), step(1, 1, 0, nil)},
	} {
		if _, err := newRunState("r", recs); !errors.Is(err, protocol.ErrInternal) {
			t.Errorf("%s: newRunState = %v, want a damaged-trace error", name, err)
		}
	}
}

func TestNote(t *testing.T) {
	s, _ := newRunState("r", []protocol.Record{started(contract(nil))})
	quiet := &protocol.Record{Kind: protocol.RecordStep, Step: 1, Turn: &protocol.Turn{}, Check: &protocol.CheckResult{Detail: "`go test` exited 1 (expected 0)."}}
	if n := s.note(quiet); !strings.Contains(n, "called no tool") || !strings.Contains(n, "exited 1") {
		t.Errorf("note = %q, want the reminder and the failed check", n)
	}
	passing := step(1, 1, 1, &protocol.CheckResult{Passed: true})
	if n := s.note(&passing); n != "" {
		t.Errorf("note after a passing step = %q, want none", n)
	}
}

// TestStall folds repeated, unproductive steps: a re-plan once the window
// is full and a signature repeats, then a stop; a change clears it.
func TestStall(t *testing.T) {
	spec := &protocol.StallSpec{Window: 3, MaxReplans: 1}
	same := step(1, 1, 1, nil) // read_file x, every time
	var st stallState
	var got []stallVerdict
	for range 6 {
		var v stallVerdict
		st, v, _ = nextStall(st, spec, &same)
		got = append(got, v)
	}
	want := []stallVerdict{stallFine, stallFine, stallReplan, stallFine, stallFine, stallStopped}
	if !cmp.Equal(got, want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
	changed := step(1, 1, 1, nil)
	changed.Observations[0].Tool, changed.Observations[0].Changed = "write_file", true
	st, v, _ := nextStall(stallState{window: []string{"a", "b"}}, spec, &changed)
	if v != stallFine || len(st.window) != 0 {
		t.Errorf("a changing step left %v, %v; want the window cleared", st, v)
	}
	execd := step(1, 1, 1, nil)
	execd.Observations[0].Tool, execd.Observations[0].Changed = "exec", true
	if st, _, _ := nextStall(stallState{window: []string{"a"}}, spec, &execd); len(st.window) != 2 {
		t.Errorf("an exec cleared the window: %v", st)
	}
	if _, v, _ := nextStall(stallState{window: []string{signature(same.Turn), signature(same.Turn)}}, &protocol.StallSpec{}, &same); v != stallFine {
		t.Errorf("a window of 0 still detected a stall")
	}
}

// TestWirePolicyFollowsThePolicy makes the wire form the step tasks and
// sandbox ops carry once per policy, and again whenever the driver's
// policy is replaced, as a person's remembered approval replaces it.
func TestWirePolicyFollowsThePolicy(t *testing.T) {
	d := &driver{pol: policy.Default()}
	first := d.wirePolicy()
	if d.wirePolicy() != first {
		t.Error("the wire form was made again for the same policy")
	}
	if !reflect.DeepEqual(first, d.pol.Protocol()) {
		t.Errorf("wire form = %+v, want the policy's own", first)
	}
	allow := policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: "api.example.com:443"}
	d.pol = d.pol.Remember(allow)
	got := d.wirePolicy()
	if got == first || !reflect.DeepEqual(got, d.pol.Protocol()) {
		t.Fatalf("after a remembered rule the wire form = %+v, want the new policy's", got)
	}
	top := got.Layers[len(got.Layers)-1]
	if top.Name != "remembered" || len(top.Rules) != 1 || top.Rules[0].Pattern != allow.Pattern {
		t.Errorf("the wire form's top layer = %+v, want the remembered allow", top)
	}
}
