package protocol

import (
	"fmt"
	"strings"
)

// TreeBudget is the ceiling an agent tree shares: the root run and every
// sub-agent under it draw from it together, and no agent of the tree can
// raise it. Only a root run sets it; a field left out takes the root's own
// cap in that dimension (max_tokens, max_cost_micros, max_wall), so a tree
// never spends more than its root was allowed unless the contract says so.
type TreeBudget struct {
	// MaxTokens caps input plus output tokens over the whole tree.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostMicros caps the tree's cost, in micro-units of the price
	// table's currency (1,000,000 = one unit).
	MaxCostMicros int64 `json:"max_cost_micros,omitempty"`
	// MaxSteps caps the provider calls of the whole tree.
	MaxSteps int64 `json:"max_steps,omitempty"`
	// MaxAgents caps how many runs the tree holds, the root included;
	// default DefaultMaxAgents.
	MaxAgents int `json:"max_agents,omitempty"`
	// MaxDepth caps how far below the root a sub-agent may be; default
	// DefaultMaxDepth.
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxWall is how long after the root started the tree may keep
	// drawing.
	MaxWall Duration `json:"max_wall,omitzero"`
	// MaxConcurrent caps how many agents of the tree run at once, the
	// root included; 0 (the default) for no cap, and 1 leaves no room for
	// a sub-agent beside the root. A spawn over the cap is not refused: it
	// waits, first come first served, for a running agent of the tree to
	// finish. A sub-agent waiting for its own sub-agents gives its place
	// back meanwhile (the root keeps its own), so a tree never waits on
	// itself.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
}

// Tree defaults.
const (
	DefaultMaxAgents = 16
	DefaultMaxDepth  = 3
)

// Spend is an amount drawn from a budget in each dimension.
type Spend struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostMicros   int64 `json:"cost_micros"`
	Steps        int64 `json:"steps"`
}

// Add returns s + t in every dimension.
func (s Spend) Add(t Spend) Spend {
	return Spend{s.InputTokens + t.InputTokens, s.OutputTokens + t.OutputTokens, s.CostMicros + t.CostMicros, s.Steps + t.Steps}
}

// Tokens is input plus output tokens.
func (s Spend) Tokens() int64 { return s.InputTokens + s.OutputTokens }

// Draw is one provider call's charge, settled under its idempotency key
// (run.step.attempt). A step record lists the draws of its step: the call
// whose turn the step acts on, and any earlier attempt whose answer came
// back late (the provider was paid for it too).
type Draw struct {
	Key string `json:"key"`
	Spend
}

// Unlimited is an Allowance field's value in a dimension without a cap.
const Unlimited int64 = -1

// Allowance is what a ceiling still allows in each dimension: the ceiling
// less what is spent and held, never below zero, Unlimited where there is
// no cap.
type Allowance struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Tokens       int64 `json:"tokens"`
	CostMicros   int64 `json:"cost_micros"`
	Steps        int64 `json:"steps"`
}

// Budgets is where a run and its tree stand against their ceilings: what a
// spend_draw event carries and `harness status` shows.
type Budgets struct {
	// Tree is the root run's id; Depth the run's depth below it.
	Tree  string `json:"tree"`
	Depth int    `json:"depth,omitempty"`
	// Drawn is the draw an event reports; empty in a run's status.
	Drawn *Spend `json:"drawn,omitempty"`
	// Run is what this run has spent; RunRemaining what its own caps
	// still allow.
	Run          Spend      `json:"run"`
	RunRemaining *Allowance `json:"run_remaining,omitempty"`
	// TreeSpent, TreeReserved and TreeRemaining are the tree's standing:
	// settled draws, reservations in flight, and what its ceiling allows.
	// The remainders are absent until the run's first draw.
	TreeSpent     Spend      `json:"tree_spent"`
	TreeReserved  Spend      `json:"tree_reserved"`
	TreeRemaining *Allowance `json:"tree_remaining,omitempty"`
}

// String renders the dimensions that have a cap, such as "1200 tokens,
// 3 steps", or "no cap".
func (a Allowance) String() string {
	var parts []string
	for _, f := range []struct {
		v    int64
		unit string
	}{{a.Tokens, "tokens"}, {a.InputTokens, "input tokens"}, {a.OutputTokens, "output tokens"}, {a.CostMicros, "micro-units"}, {a.Steps, "steps"}} {
		if f.v != Unlimited {
			parts = append(parts, fmt.Sprintf("%d %s", f.v, f.unit))
		}
	}
	if len(parts) == 0 {
		return "no cap"
	}
	return strings.Join(parts, ", ")
}

// String renders a spend, such as "1200 tokens (1000 in, 200 out), 3
// steps, 0 micro-units".
func (s Spend) String() string {
	return fmt.Sprintf("%d tokens (%d in, %d out), %d steps, %d micro-units", s.Tokens(), s.InputTokens, s.OutputTokens, s.Steps, s.CostMicros)
}

// validateBudget checks the budget part of a contract.
func (c *Contract) validateBudget() error {
	b := c.Budget
	if b.MaxCostMicros < 0 {
		return FieldError(CodeInvalidField, "budget.max_cost_micros", "use a positive number of micro-units, or leave it out for no cap", "max_cost_micros is negative")
	}
	if c.Parent != "" {
		if !ValidToken(c.Parent) {
			return FieldError(CodeInvalidField, "parent", "name the parent run by its id", "parent %q is not a run id", c.Parent)
		}
		if b.Tree != nil {
			return FieldError(CodeInvalidField, "budget.tree", "leave it out: a sub-agent draws from its root's ceiling and cannot set or raise it",
				"a run with a parent sets a tree budget")
		}
	}
	t := b.Tree
	if t == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_tokens", t.MaxTokens}, {"max_cost_micros", t.MaxCostMicros}, {"max_steps", t.MaxSteps},
		{"max_agents", int64(t.MaxAgents)}, {"max_depth", int64(t.MaxDepth)}, {"max_wall", int64(t.MaxWall)},
		{"max_concurrent", int64(t.MaxConcurrent)}} {
		if f.v < 0 {
			return FieldError(CodeInvalidField, "budget.tree."+f.name, "use a positive value, or leave it out for the default", "%s is negative", f.name)
		}
	}
	return nil
}
