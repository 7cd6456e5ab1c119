package ledger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ioharness/harness/pkg/ledger"
)

// A root run and its child draw from one tree. The child's second step
// would go past the tree's token ceiling and is refused.
func Example() {
	ctx := context.Background()
	var l ledger.Ledger = ledger.NewMemory()
	prices := ledger.Prices{"small-model": {InputPerMillion: 150_000, OutputPerMillion: 600_000}}

	_ = l.Open(ctx, "root-1", ledger.Ceiling{Limits: ledger.Limits{Tokens: 10_000}, Agents: 4, Depth: 2})
	_ = l.Register(ctx, "root-1", "root-1", 0)
	_ = l.Register(ctx, "root-1", "child-1", 1)

	step := func(agent, key string, in, maxOut int64) (ledger.Grant, error) {
		cost, _ := prices.Cost("small-model", in, maxOut)
		return l.Reserve(ctx, ledger.Reservation{
			Tree: "root-1", Agent: agent, Key: key,
			Estimate: ledger.Usage{InputTokens: in, OutputTokens: maxOut, CostMicros: cost, Steps: 1},
			Cap:      ledger.Limits{Steps: 12},
		})
	}
	g, err := step("child-1", "child-1.1.0", 3000, 4096)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held", g.Reserved.Tokens(), "tokens; tree has", g.Balance.Remaining.Tokens, "left")

	// The provider used fewer output tokens than the estimate.
	cost, _ := prices.Cost("small-model", 3000, 512)
	s, _ := l.Settle(ctx, "root-1", "child-1.1.0", ledger.Usage{InputTokens: 3000, OutputTokens: 512, CostMicros: cost, Steps: 1})
	fmt.Println("charged", s.Charged.Tokens(), "tokens and", s.Charged.CostMicros, "micro-units; tree has", s.Balance.Remaining.Tokens, "left")

	_, err = step("child-1", "child-1.2.0", 4000, 4096)
	var r *ledger.Refusal
	if errors.As(err, &r) {
		fmt.Println(errors.Is(err, ledger.ErrCeilingReached), r.Dimension, "asked", r.Asked, "left", r.Remaining, "→", r.Outcome())
	}
	// Output:
	// held 7096 tokens; tree has 2904 left
	// charged 3512 tokens and 758 micro-units; tree has 6488 left
	// true tokens asked 8096 left 6488 → budget_ceiling_reached
}

// A run's own cap refuses before the tree's ceiling does: that run ends
// cost_budget_exceeded and the rest of the tree goes on.
func ExampleRefusal_Outcome() {
	ctx := context.Background()
	l := ledger.NewMemory()
	_ = l.Open(ctx, "t", ledger.Ceiling{Limits: ledger.Limits{CostMicros: 1_000_000}})
	_ = l.Register(ctx, "t", "t", 0)
	_, err := l.Reserve(ctx, ledger.Reservation{Tree: "t", Agent: "t", Key: "t.1.0",
		Estimate: ledger.Usage{CostMicros: 60_000, Steps: 1}, Cap: ledger.Limits{CostMicros: 50_000}})
	var r *ledger.Refusal
	if errors.As(err, &r) {
		fmt.Println(r.Scope, r.Dimension, r.Outcome())
	}
	// Output: run cost_micros cost_budget_exceeded
}

func ExamplePrices_Cost() {
	prices := ledger.Prices{"m": {InputPerMillion: 3_000_000, OutputPerMillion: 15_000_000}}
	fmt.Println(prices.Cost("m", 1000, 200))
	fmt.Println(prices.Cost("unpriced", 1000, 200))
	// Output:
	// 6000 true
	// 0 false
}

// The ledger draws through any go-redis client; the address comes from
// REDIS_URL in the roles' main.
func ExampleNewRedis() {
	opts, err := redis.ParseURL("redis://127.0.0.1:6379/0")
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := ledger.NewRedis(redis.NewClient(opts), ledger.RedisConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = l.Open(context.Background(), "root-1", ledger.Ceiling{Limits: ledger.Limits{Tokens: 1_000_000}})
}

// Restore rebuilds a tree the store lost, from what the trace recorded.
func ExampleMemory_Restore() {
	ctx := context.Background()
	l := ledger.NewMemory()
	_, err := l.Totals(ctx, "root-1")
	if errors.Is(err, ledger.ErrTreeUnknown) {
		ok, _ := l.Restore(ctx, "root-1", ledger.Ceiling{Limits: ledger.Limits{Steps: 20}},
			map[string]ledger.Usage{"root-1": {InputTokens: 9000, OutputTokens: 1200, Steps: 6}, "child-1": {Steps: 2}})
		t, _ := l.Totals(ctx, "root-1")
		fmt.Println(ok, t.Spent.Steps, "steps spent,", t.Remaining.Steps, "left,", len(t.Agents), "agents")
	}
	// Output: true 8 steps spent, 12 left, 2 agents
}
