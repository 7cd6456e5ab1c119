package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/tools"
)

// A hand-made run "r": each step makes the calls given, uses 10 input and
// 5 output tokens, costs 3 micros and draws it under r.STEP.1.

func call(id, tool, args string) protocol.ToolCall {
	return protocol.ToolCall{ID: id, Name: tool, Arguments: json.RawMessage(args)}
}

func ok(c protocol.ToolCall, content string) protocol.Observation {
	return protocol.Observation{CallID: c.ID, Tool: c.Name, Status: protocol.CallOK, Content: content}
}

func step(n int, calls []protocol.ToolCall, obs ...protocol.Observation) protocol.Record {
	return protocol.Record{Kind: protocol.RecordStep, Step: n, Tokens: 15 * int64(n),
		Turn:         &protocol.Turn{ToolCalls: calls, Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5}},
		Observations: obs,
		Cost:         &protocol.Cost{Model: "m", Micros: 3, Priced: true, TotalMicros: 3 * int64(n)},
		Draws:        []protocol.Draw{{Key: fmt.Sprintf("r.%d.1", n), Spend: protocol.Spend{InputTokens: 10, OutputTokens: 5, CostMicros: 3, Steps: 1}}}}
}

var (
	addOne  = call("e1", "edit_file", `{"path":"log.txt","search":"END","replace":"line-one\nEND"}`)
	readLog = call("l1", "read_file", `{"path":"log.txt"}`)
	addTwo  = call("e2", "edit_file", `{"path":"log.txt","search":"END","replace":"line-two\nEND"}`)
)

// soundTrace is a finished run of three steps, one call each.
func soundTrace() ([]protocol.Record, *protocol.RunState) {
	recs := []protocol.Record{
		{Kind: protocol.RecordStarted, Contract: &protocol.Contract{Task: "t"}},
		step(1, []protocol.ToolCall{addOne}, ok(addOne, "edited")),
		step(2, []protocol.ToolCall{readLog}, ok(readLog, "")),
		step(3, []protocol.ToolCall{addTwo}, ok(addTwo, "edited")),
		{Kind: protocol.RecordFinished, Step: 3, Outcome: protocol.OutcomeSuccess, Tokens: 45},
	}
	return recs, &protocol.RunState{Run: "r", Status: protocol.StatusCompleted, Outcome: protocol.OutcomeSuccess, Step: 3, Tokens: 45, CostMicros: 9}
}

// TestCheckShape flags each way a trace can be misshapen, and nothing in
// a sound one.
func TestCheckShape(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(recs []protocol.Record, st *protocol.RunState) []protocol.Record
		want  string // in a finding; "" for none
	}{
		{name: "sound", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record { return r }},
		{name: "a repeated step", want: "record 2 is step 1 after step 1", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			return append(r[:2:2], append([]protocol.Record{step(1, []protocol.ToolCall{addOne}, ok(addOne, "edited"))}, r[2:]...)...)
		}},
		{name: "a skipped step", want: "record 2 is step 3 after step 1", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			return append(r[:2:2], r[3:]...)
		}},
		{name: "a missing observation", want: "step 2 lacks its turn or an observation per call", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			r[2].Observations = nil
			return r
		}},
		{name: "an observation of another call", want: `step 3 observation 0 answers "l1", not "e2"`, spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			r[3].Observations[0].CallID = "l1"
			return r
		}},
		{name: "a second started record", want: "record 2 is a second started record", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			r[2] = r[0]
			return r
		}},
		{name: "a finished record before the end", want: "record 1 is a finished record before the end", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			return append([]protocol.Record{r[0], r[4]}, r[1:]...)
		}},
		{name: "a decision for a step not taken", want: "(decision) is for step 4, after step 3", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			return append(r[:4:4], protocol.Record{Kind: protocol.RecordDecision, Step: 4}, r[4])
		}},
		{name: "no started record", want: "does not begin with a started record", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			return r[1:]
		}},
		{name: "the status says another step", want: "the status says success at step 4", spoil: func(r []protocol.Record, st *protocol.RunState) []protocol.Record {
			st.Step = 4
			return r
		}},
		{name: "no finished record", want: "the trace ends with step", spoil: func(r []protocol.Record, _ *protocol.RunState) []protocol.Record {
			return r[:4]
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs, st := soundTrace()
			recs = tt.spoil(recs, st)
			expect(t, CheckShape(recs, st), tt.want)
		})
	}
}

// TestCheckSpend flags a running total, a price or a status that does not
// add up over the committed steps.
func TestCheckSpend(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(recs []protocol.Record, st *protocol.RunState)
		want  string
	}{
		{name: "sound", spoil: func([]protocol.Record, *protocol.RunState) {}},
		{name: "a running token total off", want: "step 2 records 31 tokens so far, the steps sum to 30",
			spoil: func(r []protocol.Record, _ *protocol.RunState) { r[2].Tokens = 31 }},
		{name: "a step unpriced", want: "step 3 has no priced cost",
			spoil: func(r []protocol.Record, _ *protocol.RunState) { r[3].Cost.Priced = false }},
		{name: "a running cost off", want: "step 2 records 7 micros so far, the steps sum to 6",
			spoil: func(r []protocol.Record, _ *protocol.RunState) { r[2].Cost.TotalMicros = 7 }},
		{name: "the status charged twice", want: "the status says 60 tokens and 9 micros; the committed steps sum to 45 and 9",
			spoil: func(_ []protocol.Record, st *protocol.RunState) { st.Tokens = 60 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs, st := soundTrace()
			tt.spoil(recs, st)
			expect(t, CheckSpend(st, recs), tt.want)
		})
	}
}

// TestCheckLedger holds a memory ledger against the trace: a draw recorded
// twice, a step with no draw, a reservation still held and a charge the
// trace does not explain are each flagged.
func TestCheckLedger(t *testing.T) {
	spend := ledger.Usage{InputTokens: 10, OutputTokens: 5, CostMicros: 3, Steps: 1}
	for _, tt := range []struct {
		name   string
		spoil  func(recs []protocol.Record) []protocol.Record
		settle []ledger.Usage // what the ledger settles for r.1.1, r.2.1, ...
		hold   bool           // a reservation left held
		want   string
	}{
		{name: "sound", settle: []ledger.Usage{spend, spend, spend}},
		{name: "a draw recorded twice", settle: []ledger.Usage{spend, spend, spend}, want: "the draw r.1.1 is recorded twice",
			spoil: func(r []protocol.Record) []protocol.Record {
				r[2].Draws = append(r[2].Draws, r[1].Draws[0])
				return r
			}},
		{name: "a step without a draw", settle: []ledger.Usage{spend, spend, spend}, want: "step 3 records no draw",
			spoil: func(r []protocol.Record) []protocol.Record {
				r[3].Draws = nil
				return r
			}},
		{name: "a call charged twice", settle: []ledger.Usage{spend, spend, spend.Add(spend)}, want: "the ledger charged",
			spoil: func(r []protocol.Record) []protocol.Record { return r }},
		{name: "a reservation left held", settle: []ledger.Usage{spend, spend, spend}, hold: true, want: "the ledger still holds",
			spoil: func(r []protocol.Record) []protocol.Record { return r }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			l := ledger.NewMemory()
			if err := l.Open(ctx, "r", ledger.Ceiling{}); err != nil {
				t.Fatal(err)
			}
			if err := l.Register(ctx, "r", "r", 0); err != nil {
				t.Fatal(err)
			}
			for i, u := range tt.settle {
				draw(t, l, fmt.Sprintf("r.%d.1", i+1), u, true)
			}
			if tt.hold {
				draw(t, l, "r.4.1", spend, false)
			}
			recs, _ := soundTrace()
			if tt.spoil != nil {
				recs = tt.spoil(recs)
			}
			expect(t, CheckLedger(ctx, l, "r", recs), tt.want)
		})
	}
}

// draw reserves u under key on tree r, and settles it when settle is set.
func draw(t *testing.T, l ledger.Ledger, key string, u ledger.Usage, settle bool) {
	t.Helper()
	if _, err := l.Reserve(t.Context(), ledger.Reservation{Tree: "r", Agent: "r", Key: key, Estimate: u}); err != nil {
		t.Fatal(err)
	}
	if !settle {
		return
	}
	if _, err := l.Settle(t.Context(), "r", key, u); err != nil {
		t.Fatal(err)
	}
}

// TestReplay replays hand-made traces onto the fault runs' workspace: the
// trace explains the workspace its changes give, not one with a change
// twice or missing; a cut-off change explains the workspace with it or
// without it; a read that saw other content than the replay does, or a
// refused call that took effect, explains nothing; a person's rewrite is
// what is replayed.
func TestReplay(t *testing.T) {
	initial := map[string]string{"log.txt": "END\n"}
	both := map[string]string{"log.txt": "line-one\nline-two\nEND\n"}
	sawOne := readAs(t, map[string]string{"log.txt": "line-one\nEND\n"}, readLog)
	trace := func(second protocol.Observation, read string) []protocol.Record {
		recs, _ := soundTrace()
		recs[2].Observations[0].Content = read
		recs[3].Observations[0] = second
		return recs
	}
	cutOff := protocol.Observation{CallID: "e2", Tool: "edit_file", Status: protocol.CallIndeterminate, Content: "[indeterminate] cut off"}
	refused := protocol.Observation{CallID: "e2", Tool: "edit_file", Status: protocol.CallRefused, Refused: &protocol.Refusal{Act: "write"}}
	for _, tt := range []struct {
		name      string
		recs      []protocol.Record
		final     map[string]string
		explained bool
	}{
		{"each change once", trace(ok(addTwo, "edited"), sawOne), both, true},
		{"a change twice", trace(ok(addTwo, "edited"), sawOne), map[string]string{"log.txt": "line-one\nline-two\nline-two\nEND\n"}, false},
		{"a change missing", trace(ok(addTwo, "edited"), sawOne), map[string]string{"log.txt": "line-one\nEND\n"}, false},
		{"a cut-off change that landed", trace(cutOff, sawOne), both, true},
		{"a cut-off change that did not", trace(cutOff, sawOne), map[string]string{"log.txt": "line-one\nEND\n"}, true},
		{"a read of other content", trace(ok(addTwo, "edited"), "1\tEND"), both, false},
		{"a refused change that landed", trace(refused, sawOne), both, false},
		{"a refused change that did not", trace(refused, sawOne), map[string]string{"log.txt": "line-one\nEND\n"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := ReplayOps(tt.recs)
			if err != nil {
				t.Fatal(err)
			}
			dir, err := ReplayExplains(t.Context(), ops, t.TempDir(), initial, tt.final)
			if err != nil {
				t.Fatal(err)
			}
			if (dir != "") != tt.explained {
				t.Errorf("ReplayExplains(%q) = %q, want explained %v", tt.final, dir, tt.explained)
			}
			if dir == "" {
				return
			}
			if got, err := ReadTree(dir); err != nil || fmt.Sprint(got) != fmt.Sprint(tt.final) {
				t.Errorf("the replayed workspace holds %q (%v), want %q", got, err, tt.final)
			}
		})
	}

	t.Run("an approved rewrite", func(t *testing.T) {
		recs, _ := soundTrace()
		recs[2].Observations[0].Content = sawOne
		recs[3].Observations[0] = protocol.Observation{CallID: "e2", Tool: "edit_file", Status: protocol.CallAwaitingApproval, Approval: "r.3.0"}
		recs = append(recs[:4:4], protocol.Record{Kind: protocol.RecordDecision, Step: 3, Approval: "r.3.0",
			Decision:     &protocol.Decision{Approve: true, Rewrite: json.RawMessage(`{"path":"log.txt","search":"END","replace":"rewritten\nEND"}`)},
			Observations: []protocol.Observation{{CallID: "r.3.0", Tool: "edit_file", Status: protocol.CallOK}}}, recs[4])
		ops, err := ReplayOps(recs)
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != 3 || !strings.Contains(string(ops[2].Call.Arguments), "rewritten") {
			t.Fatalf("ops = %+v, want the two changes and the read, the second change as rewritten", ops)
		}
		final := map[string]string{"log.txt": "line-one\nrewritten\nEND\n"}
		if dir, err := ReplayExplains(t.Context(), ops, t.TempDir(), initial, final); err != nil || dir == "" {
			t.Errorf("ReplayExplains(%q) = %q, %v; want it explained", final, dir, err)
		}
	})

	t.Run("a decision on no call", func(t *testing.T) {
		recs, _ := soundTrace()
		recs = append(recs[:4:4], protocol.Record{Kind: protocol.RecordDecision, Step: 3, Approval: "r.3.5",
			Decision: &protocol.Decision{Approve: true}, Observations: []protocol.Observation{{Status: protocol.CallOK}}}, recs[4])
		if _, err := ReplayOps(recs); err == nil {
			t.Error("ReplayOps of a decision on a call the step did not make: no error")
		}
	})

	t.Run("an unknown status", func(t *testing.T) {
		recs, _ := soundTrace()
		recs[1].Observations[0].Status = "maybe"
		if _, err := ReplayOps(recs); err == nil {
			t.Error("ReplayOps of an observation status it does not know: no error")
		}
	})
}

// readAs is what read_file of c shows of a workspace holding files.
func readAs(t *testing.T, files map[string]string, c protocol.ToolCall) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteTree(dir, files); err != nil {
		t.Fatal(err)
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	tool, _ := tools.Builtins().Get(c.Name)
	out, err := tool.Invoke(context.Background(), &tools.Env{Workspace: ws, Sandbox: floor.New(), Limits: protocol.Limits{}.WithDefaults(), CmdEnv: sandbox.MinimalEnv()}, c.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	return out.Content
}

// TestReplayOutcome folds a person's denial to denied and a passed
// verification to success.
func TestReplayOutcome(t *testing.T) {
	recs, _ := soundTrace()
	if got := ReplayOutcome(recs); got != "" {
		t.Errorf("ReplayOutcome of a trace with no check or decision = %q, want none", got)
	}
	recs[3].Check = &protocol.CheckResult{Passed: true}
	if got := ReplayOutcome(recs); got != protocol.OutcomeSuccess {
		t.Errorf("ReplayOutcome after a passed check = %q, want success", got)
	}
	denied := append([]protocol.Record{recs[0], recs[1], {Kind: protocol.RecordDecision, Step: 1, Decision: &protocol.Decision{Reason: "no"}}}, recs[2:]...)
	if got := ReplayOutcome(denied); got != protocol.OutcomeDenied {
		t.Errorf("ReplayOutcome after a denial = %q, want denied", got)
	}
}

// expect fails t unless some finding contains want, or, with want empty,
// there is no finding.
func expect(t *testing.T, findings []string, want string) {
	t.Helper()
	if want == "" {
		if len(findings) > 0 {
			t.Errorf("findings in a sound trace: %q", findings)
		}
		return
	}
	for _, f := range findings {
		if strings.Contains(f, want) {
			return
		}
	}
	t.Errorf("findings %q, want one saying %q", findings, want)
}
