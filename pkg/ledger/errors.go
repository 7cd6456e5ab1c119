package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Sentinels. Refusals are *Refusal values that match one of ErrCeilingReached,
// ErrRunCap, ErrAgentCap or ErrDepthCap with errors.Is, and also
// protocol.ErrBudgetExhausted.
var (
	// ErrCeilingReached: the tree's ceiling or deadline left no room. The
	// caller ends the run budget_ceiling_reached; so will every agent of
	// the tree at its next draw.
	ErrCeilingReached = errors.New("ledger: the tree's ceiling is reached")
	// ErrRunCap: the agent's own cap left no room. The caller ends that
	// run cost_budget_exceeded; the rest of the tree may go on.
	ErrRunCap = errors.New("ledger: the run's own cap is reached")
	// ErrAgentCap: the tree has as many agents as its ceiling allows.
	ErrAgentCap = errors.New("ledger: the tree's agent cap is reached")
	// ErrDepthCap: the agent would be deeper than the ceiling allows.
	ErrDepthCap = errors.New("ledger: the tree's depth cap is reached")

	// ErrTreeUnknown: the store has no state for the tree, because it was
	// never opened or because the store lost its keys (a Redis restart
	// without persistence, a failover). The caller rebuilds the tree with
	// Restore from the trace and tries again.
	ErrTreeUnknown = errors.New("ledger: tree unknown (never opened, or its state was lost: restore it from the trace)")
	// ErrAgentUnknown: the agent did not register with the tree (or the
	// tree was restored without it). Register it first.
	ErrAgentUnknown = errors.New("ledger: agent not registered with the tree")
	// ErrReservationUnknown: no reservation has the key: it was never
	// made, it expired (see RedisConfig.KeyTTL), or it was lost with the
	// tree's state.
	ErrReservationUnknown = errors.New("ledger: no reservation has this key")
	// ErrReleased: the reservation was released, so it cannot be settled.
	ErrReleased = errors.New("ledger: the reservation was released")
)

// Scope says whose limit refused a draw.
type Scope string

// Scopes.
const (
	ScopeTree Scope = "tree" // the tree's ceiling, shared by all its agents
	ScopeRun  Scope = "run"  // the drawing agent's own cap
)

// Dimension names a budgeted quantity. The strings are stable and appear
// in refusal messages and on the wire (as "budget.<dimension>").
type Dimension string

// Dimensions.
const (
	DimInputTokens  Dimension = "input_tokens"
	DimOutputTokens Dimension = "output_tokens"
	DimTokens       Dimension = "tokens" // input plus output
	DimCost         Dimension = "cost_micros"
	DimSteps        Dimension = "steps"
	DimAgents       Dimension = "agents"
	DimDepth        Dimension = "depth"
	DimWall         Dimension = "wall" // the tree's deadline
)

// Refusal is a draw or registration that a limit refused. Nothing was held
// or charged.
type Refusal struct {
	// Tree and Agent name the tree and the agent that asked.
	Tree  string
	Agent string
	// Scope is whose limit refused: the tree's ceiling or the agent's own
	// cap.
	Scope Scope
	// Dimension is the limit that refused.
	Dimension Dimension
	// Asked is what the request needed in Dimension (for DimDepth, the
	// depth asked for; for DimAgents, 1; for DimWall, 0).
	Asked int64
	// Remaining is what the limit still allowed (0 for DimWall).
	Remaining int64
	// Limit is the cap itself (for DimWall, the Wall in microseconds).
	Limit int64
	// Deadline is the tree's deadline, for DimWall.
	Deadline time.Time
}

// Error says what was refused, by which rule, and what to do instead.
func (r *Refusal) Error() string {
	who := fmt.Sprintf("the tree %q", r.Tree)
	if r.Scope == ScopeRun {
		who = fmt.Sprintf("the run %q", r.Agent)
	}
	switch r.Dimension {
	case DimWall:
		return fmt.Sprintf("ledger: %s passed its deadline (%s): finish with what you have", who, r.Deadline.UTC().Format(time.RFC3339Nano))
	case DimAgents:
		return fmt.Sprintf("ledger: %s has all %d agents it may have: do the work without another sub-agent", who, r.Limit)
	case DimDepth:
		return fmt.Sprintf("ledger: %s allows depth %d, asked %d: do the work without another level of sub-agents", who, r.Limit, r.Asked)
	}
	return fmt.Sprintf("ledger: %s %s budget of %d has %d left, the draw needs %d: finish with what you have, or lower the request (max output tokens)",
		who, r.Dimension, r.Limit, r.Remaining, r.Asked)
}

// Is matches the sentinel for the refusal's rule, and
// protocol.ErrBudgetExhausted for any refusal.
func (r *Refusal) Is(target error) bool {
	switch target {
	case ErrRunCap:
		return r.Scope == ScopeRun
	case ErrAgentCap:
		return r.Scope == ScopeTree && r.Dimension == DimAgents
	case ErrDepthCap:
		return r.Scope == ScopeTree && r.Dimension == DimDepth
	case ErrCeilingReached:
		return r.Scope == ScopeTree && r.Dimension != DimAgents && r.Dimension != DimDepth
	}
	return errors.Is(protocol.ErrBudgetExhausted, target)
}

// As makes protocol.AsError and errors.As with a **protocol.Error target
// see the refusal as its wire form (see Wire).
func (r *Refusal) As(target any) bool {
	if p, ok := target.(**protocol.Error); ok {
		*p = r.Wire()
		return true
	}
	return false
}

// Wire returns the refusal as the error that crosses the wire: code
// budget_exhausted, field "budget.<dimension>".
func (r *Refusal) Wire() *protocol.Error {
	hint := "finish with what you have"
	switch r.Dimension {
	case DimAgents, DimDepth:
		hint = "do the work without another sub-agent"
	case DimInputTokens, DimOutputTokens, DimTokens, DimCost:
		hint = "finish with what you have, or lower max output tokens"
	}
	e := protocol.FieldError(protocol.CodeBudgetExhausted, "budget."+string(r.Dimension), hint, "%s", r.Error())
	return e
}

// Outcome is the outcome a run refused by r ends with: budget_ceiling_reached
// for the tree's ceiling or deadline, cost_budget_exceeded for the run's own
// cap. Agent and depth refusals answer a spawn and end nothing; Outcome
// returns "" for them.
func (r *Refusal) Outcome() protocol.Outcome {
	switch {
	case r.Scope == ScopeRun:
		return protocol.OutcomeCostBudgetExceeded
	case r.Dimension == DimAgents || r.Dimension == DimDepth:
		return ""
	default:
		return protocol.OutcomeBudgetCeilingReached
	}
}

// unavailable wraps err, which says the store did not answer, so that it
// matches protocol.ErrUnavailable (retryable) and still matches err.
func unavailable(op string, err error) error {
	return fmt.Errorf("ledger %s: %w: %w", op, protocol.Errorf(protocol.CodeUnavailable, "the budget ledger did not answer; wait and try again"), err)
}
