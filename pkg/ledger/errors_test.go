package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

func TestRefusalMatches(t *testing.T) {
	sentinels := []error{ledger.ErrCeilingReached, ledger.ErrRunCap, ledger.ErrAgentCap, ledger.ErrDepthCap}
	tests := []struct {
		name    string
		r       ledger.Refusal
		matches error
		outcome protocol.Outcome
		field   string
		text    string
	}{
		{"tree tokens", ledger.Refusal{Tree: "t", Scope: ledger.ScopeTree, Dimension: ledger.DimTokens, Asked: 10, Remaining: 3, Limit: 100},
			ledger.ErrCeilingReached, protocol.OutcomeBudgetCeilingReached, "budget.tokens", `the tree "t" tokens budget of 100 has 3 left, the draw needs 10`},
		{"tree deadline", ledger.Refusal{Tree: "t", Scope: ledger.ScopeTree, Dimension: ledger.DimWall, Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			ledger.ErrCeilingReached, protocol.OutcomeBudgetCeilingReached, "budget.wall", "passed its deadline (2026-01-02T03:04:05Z)"},
		{"run cost", ledger.Refusal{Tree: "t", Agent: "a", Scope: ledger.ScopeRun, Dimension: ledger.DimCost, Asked: 5, Remaining: 1, Limit: 9},
			ledger.ErrRunCap, protocol.OutcomeCostBudgetExceeded, "budget.cost_micros", `the run "a" cost_micros budget of 9 has 1 left`},
		{"agents", ledger.Refusal{Tree: "t", Agent: "c", Scope: ledger.ScopeTree, Dimension: ledger.DimAgents, Asked: 1, Limit: 4},
			ledger.ErrAgentCap, "", "budget.agents", "has all 4 agents"},
		{"depth", ledger.Refusal{Tree: "t", Agent: "c", Scope: ledger.ScopeTree, Dimension: ledger.DimDepth, Asked: 3, Limit: 2},
			ledger.ErrDepthCap, "", "budget.depth", "allows depth 2, asked 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = &tt.r
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tt.matches) {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, s == tt.matches)
				}
			}
			if !errors.Is(err, protocol.ErrBudgetExhausted) || errors.Is(err, protocol.ErrUnavailable) {
				t.Errorf("errors.Is(%v, protocol.ErrBudgetExhausted) = false or it matches ErrUnavailable", err)
			}
			if got := tt.r.Outcome(); got != tt.outcome {
				t.Errorf("Outcome() = %q, want %q", got, tt.outcome)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), tt.text)
			}
			pe := protocol.AsError(err)
			if pe.Code != protocol.CodeBudgetExhausted || pe.Field != tt.field || pe.Hint == "" || pe.Retryable() {
				t.Errorf("protocol.AsError = %+v, want code budget_exhausted, field %q, a hint, not retryable", pe, tt.field)
			}
			// The wire form survives a round trip and still matches.
			wrapped := errors.Join(errors.New("context"), err)
			if !errors.Is(wrapped, tt.matches) {
				t.Errorf("errors.Is(wrapped, %v) = false", tt.matches)
			}
		})
	}
}

func TestInvalidIsProtocolError(t *testing.T) {
	err := ledger.NewMemory().Open(context.Background(), "", ledger.Ceiling{})
	pe := protocol.AsError(err)
	if pe.Code != protocol.CodeInvalidField || pe.Field != "tree" {
		t.Errorf("Open(\"\") error = %+v, want invalid_field on tree", pe)
	}
}
