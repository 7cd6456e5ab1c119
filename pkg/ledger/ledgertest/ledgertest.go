// Package ledgertest is the conformance suite for ledger.Ledger: every
// implementation runs Run and must pass all of it, so the embedded ledger
// and the Redis one answer the same way. It also exports the concurrent
// workload (Hammer) and its invariant check (CheckHammer), which a test can
// drive from several processes at once.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// Run runs the conformance suite. newLedger returns the ledger under test
// for one subtest; it may share state with others (such as one Redis
// server), since every subtest uses trees of its own.
func Run(t *testing.T, newLedger func(t *testing.T) ledger.Ledger) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l ledger.Ledger)
	}{
		{"OpenOnce", testOpenOnce},
		{"TreeUnknown", testTreeUnknown},
		{"AgentUnknown", testAgentUnknown},
		{"Invalid", testInvalid},
		{"TreeCeiling", testTreeCeiling},
		{"RunCap", testRunCap},
		{"ChildCannotRaiseCeiling", testChildCannotRaise},
		{"ReserveSettle", testReserveSettle},
		{"ReserveRelease", testReserveRelease},
		{"ReserveReplay", testReserveReplay},
		{"SettleReplay", testSettleReplay},
		{"SettleAndReserve", testSettleAndReserve},
		{"Overrun", testOverrun},
		{"NoCallAtCeiling", testNoCallAtCeiling},
		{"DepthAndAgentCaps", testDepthAndAgentCaps},
		{"RegisterWhenExhausted", testRegisterWhenExhausted},
		{"Deadline", testDeadline},
		{"DeadlinePasses", testDeadlinePasses},
		{"Restore", testRestore},
		{"Concurrent64", testConcurrent},
		{"PlacesFirstComeFirstServed", testPlacesFirstComeFirstServed},
		{"PlaceFreedOnce", testPlaceFreedOnce},
		{"PlaceRunning", testPlaceRunning},
		{"PlaceClaimLapses", testPlaceClaimLapses},
		{"PlaceTurnLapses", testPlaceTurnLapses},
		{"PlacesInvalid", testPlacesInvalid},
		{"PlacesWatched", testPlacesWatched},
		{"PlacesConcurrent", testPlacesConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newLedger(t))
		})
	}
}

var treeSeq atomic.Int64

// NewTree returns a tree id no other test (or earlier run on the same
// store) uses.
func NewTree(t testing.TB) string {
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(t.Name())
	return fmt.Sprintf("%s.%s.%d", name, strconv.FormatInt(time.Now().UnixNano(), 36), treeSeq.Add(1))
}

// setup opens a tree with c and registers agents at depth 0, 1, 2, ...
// in order.
func setup(t *testing.T, l ledger.Ledger, c ledger.Ceiling, agents ...string) string {
	t.Helper()
	ctx := context.Background()
	tree := NewTree(t)
	if err := l.Open(ctx, tree, c); err != nil {
		t.Fatalf("Open(%q) = %v", tree, err)
	}
	for i, a := range agents {
		if err := l.Register(ctx, tree, a, min(i, 1)); err != nil {
			t.Fatalf("Register(%q, %q) = %v", tree, a, err)
		}
	}
	return tree
}

func reserve(t *testing.T, l ledger.Ledger, r ledger.Reservation) ledger.Grant {
	t.Helper()
	g, err := l.Reserve(context.Background(), r)
	if err != nil {
		t.Fatalf("Reserve(%+v) = %v", r, err)
	}
	return g
}

func settle(t *testing.T, l ledger.Ledger, tree, key string, actual ledger.Usage) ledger.Settlement {
	t.Helper()
	s, err := l.Settle(context.Background(), tree, key, actual)
	if err != nil {
		t.Fatalf("Settle(%q, %q) = %v", tree, key, err)
	}
	return s
}

func totals(t *testing.T, l ledger.Ledger, tree string) ledger.Totals {
	t.Helper()
	tot, err := l.Totals(context.Background(), tree)
	if err != nil {
		t.Fatalf("Totals(%q) = %v", tree, err)
	}
	return tot
}

// refusal asserts err is a *ledger.Refusal and returns it.
func refusal(t *testing.T, err error) *ledger.Refusal {
	t.Helper()
	var r *ledger.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error = %v, want a *ledger.Refusal", err)
	}
	if !errors.Is(err, protocol.ErrBudgetExhausted) {
		t.Errorf("errors.Is(%v, protocol.ErrBudgetExhausted) = false", err)
	}
	if pe := protocol.AsError(err); pe.Code != protocol.CodeBudgetExhausted {
		t.Errorf("protocol.AsError(%v).Code = %v, want budget_exhausted", err, pe.Code)
	}
	return r
}

var (
	zero ledger.Usage
	step = ledger.Usage{InputTokens: 100, OutputTokens: 50, CostMicros: 30, Steps: 1}
)

func testOpenOnce(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := NewTree(t)
	c := ledger.Ceiling{Limits: ledger.Limits{Tokens: 100, Steps: 5}, Agents: 3, Depth: 2, Wall: time.Hour}
	before := time.Now()
	if err := l.Open(ctx, tree, c); err != nil {
		t.Fatalf("Open = %v", err)
	}
	after := time.Now()
	bigger := ledger.Ceiling{Limits: ledger.Limits{Tokens: 1_000_000, Steps: 500}, Agents: 30, Depth: 20, Wall: 100 * time.Hour, Start: before.Add(time.Hour)}
	if err := l.Open(ctx, tree, bigger); err != nil {
		t.Fatalf("second Open = %v", err)
	}
	got := totals(t, l, tree)
	start := got.Ceiling.Start
	if start.Before(before.Add(-time.Second)) || start.After(after.Add(time.Second)) {
		t.Errorf("Ceiling.Start = %v, want between %v and %v", start, before, after)
	}
	c.Start = start
	want := ledger.Totals{
		Tree: tree, Ceiling: c, Agents: map[string]ledger.AgentTotals{},
		Remaining: ledger.Limits{InputTokens: ledger.Unlimited, OutputTokens: ledger.Unlimited, Tokens: 100, CostMicros: ledger.Unlimited, Steps: 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Totals after two Opens (-want +got):\n%s", diff)
	}

	// An explicit start is kept, to the microsecond.
	tree2 := NewTree(t)
	s := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	if err := l.Open(ctx, tree2, ledger.Ceiling{Start: s}); err != nil {
		t.Fatalf("Open = %v", err)
	}
	if got := totals(t, l, tree2).Ceiling.Start; !got.Equal(s.Truncate(time.Microsecond)) {
		t.Errorf("Ceiling.Start = %v, want %v", got, s.Truncate(time.Microsecond))
	}
}

func testTreeUnknown(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := NewTree(t)
	r := ledger.Reservation{Tree: tree, Agent: "a", Key: "a.1.0", Estimate: step}
	ops := []struct {
		name string
		call func() error
	}{
		{"Register", func() error { return l.Register(ctx, tree, "a", 0) }},
		{"Reserve", func() error { _, err := l.Reserve(ctx, r); return err }},
		{"Settle", func() error { _, err := l.Settle(ctx, tree, "a.0.0", step); return err }},
		{"SettleAndReserve", func() error { _, _, err := l.SettleAndReserve(ctx, "a.0.0", step, r); return err }},
		{"Release", func() error { return l.Release(ctx, tree, "a.0.0") }},
		{"Totals", func() error { _, err := l.Totals(ctx, tree); return err }},
	}
	for _, op := range ops {
		if err := op.call(); !errors.Is(err, ledger.ErrTreeUnknown) {
			t.Errorf("%s on an unopened tree = %v, want ErrTreeUnknown", op.name, err)
		}
	}
}

func testAgentUnknown(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{}, "root")
	_, err := l.Reserve(context.Background(), ledger.Reservation{Tree: tree, Agent: "stranger", Key: "s.1.0", Estimate: step})
	if !errors.Is(err, ledger.ErrAgentUnknown) {
		t.Fatalf("Reserve by an unregistered agent = %v, want ErrAgentUnknown", err)
	}
	if got := totals(t, l, tree).Reserved; got != zero {
		t.Errorf("Reserved = %+v, want zero", got)
	}
}

func testInvalid(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := setup(t, l, ledger.Ceiling{}, "root")
	ok := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: step}
	with := func(f func(r *ledger.Reservation)) ledger.Reservation { r := ok; f(&r); return r }
	tests := []struct {
		name string
		call func() error
	}{
		{"open empty tree", func() error { return l.Open(ctx, "", ledger.Ceiling{}) }},
		{"open braced tree", func() error { return l.Open(ctx, "a{b}", ledger.Ceiling{}) }},
		{"open negative ceiling", func() error { return l.Open(ctx, NewTree(t), ledger.Ceiling{Limits: ledger.Limits{Steps: -1}}) }},
		{"open negative wall", func() error { return l.Open(ctx, NewTree(t), ledger.Ceiling{Wall: -time.Second}) }},
		{"register empty agent", func() error { return l.Register(ctx, tree, "", 0) }},
		{"register negative depth", func() error { return l.Register(ctx, tree, "x", -1) }},
		{"reserve empty key", func() error { _, err := l.Reserve(ctx, with(func(r *ledger.Reservation) { r.Key = "" })); return err }},
		{"reserve empty agent", func() error { _, err := l.Reserve(ctx, with(func(r *ledger.Reservation) { r.Agent = "" })); return err }},
		{"reserve negative estimate", func() error {
			_, err := l.Reserve(ctx, with(func(r *ledger.Reservation) { r.Estimate.OutputTokens = -1 }))
			return err
		}},
		{"reserve huge estimate", func() error {
			_, err := l.Reserve(ctx, with(func(r *ledger.Reservation) { r.Estimate.CostMicros = ledger.MaxAmount + 1 }))
			return err
		}},
		{"reserve negative cap", func() error {
			_, err := l.Reserve(ctx, with(func(r *ledger.Reservation) { r.Cap.Tokens = -5 }))
			return err
		}},
		{"settle negative actual", func() error { _, err := l.Settle(ctx, tree, "k", ledger.Usage{Steps: -1}); return err }},
		{"settle and reserve one key", func() error { _, _, err := l.SettleAndReserve(ctx, ok.Key, step, ok); return err }},
		{"release empty key", func() error { return l.Release(ctx, tree, "") }},
		{"restore empty agent", func() error {
			_, err := l.Restore(ctx, NewTree(t), ledger.Ceiling{}, map[string]ledger.Usage{"": {}})
			return err
		}},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, protocol.ErrInvalidField) {
			t.Errorf("%s = %v, want protocol.ErrInvalidField", tt.name, err)
		}
	}
	if got := totals(t, l, tree); got.Reserved != zero || len(got.Agents) != 1 {
		t.Errorf("Totals after invalid calls = %+v, want nothing held and one agent", got)
	}
}

// dimensionCases exercises each limited dimension: fits is granted, then
// more is refused with asked and left.
var dimensionCases = []struct {
	name        string
	limits      ledger.Limits
	fits, more  ledger.Usage
	dim         ledger.Dimension
	asked, left int64
}{
	{"input tokens", ledger.Limits{InputTokens: 1000}, ledger.Usage{InputTokens: 900}, ledger.Usage{InputTokens: 101}, ledger.DimInputTokens, 101, 100},
	{"output tokens", ledger.Limits{OutputTokens: 500}, ledger.Usage{OutputTokens: 500}, ledger.Usage{OutputTokens: 1}, ledger.DimOutputTokens, 1, 0},
	{"tokens", ledger.Limits{Tokens: 1000}, ledger.Usage{InputTokens: 600, OutputTokens: 300}, ledger.Usage{InputTokens: 50, OutputTokens: 51}, ledger.DimTokens, 101, 100},
	{"cost", ledger.Limits{CostMicros: 2_000_000}, ledger.Usage{CostMicros: 1_999_999}, ledger.Usage{CostMicros: 2}, ledger.DimCost, 2, 1},
	{"steps", ledger.Limits{Steps: 3}, ledger.Usage{Steps: 3}, ledger.Usage{Steps: 1}, ledger.DimSteps, 1, 0},
	{"first dimension that breaks", ledger.Limits{InputTokens: 10, Steps: 1}, ledger.Usage{InputTokens: 5, Steps: 1}, ledger.Usage{InputTokens: 5, Steps: 1}, ledger.DimSteps, 1, 0},
}

func testTreeCeiling(t *testing.T, l ledger.Ledger) {
	for _, tc := range dimensionCases {
		t.Run(tc.name, func(t *testing.T) {
			tree := setup(t, l, ledger.Ceiling{Limits: tc.limits}, "root")
			g := reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: tc.fits})
			if g.Reserved != tc.fits || g.State != ledger.StateReserved || g.Replayed {
				t.Errorf("Grant = %+v, want reserved %+v, fresh", g, tc.fits)
			}
			_, err := l.Reserve(context.Background(), ledger.Reservation{Tree: tree, Agent: "root", Key: "root.2.0", Estimate: tc.more})
			r := refusal(t, err)
			want := &ledger.Refusal{Tree: tree, Agent: "root", Scope: ledger.ScopeTree, Dimension: tc.dim, Asked: tc.asked, Remaining: tc.left, Limit: dimLimit(tc.limits, tc.dim)}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("Refusal (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ledger.ErrCeilingReached) || errors.Is(err, ledger.ErrRunCap) {
				t.Errorf("errors.Is(%v): ErrCeilingReached %v, ErrRunCap %v; want true, false", err, errors.Is(err, ledger.ErrCeilingReached), errors.Is(err, ledger.ErrRunCap))
			}
			if r.Outcome() != protocol.OutcomeBudgetCeilingReached {
				t.Errorf("Outcome() = %q, want %q", r.Outcome(), protocol.OutcomeBudgetCeilingReached)
			}
			if got := totals(t, l, tree).Reserved; got != tc.fits {
				t.Errorf("Reserved after a refusal = %+v, want %+v (the refusal holds nothing)", got, tc.fits)
			}
			// The same refusal on a replay of the refused key: refusals are
			// not remembered, and nothing is held.
			if _, err := l.Reserve(context.Background(), ledger.Reservation{Tree: tree, Agent: "root", Key: "root.2.0", Estimate: tc.more}); !errors.Is(err, ledger.ErrCeilingReached) {
				t.Errorf("replayed refused Reserve = %v, want ErrCeilingReached", err)
			}
		})
	}
}

func dimLimit(l ledger.Limits, d ledger.Dimension) int64 {
	switch d {
	case ledger.DimInputTokens:
		return l.InputTokens
	case ledger.DimOutputTokens:
		return l.OutputTokens
	case ledger.DimTokens:
		return l.Tokens
	case ledger.DimCost:
		return l.CostMicros
	case ledger.DimSteps:
		return l.Steps
	}
	return 0
}

func testRunCap(t *testing.T, l ledger.Ledger) {
	for _, tc := range dimensionCases {
		t.Run(tc.name, func(t *testing.T) {
			tree := setup(t, l, ledger.Ceiling{}, "root", "other")
			reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: tc.fits, Cap: tc.limits})
			_, err := l.Reserve(context.Background(), ledger.Reservation{Tree: tree, Agent: "root", Key: "root.2.0", Estimate: tc.more, Cap: tc.limits})
			r := refusal(t, err)
			want := &ledger.Refusal{Tree: tree, Agent: "root", Scope: ledger.ScopeRun, Dimension: tc.dim, Asked: tc.asked, Remaining: tc.left, Limit: dimLimit(tc.limits, tc.dim)}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("Refusal (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ledger.ErrRunCap) || errors.Is(err, ledger.ErrCeilingReached) {
				t.Errorf("errors.Is(%v): ErrRunCap %v, ErrCeilingReached %v; want true, false", err, errors.Is(err, ledger.ErrRunCap), errors.Is(err, ledger.ErrCeilingReached))
			}
			if r.Outcome() != protocol.OutcomeCostBudgetExceeded {
				t.Errorf("Outcome() = %q, want %q", r.Outcome(), protocol.OutcomeCostBudgetExceeded)
			}
			// The cap is the agent's own: another agent with the same cap
			// still draws.
			reserve(t, l, ledger.Reservation{Tree: tree, Agent: "other", Key: "other.1.0", Estimate: tc.more, Cap: tc.limits})
		})
	}
}

func testChildCannotRaise(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	c := ledger.Ceiling{Limits: ledger.Limits{Tokens: 1000}}
	tree := setup(t, l, c, "root", "child")
	// The child re-opens the tree with a far larger ceiling: nothing changes.
	if err := l.Open(ctx, tree, ledger.Ceiling{Limits: ledger.Limits{Tokens: 1 << 40}}); err != nil {
		t.Fatalf("Open again = %v", err)
	}
	if got := totals(t, l, tree).Ceiling.Tokens; got != 1000 {
		t.Errorf("Ceiling.Tokens after a second Open = %d, want 1000", got)
	}
	// Its own cap above the tree's ceiling does not help either.
	_, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: "child", Key: "child.1.0",
		Estimate: ledger.Usage{InputTokens: 1001}, Cap: ledger.Limits{Tokens: 1 << 40}})
	if r := refusal(t, err); r.Scope != ledger.ScopeTree || r.Dimension != ledger.DimTokens {
		t.Errorf("Refusal = %+v, want the tree's tokens ceiling", r)
	}
	// What the child draws, the root no longer can.
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "child", Key: "child.2.0", Estimate: ledger.Usage{InputTokens: 800}, Cap: ledger.Limits{Tokens: 1 << 40}})
	if _, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: ledger.Usage{InputTokens: 201}}); !errors.Is(err, ledger.ErrCeilingReached) {
		t.Errorf("root Reserve beyond what the child left = %v, want ErrCeilingReached", err)
	}
}

func testReserveSettle(t *testing.T, l ledger.Ledger) {
	c := ledger.Ceiling{Limits: ledger.Limits{InputTokens: 10_000, OutputTokens: 5000, Tokens: 12_000, CostMicros: 1_000_000, Steps: 10}}
	tree := setup(t, l, c, "root", "child")
	est := ledger.Usage{InputTokens: 1000, OutputTokens: 2000, CostMicros: 300, Steps: 1}
	g := reserve(t, l, ledger.Reservation{Tree: tree, Agent: "child", Key: "child.1.0", Estimate: est})
	want := ledger.Grant{Key: "child.1.0", Reserved: est, State: ledger.StateReserved, Balance: ledger.Balance{
		Reserved: est, AgentReserved: est,
		Remaining: ledger.Limits{InputTokens: 9000, OutputTokens: 3000, Tokens: 9000, CostMicros: 999_700, Steps: 9},
	}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("Grant (-want +got):\n%s", diff)
	}
	actual := ledger.Usage{InputTokens: 1000, OutputTokens: 700, CostMicros: 170, Steps: 1}
	s := settle(t, l, tree, "child.1.0", actual)
	wantS := ledger.Settlement{Key: "child.1.0", Charged: actual, Balance: ledger.Balance{
		Spent: actual, AgentSpent: actual,
		Remaining: ledger.Limits{InputTokens: 9000, OutputTokens: 4300, Tokens: 10_300, CostMicros: 999_830, Steps: 9},
	}}
	if diff := cmp.Diff(wantS, s); diff != "" {
		t.Errorf("Settlement (-want +got):\n%s", diff)
	}
	// A second draw by the root: per-agent and tree totals.
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: est})
	got := totals(t, l, tree)
	wantT := map[string]ledger.AgentTotals{
		"root":  {Depth: 0, Reserved: est},
		"child": {Depth: 1, Spent: actual},
	}
	if diff := cmp.Diff(wantT, got.Agents); diff != "" {
		t.Errorf("Totals.Agents (-want +got):\n%s", diff)
	}
	if got.Spent != actual || got.Reserved != est {
		t.Errorf("Totals spent %+v reserved %+v, want %+v and %+v", got.Spent, got.Reserved, actual, est)
	}
	wantRem := ledger.Limits{InputTokens: 8000, OutputTokens: 2300, Tokens: 7300, CostMicros: 999_530, Steps: 8}
	if got.Remaining != wantRem {
		t.Errorf("Totals.Remaining = %+v, want %+v", got.Remaining, wantRem)
	}
	if ar := s.Balance.AgentRemaining(ledger.Limits{Steps: 4}); ar != (ledger.Limits{InputTokens: ledger.Unlimited, OutputTokens: ledger.Unlimited, Tokens: ledger.Unlimited, CostMicros: ledger.Unlimited, Steps: 3}) {
		t.Errorf("AgentRemaining = %+v", ar)
	}
}

func testReserveRelease(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := setup(t, l, ledger.Ceiling{Limits: ledger.Limits{Steps: 1}}, "root")
	r := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: step}
	reserve(t, l, r)
	if err := l.Release(ctx, tree, r.Key); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if err := l.Release(ctx, tree, r.Key); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	if got := totals(t, l, tree); got.Reserved != zero || got.Spent != zero || got.Agents["root"].Reserved != zero {
		t.Errorf("Totals after Release = %+v, want nothing spent or held", got)
	}
	if _, err := l.Settle(ctx, tree, r.Key, step); !errors.Is(err, ledger.ErrReleased) {
		t.Errorf("Settle after Release = %v, want ErrReleased", err)
	}
	// The released step is free again: the ceiling of one step allows
	// another.
	r2 := r
	r2.Key = "root.1.1"
	reserve(t, l, r2)
	settle(t, l, tree, r2.Key, step)
	if err := l.Release(ctx, tree, r2.Key); err != nil {
		t.Errorf("Release after Settle = %v, want nil", err)
	}
	if got := totals(t, l, tree).Spent; got != step {
		t.Errorf("Spent after Release of a settled key = %+v, want %+v (settled stays charged)", got, step)
	}
	if err := l.Release(ctx, tree, "root.9.0"); !errors.Is(err, ledger.ErrReservationUnknown) {
		t.Errorf("Release of an unknown key = %v, want ErrReservationUnknown", err)
	}
	if _, err := l.Settle(ctx, tree, "root.9.0", step); !errors.Is(err, ledger.ErrReservationUnknown) {
		t.Errorf("Settle of an unknown key = %v, want ErrReservationUnknown", err)
	}
}

func testReserveReplay(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{Limits: ledger.Limits{Steps: 10}}, "root")
	r := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: step}
	first := reserve(t, l, r)
	// A replay, even with another estimate, returns the first answer.
	other := r
	other.Estimate = ledger.Usage{InputTokens: 5, Steps: 1}
	again := reserve(t, l, other)
	want := first
	want.Replayed = true
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("replayed Grant (-want +got):\n%s", diff)
	}
	if got := totals(t, l, tree).Reserved; got != step {
		t.Errorf("Reserved after a replay = %+v, want %+v (held once)", got, step)
	}
	settle(t, l, tree, r.Key, step)
	afterSettle := reserve(t, l, r)
	want.State = ledger.StateSettled
	if diff := cmp.Diff(want, afterSettle); diff != "" {
		t.Errorf("Grant replayed after Settle (-want +got):\n%s", diff)
	}
	if got := totals(t, l, tree); got.Spent != step || got.Reserved != zero {
		t.Errorf("Totals after replays = spent %+v reserved %+v, want %+v and zero", got.Spent, got.Reserved, step)
	}
	r3 := r
	r3.Key = "root.2.0"
	reserve(t, l, r3)
	if err := l.Release(context.Background(), tree, r3.Key); err != nil {
		t.Fatal(err)
	}
	if g := reserve(t, l, r3); g.State != ledger.StateReleased || !g.Replayed {
		t.Errorf("Grant replayed after Release = %+v, want state released, replayed", g)
	}
}

func testSettleReplay(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{}, "root")
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: step})
	first := settle(t, l, tree, "root.1.0", step)
	twice := ledger.Usage{InputTokens: 2 * step.InputTokens, OutputTokens: 2 * step.OutputTokens, CostMicros: 2 * step.CostMicros, Steps: 2}
	again := settle(t, l, tree, "root.1.0", twice)
	want := first
	want.Replayed = true
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("replayed Settlement (-want +got):\n%s", diff)
	}
	if got := totals(t, l, tree); got.Spent != step || got.Agents["root"].Spent != step {
		t.Errorf("Spent after a replayed Settle = %+v, want %+v (charged once)", got.Spent, step)
	}
}

func testSettleAndReserve(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := setup(t, l, ledger.Ceiling{Limits: ledger.Limits{Steps: 3}}, "root")
	r1 := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: step}
	reserve(t, l, r1)
	actual := ledger.Usage{InputTokens: 90, OutputTokens: 10, CostMicros: 20, Steps: 1}
	r2 := r1
	r2.Key = "root.2.0"
	s, g, err := l.SettleAndReserve(ctx, r1.Key, actual, r2)
	if err != nil {
		t.Fatalf("SettleAndReserve = %v", err)
	}
	if s.Charged != actual || s.Replayed || s.Balance.Spent != actual || s.Balance.Reserved != zero {
		t.Errorf("Settlement = %+v, want %+v charged with nothing held", s, actual)
	}
	if g.Key != r2.Key || g.State != ledger.StateReserved || g.Balance.Reserved != step || g.Balance.Spent != actual {
		t.Errorf("Grant = %+v, want %s held on top of the settlement", g, r2.Key)
	}
	// Replayed as a whole: both answers again, nothing charged.
	s2, g2, err := l.SettleAndReserve(ctx, r1.Key, step, r2)
	if err != nil {
		t.Fatalf("replayed SettleAndReserve = %v", err)
	}
	s.Replayed, g.Replayed = true, true
	if diff := cmp.Diff(s, s2); diff != "" {
		t.Errorf("replayed Settlement (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(g, g2); diff != "" {
		t.Errorf("replayed Grant (-want +got):\n%s", diff)
	}
	// The step ceiling of 3 refuses the fourth; the third step's
	// settlement stands.
	r3, r4 := r1, r1
	r3.Key, r4.Key = "root.3.0", "root.4.0"
	if _, _, err := l.SettleAndReserve(ctx, r2.Key, actual, r3); err != nil {
		t.Fatalf("SettleAndReserve(2→3) = %v", err)
	}
	s4, _, err := l.SettleAndReserve(ctx, r3.Key, actual, r4)
	if r := refusal(t, err); r.Dimension != ledger.DimSteps {
		t.Errorf("Refusal = %+v, want steps", r)
	}
	if s4.Charged != actual || s4.Balance.Spent.Steps != 3 {
		t.Errorf("Settlement with the refusal = %+v, want 3 steps spent", s4)
	}
	got := totals(t, l, tree)
	if got.Spent.Steps != 3 || got.Reserved != zero {
		t.Errorf("Totals = spent %+v reserved %+v, want 3 steps and nothing held", got.Spent, got.Reserved)
	}
	// A failed settle reserves nothing.
	tree2 := setup(t, l, ledger.Ceiling{}, "root")
	a := ledger.Reservation{Tree: tree2, Agent: "root", Key: "root.1.0", Estimate: step}
	reserve(t, l, a)
	if err := l.Release(ctx, tree2, a.Key); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Key = "root.2.0"
	if _, _, err := l.SettleAndReserve(ctx, a.Key, step, b); !errors.Is(err, ledger.ErrReleased) {
		t.Errorf("SettleAndReserve of a released key = %v, want ErrReleased", err)
	}
	if _, _, err := l.SettleAndReserve(ctx, "root.9.0", step, b); !errors.Is(err, ledger.ErrReservationUnknown) {
		t.Errorf("SettleAndReserve of an unknown key = %v, want ErrReservationUnknown", err)
	}
	if got := totals(t, l, tree2); got.Reserved != zero || got.Spent != zero {
		t.Errorf("Totals after failed settles = %+v, want nothing", got)
	}
}

func testOverrun(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := setup(t, l, ledger.Ceiling{Limits: ledger.Limits{Tokens: 100}}, "root")
	r := func(key string, in int64) ledger.Reservation {
		return ledger.Reservation{Tree: tree, Agent: "root", Key: key, Estimate: ledger.Usage{InputTokens: in}}
	}
	reserve(t, l, r("root.1.0", 60))
	s := settle(t, l, tree, "root.1.0", ledger.Usage{InputTokens: 90})
	if s.Balance.Remaining.Tokens != 10 {
		t.Errorf("Remaining.Tokens = %d, want 10", s.Balance.Remaining.Tokens)
	}
	_, err := l.Reserve(ctx, r("root.2.0", 20))
	if ref := refusal(t, err); ref.Asked != 20 || ref.Remaining != 10 {
		t.Errorf("Refusal = %+v, want asked 20, 10 left", ref)
	}
	reserve(t, l, r("root.3.0", 10))
	settle(t, l, tree, "root.3.0", ledger.Usage{InputTokens: 40})
	got := totals(t, l, tree)
	if got.Spent.InputTokens != 130 || got.Remaining.Tokens != 0 {
		t.Errorf("Totals = %+v, want 130 spent (an overrun of what was in flight) and 0 left", got)
	}
}

func testNoCallAtCeiling(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{Limits: ledger.Limits{CostMicros: 1000}}, "root")
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: ledger.Usage{CostMicros: 1000}})
	settle(t, l, tree, "root.1.0", ledger.Usage{CostMicros: 1000})
	// An unpriced call asks no cost, but the tree has none left: refused.
	_, err := l.Reserve(context.Background(), ledger.Reservation{Tree: tree, Agent: "root", Key: "root.2.0", Estimate: ledger.Usage{InputTokens: 10, Steps: 1}})
	if r := refusal(t, err); r.Dimension != ledger.DimCost || r.Asked != 0 || r.Remaining != 0 {
		t.Errorf("Refusal = %+v, want cost, asked 0, 0 left", r)
	}
}

func testDepthAndAgentCaps(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := setup(t, l, ledger.Ceiling{Agents: 3, Depth: 2})
	for _, a := range []struct {
		id    string
		depth int
	}{{"root", 0}, {"a", 1}, {"a", 1}, {"b", 2}} {
		if err := l.Register(ctx, tree, a.id, a.depth); err != nil {
			t.Fatalf("Register(%q, %d) = %v", a.id, a.depth, err)
		}
	}
	err := l.Register(ctx, tree, "c", 3)
	if r := refusal(t, err); r.Dimension != ledger.DimDepth || r.Asked != 3 || r.Limit != 2 || r.Agent != "c" {
		t.Errorf("Refusal = %+v, want depth 3 of 2 for c", r)
	}
	if !errors.Is(err, ledger.ErrDepthCap) || errors.Is(err, ledger.ErrCeilingReached) {
		t.Errorf("errors.Is(%v, ErrDepthCap) = false, or it matches ErrCeilingReached", err)
	}
	err = l.Register(ctx, tree, "d", 1)
	if r := refusal(t, err); r.Dimension != ledger.DimAgents || r.Limit != 3 {
		t.Errorf("Refusal = %+v, want agents 3", r)
	}
	if !errors.Is(err, ledger.ErrAgentCap) {
		t.Errorf("errors.Is(%v, ErrAgentCap) = false", err)
	}
	want := map[string]ledger.AgentTotals{"root": {Depth: 0}, "a": {Depth: 1}, "b": {Depth: 2}}
	if diff := cmp.Diff(want, totals(t, l, tree).Agents); diff != "" {
		t.Errorf("Agents (-want +got):\n%s", diff)
	}
	// Registering a known agent again still succeeds at the cap.
	if err := l.Register(ctx, tree, "b", 2); err != nil {
		t.Errorf("Register of a known agent at the cap = %v, want nil", err)
	}
}

func testRegisterWhenExhausted(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{Limits: ledger.Limits{OutputTokens: 100}}, "root")
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: ledger.Usage{OutputTokens: 100}})
	err := l.Register(context.Background(), tree, "child", 1)
	if r := refusal(t, err); r.Dimension != ledger.DimOutputTokens || !errors.Is(err, ledger.ErrCeilingReached) {
		t.Errorf("Register with nothing left = %v, want the output-token ceiling", err)
	}
}

func testDeadline(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	start := time.Now().Add(-2 * time.Hour)
	c := ledger.Ceiling{Wall: time.Hour, Start: start}
	tree := NewTree(t)
	if ok, err := l.Restore(ctx, tree, c, map[string]ledger.Usage{"root": {}}); err != nil || !ok {
		t.Fatalf("Restore = %v, %v", ok, err)
	}
	_, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: step})
	r := refusal(t, err)
	wantDL := time.UnixMicro(start.UnixMicro()).Add(time.Hour)
	if r.Dimension != ledger.DimWall || r.Scope != ledger.ScopeTree || !r.Deadline.Equal(wantDL) {
		t.Errorf("Refusal = %+v, want the wall deadline %v", r, wantDL)
	}
	if !errors.Is(err, ledger.ErrCeilingReached) || r.Outcome() != protocol.OutcomeBudgetCeilingReached {
		t.Errorf("deadline refusal %v: want ErrCeilingReached and budget_ceiling_reached", err)
	}
	if err := l.Register(ctx, tree, "child", 1); !errors.Is(err, ledger.ErrCeilingReached) {
		t.Errorf("Register past the deadline = %v, want ErrCeilingReached", err)
	}
	if dl, ok := totals(t, l, tree).Ceiling.Deadline(); !ok || !dl.Equal(wantDL) {
		t.Errorf("Ceiling.Deadline() = %v, %v; want %v", dl, ok, wantDL)
	}
	// A tree inside its deadline draws.
	live := setup(t, l, ledger.Ceiling{Wall: time.Hour}, "root")
	reserve(t, l, ledger.Reservation{Tree: live, Agent: "root", Key: "root.1.0", Estimate: step})
}

func testDeadlinePasses(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{Wall: 300 * time.Millisecond}, "root")
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.0.0", Estimate: step})
	i := 0
	testkit.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		i++
		_, err := l.Reserve(context.Background(), ledger.Reservation{Tree: tree, Agent: "root", Key: fmt.Sprintf("root.%d.0", i), Estimate: ledger.Usage{Steps: 1}})
		if errors.Is(err, ledger.ErrCeilingReached) {
			return nil
		}
		if err != nil {
			t.Fatalf("Reserve = %v", err)
		}
		return errors.New("still drawing after the deadline")
	})
}

func testRestore(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := NewTree(t)
	c := ledger.Ceiling{Limits: ledger.Limits{Tokens: 1000, Steps: 10}, Agents: 4, Start: time.Now().Add(-time.Minute), Wall: time.Hour}
	spent := map[string]ledger.Usage{
		"root":  {InputTokens: 300, OutputTokens: 100, CostMicros: 40, Steps: 3},
		"child": {InputTokens: 200, OutputTokens: 50, CostMicros: 20, Steps: 2},
		"idle":  {},
	}
	ok, err := l.Restore(ctx, tree, c, spent)
	if err != nil || !ok {
		t.Fatalf("Restore = %v, %v; want true, nil", ok, err)
	}
	sum := ledger.Usage{InputTokens: 500, OutputTokens: 150, CostMicros: 60, Steps: 5}
	c.Start = time.UnixMicro(c.Start.UnixMicro())
	want := ledger.Totals{
		Tree: tree, Ceiling: c, Spent: sum,
		Remaining: ledger.Limits{InputTokens: ledger.Unlimited, OutputTokens: ledger.Unlimited, Tokens: 350, CostMicros: ledger.Unlimited, Steps: 5},
		Agents: map[string]ledger.AgentTotals{
			"root": {Depth: -1, Spent: spent["root"]}, "child": {Depth: -1, Spent: spent["child"]}, "idle": {Depth: -1},
		},
	}
	if diff := cmp.Diff(want, totals(t, l, tree)); diff != "" {
		t.Errorf("Totals after Restore (-want +got):\n%s", diff)
	}
	// The agent cap counts restored agents; a restored agent registering
	// again takes its depth and is not counted twice.
	if err := l.Register(ctx, tree, "child", 1); err != nil {
		t.Errorf("Register of a restored agent = %v", err)
	}
	if err := l.Register(ctx, tree, "fourth", 1); err != nil {
		t.Errorf("Register of a fourth agent = %v", err)
	}
	if err := l.Register(ctx, tree, "fifth", 1); !errors.Is(err, ledger.ErrAgentCap) {
		t.Errorf("Register of a fifth agent = %v, want ErrAgentCap", err)
	}
	if d := totals(t, l, tree).Agents["child"].Depth; d != 1 {
		t.Errorf("restored child's Depth after Register = %d, want 1", d)
	}
	// Restored agents draw; the restored spend counts against the ceiling.
	reserve(t, l, ledger.Reservation{Tree: tree, Agent: "child", Key: "child.3.0", Estimate: ledger.Usage{InputTokens: 350}})
	if _, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.4.0", Estimate: ledger.Usage{InputTokens: 1}}); !errors.Is(err, ledger.ErrCeilingReached) {
		t.Errorf("Reserve beyond the restored ceiling = %v, want ErrCeilingReached", err)
	}
	// A second Restore of a live tree changes nothing.
	ok, err = l.Restore(ctx, tree, ledger.Ceiling{}, map[string]ledger.Usage{"root": {}})
	if err != nil || ok {
		t.Fatalf("second Restore = %v, %v; want false, nil", ok, err)
	}
	got := totals(t, l, tree)
	if got.Spent != sum || got.Reserved.InputTokens != 350 || got.Ceiling.Tokens != 1000 {
		t.Errorf("Totals after a second Restore = %+v, want the first restore's and the draw", got)
	}
}

func testConcurrent(t *testing.T, l ledger.Ledger) {
	const clients = 64
	tree := setup(t, l, HammerCeiling)
	agents := make([]string, clients)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent%02d", i)
		if err := l.Register(context.Background(), tree, agents[i], 1); err != nil {
			t.Fatal(err)
		}
	}
	tally, err := Hammer(context.Background(), l, tree, agents)
	if err != nil {
		t.Fatalf("Hammer = %v", err)
	}
	CheckHammer(t, totals(t, l, tree), []Tally{tally}, clients)
}
