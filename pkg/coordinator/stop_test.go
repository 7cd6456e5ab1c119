package coordinator

import (
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestNext runs the stop checks at step boundaries: each check, and each
// pair whose order matters, on a run rebuilt from a trace.
func TestNext(t *testing.T) {
	passed := &protocol.CheckResult{Passed: true, Detail: "ok"}
	failed := &protocol.CheckResult{Detail: "exited 1"}
	none := func(c *protocol.Contract) { c.Verification = protocol.Verification{None: &struct{}{}} }
	capped := func(c *protocol.Contract) { c.Budget.MaxTokens = 50 }
	timed := func(c *protocol.Contract) { c.Budget.MaxWall = protocol.Duration(time.Minute) }
	paused := func(s *runState) { s.paused = &protocol.Record{Kind: protocol.RecordPaused, Approval: "r.1.0"} }
	unpaused := func(s *runState) { s.unpaused = "r.1.0" }
	replanned := func(s *runState) { s.stall.replans = 1 }
	took := func(rec protocol.Record) *stepTaken { return &stepTaken{rec: &rec} }
	stalled := func(rec protocol.Record) *stepTaken {
		return &stepTaken{rec: &rec, stall: stallStopped, tried: []string{"read_file:x", "read_file:x"}}
	}
	waiting := func(rec protocol.Record) *stepTaken { return &stepTaken{rec: &rec, pending: true, stall: stallStopped} }
	late := t0.Add(2 * time.Minute) // past a one-minute wall clock

	tests := []struct {
		name  string
		c     *protocol.Contract
		steps int              // committed before the boundary
		edit  func(*runState)  // the state beyond its trace, if any
		b     boundary         // now defaults to t0
		want  action           //
		out   protocol.Outcome // with finishRun
		why   string           // with finishRun, when it matters
	}{
		// Right after a step.
		{name: "a step waiting for its turn pauses", c: contract(nil), steps: 1, b: boundary{took: &stepTaken{pending: true}}, want: pauseStep},
		{name: "a pause beats a stall", c: contract(nil), steps: 1, b: boundary{took: waiting(step(1, 10, 1, nil))}, want: pauseStep},
		{name: "a pause beats the step cap", c: contract(nil), steps: 3, b: boundary{took: waiting(step(3, 10, 1, nil))}, want: pauseStep},
		{name: "stalled", c: contract(nil), steps: 1, edit: replanned, b: boundary{took: stalled(step(1, 10, 1, nil))},
			want: finishRun, out: protocol.OutcomeStalled,
			why: "the agent repeated itself without changing the workspace after 1 re-plan(s): read_file:x ; read_file:x"},
		{name: "a stall beats the budget and a pass", c: contract(capped), steps: 1, b: boundary{took: stalled(step(1, 51, 1, passed))},
			want: finishRun, out: protocol.OutcomeStalled},
		{name: "a re-plan goes on", c: contract(nil), steps: 1, b: boundary{took: &stepTaken{rec: ptr(step(1, 10, 1, nil)), stall: stallReplan}}, want: stepOn},
		{name: "tokens over the budget", c: contract(capped), steps: 1, b: boundary{took: took(step(1, 51, 1, nil))},
			want: finishRun, out: protocol.OutcomeCostBudgetExceeded, why: "51 tokens spent, the budget is 50"},
		{name: "the budget beats a pass", c: contract(capped), steps: 1, b: boundary{took: took(step(1, 51, 1, passed))},
			want: finishRun, out: protocol.OutcomeCostBudgetExceeded},
		{name: "at the budget is not over it", c: contract(capped), steps: 1, b: boundary{took: took(step(1, 50, 1, nil))}, want: stepOn},
		{name: "none ends on a turn without tools", c: contract(none), steps: 1, b: boundary{took: took(step(1, 10, 0, nil))},
			want: finishRun, out: protocol.OutcomeFinished, why: "the agent replied without calling a tool"},
		{name: "finished beats a pass", c: contract(none), steps: 1, b: boundary{took: took(step(1, 10, 0, passed))},
			want: finishRun, out: protocol.OutcomeFinished},
		{name: "none goes on after a tool call", c: contract(none), steps: 1, b: boundary{took: took(step(1, 10, 1, nil))}, want: stepOn},
		{name: "none goes on after a paused turn", c: contract(none), steps: 1, b: boundary{took: took(pausedTurn(step(1, 10, 0, nil)))}, want: stepOn},
		{name: "check passed", c: contract(nil), steps: 1, b: boundary{took: took(step(1, 10, 1, passed))},
			want: finishRun, out: protocol.OutcomeSuccess, why: "ok"},
		{name: "check failed", c: contract(nil), steps: 1, b: boundary{took: took(step(1, 10, 1, failed))}, want: stepOn},
		{name: "a command check is not ended by a quiet turn", c: contract(nil), steps: 1, b: boundary{took: took(step(1, 10, 0, failed))}, want: stepOn},
		{name: "a pass beats the end of the context", c: contract(nil), steps: 1, b: boundary{cancelled: true, took: took(step(1, 10, 1, passed))},
			want: finishRun, out: protocol.OutcomeSuccess},
		{name: "a pass beats the wall clock", c: contract(timed), steps: 1, b: boundary{now: late, took: took(step(1, 10, 1, passed))},
			want: finishRun, out: protocol.OutcomeSuccess},
		{name: "a pass beats the step cap", c: contract(nil), steps: 3, b: boundary{took: took(step(3, 10, 1, passed))},
			want: finishRun, out: protocol.OutcomeSuccess},
		{name: "a step that ends nothing meets the step cap", c: contract(nil), steps: 3, b: boundary{took: took(step(3, 10, 1, failed))},
			want: finishRun, out: protocol.OutcomeStepCapReached},
		{name: "a step that ends nothing meets the end of the context", c: contract(nil), steps: 1, b: boundary{cancelled: true, took: took(step(1, 10, 1, failed))},
			want: leave},

		// Before a step.
		{name: "room left", c: contract(nil), steps: 1, want: stepOn},
		{name: "cancelled", c: contract(nil), steps: 1, b: boundary{cancelled: true}, want: leave},
		{name: "the end of the context beats the wall clock", c: contract(timed), steps: 1, b: boundary{cancelled: true, now: late}, want: leave},
		{name: "wall clock from the start, downtime included", c: contract(timed), steps: 1, b: boundary{now: t0.Add(time.Minute)},
			want: finishRun, out: protocol.OutcomeTimeBudgetExceeded, why: "the wall-clock budget of 1m0s ran out"},
		{name: "within the wall clock", c: contract(timed), steps: 1, b: boundary{now: t0.Add(time.Minute - time.Nanosecond)}, want: stepOn},
		{name: "the wall clock beats the step cap", c: contract(timed), steps: 3, b: boundary{now: late},
			want: finishRun, out: protocol.OutcomeTimeBudgetExceeded},
		{name: "step cap", c: contract(nil), steps: 3,
			want: finishRun, out: protocol.OutcomeStepCapReached, why: "3 steps taken without passing verification"},
		{name: "the wall clock beats a pause", c: contract(timed), steps: 1, edit: paused, b: boundary{now: late},
			want: finishRun, out: protocol.OutcomeTimeBudgetExceeded},
		{name: "the step cap beats a pause", c: contract(nil), steps: 3, edit: paused, want: finishRun, out: protocol.OutcomeStepCapReached},
		{name: "the end of the context beats a pause", c: contract(nil), steps: 1, edit: paused, b: boundary{cancelled: true}, want: leave},
		{name: "a deferred call's pause is recorded", c: contract(nil), steps: 1, edit: unpaused, want: recordPause},
		{name: "recording a pause comes before its decision", c: contract(nil), steps: 1,
			edit: func(s *runState) { paused(s); unpaused(s) }, want: recordPause},
		{name: "paused", c: contract(nil), steps: 1, edit: paused, want: awaitDecision},
	}
	for _, tt := range tests {
		recs := []protocol.Record{started(tt.c)}
		for i := range tt.steps {
			recs = append(recs, step(i+1, 1, 1, nil))
		}
		s, err := newRunState("r", recs)
		if err != nil {
			t.Fatal(err)
		}
		if tt.edit != nil {
			tt.edit(s)
		}
		if tt.b.now.IsZero() {
			tt.b.now = t0
		}
		a, out, why := s.next(tt.b)
		if a != tt.want || out != tt.out || (tt.why != "" && why != tt.why) {
			t.Errorf("%s: next = %v, %q, %q; want %v, %q, %q", tt.name, a, out, why, tt.want, tt.out, tt.why)
		}
		if a != finishRun && why != "" {
			t.Errorf("%s: next = %v with a reason %q", tt.name, a, why)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// pausedTurn marks a step's turn as paused by the provider (pause_turn).
func pausedTurn(r protocol.Record) protocol.Record {
	t := *r.Turn
	t.FinishReason = "pause_turn"
	r.Turn = &t
	return r
}
