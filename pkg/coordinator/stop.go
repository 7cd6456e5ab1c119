package coordinator

import (
	"fmt"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// action is what the driver does at a step boundary.
type action int

const (
	// stepOn takes the next step.
	stepOn action = iota
	// leave stops driving: the driver's context ended (the coordinator is
	// stopping or lost the lease), and the run stays running, to be picked
	// up again.
	leave
	// finishRun ends the run with the outcome and reason given with it.
	finishRun
	// pauseStep records the pause of the step just taken, which waits for
	// a person: a call it deferred, or the provider's endpoint.
	pauseStep
	// recordPause records the pause of a committed step that deferred a
	// call when no pause record followed it (its coordinator died in
	// between), from the step itself.
	recordPause
	// awaitDecision looks for the decision the paused run waits for.
	awaitDecision
)

// boundary is what the stop checks see besides the run's state.
type boundary struct {
	now       time.Time
	cancelled bool // the driver's context ended
	// took is the step the driver has just taken, its record applied to
	// the state; nil when it took none since the last check.
	took *stepTaken
}

// stepTaken is what the step just taken leaves for the stop checks.
type stepTaken struct {
	// rec is the committed record; nil when the step waits for a person
	// before its turn (the provider's endpoint), with nothing to commit.
	rec *protocol.Record
	// pending is set when the step waits for a person.
	pending bool
	// stall is what the step did to the stall window, judged before it was
	// folded in, and tried the signatures behind a stop.
	stall stallVerdict
	tried []string
}

// next runs the stop checks at a step boundary, in their order, and says
// what the driver does next: with finishRun, the outcome and its reason. It
// does no I/O and reads no clock.
//
// Right after a step: a step waiting for a person pauses; then stall,
// the token budget, a verification-free run finished by a turn without
// tool calls, and a passed check end the run (io-harness 0.17's order).
// Then, and before every step: the end of the driver's context, the wall
// clock and the step cap stop it; a pause is recorded or its decision
// looked for; else the next step is taken.
func (s *runState) next(b boundary) (action, protocol.Outcome, string) {
	if t := b.took; t != nil {
		if t.pending {
			return pauseStep, "", ""
		}
		if t.stall == stallStopped {
			return finishRun, protocol.OutcomeStalled, fmt.Sprintf("the agent repeated itself without changing the workspace after %d re-plan(s): %s",
				s.stall.replans, strings.Join(t.tried, " ; "))
		}
		rec := t.rec
		if s.overBudget(rec.Tokens) {
			return finishRun, protocol.OutcomeCostBudgetExceeded, fmt.Sprintf("%d tokens spent, the budget is %d", rec.Tokens, s.contract.Budget.MaxTokens)
		}
		finish := ""
		if rec.Turn != nil {
			finish = rec.Turn.Finish()
		}
		// A refusal ends a run without a check at once; a run with one is
		// told of its first, and ends at its second, unless the check
		// passed anyway.
		refused := finish == protocol.FinishRefusal && (s.contract.Verification.None != nil || s.refusals >= maxRefusals)
		if refused && (rec.Check == nil || !rec.Check.Passed) {
			return finishRun, protocol.OutcomeModelRefused, "the model refused: " + clip(rec.Turn.Text, 500)
		}
		// A paused turn (Anthropic's pause_turn), and one cut off at its
		// output limit, are carried on, not taken for the agent's last
		// word.
		if s.contract.Verification.None != nil && (rec.Turn == nil || len(rec.Turn.ToolCalls) == 0 && finish != protocol.FinishPause && finish != protocol.FinishMaxTokens) {
			return finishRun, protocol.OutcomeFinished, "the agent replied without calling a tool"
		}
		if rec.Check != nil && rec.Check.Passed {
			return finishRun, protocol.OutcomeSuccess, rec.Check.Detail
		}
	}
	if b.cancelled {
		return leave, "", ""
	}
	if d := s.deadline(); !d.IsZero() && !b.now.Before(d) {
		return finishRun, protocol.OutcomeTimeBudgetExceeded, fmt.Sprintf("the wall-clock budget of %s ran out", time.Duration(s.contract.Budget.MaxWall))
	}
	if s.step >= s.contract.Budget.MaxSteps {
		return finishRun, protocol.OutcomeStepCapReached, fmt.Sprintf("%d steps taken without passing verification", s.step)
	}
	if s.unpaused != "" {
		return recordPause, "", ""
	}
	if s.paused != nil {
		return awaitDecision, "", ""
	}
	return stepOn, "", ""
}
