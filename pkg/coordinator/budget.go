package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// The run's draws on the budget ledger. Before every provider call the
// driver reserves an estimate under the key run.step.attempt; the call
// happens only if the reservation fits every ceiling. The answer settles
// the key with the usage the provider reported, and the step's record
// lists what it drew, so the trace, not the ledger, holds the truth: a
// ledger that lost the tree is rebuilt from the traces of its agents.

// errStaleKey says a reservation key was settled or released by an earlier
// driver of the run: the call must go out under a new attempt.
var errStaleKey = errors.New("the reservation of this attempt is already spent")

// ceilingOf is the ceiling of the tree whose root has contract c and
// started at start: the contract's tree budget, each dimension it leaves
// out taken from the root's own caps.
func ceilingOf(c *protocol.Contract, start time.Time) ledger.Ceiling {
	var t protocol.TreeBudget
	if c.Budget.Tree != nil {
		t = *c.Budget.Tree
	}
	return ledger.Ceiling{
		Limits: ledger.Limits{
			Tokens:     cmp.Or(t.MaxTokens, c.Budget.MaxTokens),
			CostMicros: cmp.Or(t.MaxCostMicros, c.Budget.MaxCostMicros),
			Steps:      t.MaxSteps,
		},
		Agents: cmp.Or(t.MaxAgents, protocol.DefaultMaxAgents),
		Depth:  cmp.Or(t.MaxDepth, protocol.DefaultMaxDepth),
		Wall:   time.Duration(cmp.Or(t.MaxWall, c.Budget.MaxWall)),
		Start:  start,
	}
}

// ownCeiling reports whether a root's tree ceiling in dimension dim is
// its own cap, because the tree budget left that dimension out.
func ownCeiling(c *protocol.Contract, dim ledger.Dimension) bool {
	var t protocol.TreeBudget
	if c.Budget.Tree != nil {
		t = *c.Budget.Tree
	}
	switch dim {
	case ledger.DimTokens:
		return t.MaxTokens == 0 && c.Budget.MaxTokens > 0
	case ledger.DimCost:
		return t.MaxCostMicros == 0 && c.Budget.MaxCostMicros > 0
	case ledger.DimWall:
		return t.MaxWall == 0 && c.Budget.MaxWall > 0
	}
	return false
}

// caps is the run's own budget on the ledger. The step cap is not among
// them: running out of steps ends a run step_cap_reached, by the state
// machine.
func (s *runState) caps() ledger.Limits {
	return ledger.Limits{Tokens: s.contract.Budget.MaxTokens, CostMicros: s.contract.Budget.MaxCostMicros}
}

// admit opens the tree (for a root's first step) and registers the run
// with it. It returns the outcome that ends the run before any call when
// the tree refuses it, or an error only when ctx ended.
func (d *driver) admit(ctx context.Context) (protocol.Outcome, string, error) {
	s := d.s
	if s.tree == s.run && s.step == 0 {
		err := d.withLedger(ctx, "open the tree", func() error {
			if s.startedBy != d.c.cfg.ID {
				// A root started elsewhere (resumed, taken over) may have
				// sub-agents that drew before its first step was
				// committed: a ledger that lost the tree has it rebuilt
				// from their traces, not opened empty.
				return d.rebuild(ctx)
			}
			return d.c.ledger.Open(ctx, s.tree, ceilingOf(s.contract, s.started))
		})
		if err != nil {
			return d.refusedBy(err)
		}
	}
	err := d.withLedger(ctx, "register the run", func() error {
		return d.c.ledger.Register(ctx, s.tree, s.run, s.depth)
	})
	if err != nil {
		d.countRefusal(err)
		return d.refusedBy(err)
	}
	return "", "", nil
}

// refusedBy maps what the ledger answered to the outcome that ends the
// run: a refusal's own outcome (agent and depth caps refuse the run), and
// failed for anything else but the end of ctx.
func (d *driver) refusedBy(err error) (protocol.Outcome, string, error) {
	var r *ledger.Refusal
	if errors.As(err, &r) {
		o := r.Outcome()
		if o == "" {
			o = protocol.OutcomeRefused
		}
		if r.Scope == ledger.ScopeTree && r.Tree == d.s.run && ownCeiling(d.s.contract, r.Dimension) {
			// A root's tree ceiling taken from its own cap is that cap.
			o = protocol.OutcomeCostBudgetExceeded
			if r.Dimension == ledger.DimWall {
				o = protocol.OutcomeTimeBudgetExceeded
			}
		}
		return o, r.Error(), nil
	}
	if ctxErr := ctxEnded(err); ctxErr != nil {
		return "", "", ctxErr
	}
	return protocol.OutcomeFailed, "the budget ledger: " + err.Error(), nil
}

// ctxEnded returns err if it is the end of a context.
func ctxEnded(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// reserve holds the estimate of one provider call. It returns a *Refusal
// when a ceiling leaves no room, errStaleKey when the key's reservation
// was already spent, or the end of ctx.
func (d *driver) reserve(ctx context.Context, key string, estimate ledger.Usage) error {
	s := d.s
	var g ledger.Grant
	err := d.withLedger(ctx, "reserve", func() error {
		var err error
		g, err = d.c.ledger.Reserve(ctx, ledger.Reservation{Tree: s.tree, Agent: s.run, Key: key, Estimate: estimate, Cap: s.caps()})
		return err
	})
	if err != nil {
		d.countRefusal(err)
		return err
	}
	if g.State != ledger.StateReserved {
		return errStaleKey
	}
	d.c.metrics.LedgerDraw(metrics.DrawReserved)
	return nil
}

// countRefusal counts a draw that failed: refused by a budget, or not
// answered.
func (d *driver) countRefusal(err error) {
	var r *ledger.Refusal
	if !errors.As(err, &r) {
		if ctxEnded(err) == nil {
			d.c.metrics.LedgerDraw(metrics.DrawFailed)
		}
		return
	}
	d.c.metrics.LedgerDraw(metrics.DrawRefused)
	switch r.Dimension {
	case ledger.DimCost:
		d.c.metrics.LedgerRefusal(metrics.BudgetCost)
	case ledger.DimSteps:
		d.c.metrics.LedgerRefusal(metrics.BudgetSteps)
	case ledger.DimWall:
		d.c.metrics.LedgerRefusal(metrics.BudgetWall)
	case ledger.DimAgents:
		d.c.metrics.LedgerRefusal(metrics.BudgetAgents)
	case ledger.DimDepth:
		d.c.metrics.LedgerRefusal(metrics.BudgetDepth)
	default:
		d.c.metrics.LedgerRefusal(metrics.BudgetTokens)
	}
}

// settle charges a provider call's usage under its key and reports the
// draw, which the step's record keeps. A ledger that cannot take the
// charge (the reservation was lost with the tree and the tree is full) is
// logged: the provider was paid, the trace says so, and the next rebuild
// counts it.
func (d *driver) settle(ctx context.Context, step int, key string, turn *protocol.Turn, cost *protocol.Cost) (draw protocol.Draw, replayed bool) {
	fault.Hit(fault.BeforeSettle)
	s := d.s
	actual := ledger.Usage{InputTokens: turn.Usage.InputTokens, OutputTokens: turn.Usage.OutputTokens, CostMicros: cost.Micros, Steps: 1}
	draw = protocol.Draw{Key: key, Spend: spendOf(actual)}
	var st ledger.Settlement
	err := d.afterCall(ctx, "settle", func(ctx context.Context) error {
		var err error
		st, err = d.c.ledger.Settle(ctx, s.tree, key, actual)
		if errors.Is(err, ledger.ErrReservationUnknown) {
			// Lost with the tree's state: hold it again, uncapped (the
			// call was made), and settle that.
			if _, err = d.c.ledger.Reserve(ctx, ledger.Reservation{Tree: s.tree, Agent: s.run, Key: key, Estimate: actual}); err == nil {
				st, err = d.c.ledger.Settle(ctx, s.tree, key, actual)
			}
		}
		return err
	})
	if err != nil {
		d.c.metrics.LedgerDraw(metrics.DrawFailed)
		d.log.Warn("the ledger did not take a call's charge; the trace keeps it", "key", key, "err", err)
		return draw, false
	}
	d.c.metrics.LedgerDraw(metrics.DrawSettled)
	if !st.Replayed {
		d.c.metrics.Spent(st.Charged.InputTokens, st.Charged.OutputTokens, st.Charged.CostMicros)
	}
	draw.Spend = spendOf(st.Charged) // a replay's first charge, which is what the ledger holds
	b := d.budgetsOf(st.Balance)
	b.Drawn = &draw.Spend
	s.budgets = b
	d.c.emit(s.run, step, protocol.EventSpendDraw, &protocol.Event{Tokens: actual.Tokens(), Budgets: b})
	return draw, st.Replayed
}

// chargeLost charges the calls a step task's earlier deliveries may have
// made before their workers died: their answers are lost, so each is
// charged the reservation's estimate, the most it could have cost, under
// its own key. It errs toward charging a call that never happened (a
// worker that died before calling), never toward dropping one that did.
func (d *driver) chargeLost(ctx context.Context, step int, key string, deliveries int, estimate ledger.Usage) {
	s := d.s
	for n := 1; n < deliveries; n++ {
		lost := fmt.Sprintf("%s.lost%d", key, n)
		var st ledger.Settlement
		err := d.afterCall(ctx, "charge a lost call", func(ctx context.Context) error {
			if _, err := d.c.ledger.Reserve(ctx, ledger.Reservation{Tree: s.tree, Agent: s.run, Key: lost, Estimate: estimate}); err != nil {
				return err
			}
			var err error
			st, err = d.c.ledger.Settle(ctx, s.tree, lost, estimate)
			return err
		})
		draw := protocol.Draw{Key: lost, Spend: spendOf(estimate)}
		if err == nil {
			draw.Spend = spendOf(st.Charged) // a replay's first charge, which is what the ledger holds
		}
		d.draws = append(d.draws, draw)
		if err != nil {
			d.log.Warn("the ledger did not take a lost call's charge; the trace keeps it", "key", lost, "err", err)
			continue
		}
		d.log.Info("charged a call lost with its worker", "key", lost)
		b := d.budgetsOf(st.Balance)
		b.Drawn = &draw.Spend
		s.budgets = b
		d.c.emit(s.run, step, protocol.EventSpendDraw, &protocol.Event{Tokens: estimate.Tokens(), Text: "a call lost with its worker, charged at its estimate", Budgets: b})
	}
}

// keepSettled records in the step in hand what an earlier driver settled
// under key, read back from the ledger (a settle replay charges nothing
// more), when its answer cannot be used.
func (d *driver) keepSettled(ctx context.Context, key string) {
	var st ledger.Settlement
	err := d.afterCall(ctx, "read a settled call back", func(ctx context.Context) error {
		var err error
		st, err = d.c.ledger.Settle(ctx, d.s.tree, key, ledger.Usage{})
		return err
	})
	if err != nil || !st.Replayed {
		return // released, not settled: nothing was charged
	}
	d.draws = append(d.draws, protocol.Draw{Key: key, Spend: spendOf(st.Charged)})
}

// release gives back a reservation whose call did not happen or failed
// without usage.
func (d *driver) release(ctx context.Context, key string) {
	err := d.afterCall(ctx, "release", func(ctx context.Context) error {
		err := d.c.ledger.Release(ctx, d.s.tree, key)
		if errors.Is(err, ledger.ErrReservationUnknown) {
			return nil
		}
		return err
	})
	if err != nil {
		d.c.metrics.LedgerDraw(metrics.DrawFailed)
		d.log.Warn("release a reservation", "key", key, "err", err)
		return
	}
	if err == nil {
		d.c.metrics.LedgerDraw(metrics.DrawReleased)
	}
}

// afterCall runs a ledger operation that accounts for a call already made
// or given up (settle, release, a lost call's charge) with withLedger, on
// ctx while it lasts: when the run's clock or the coordinator's life ends
// first, the books are still kept, with a few seconds of its own.
func (d *driver) afterCall(ctx context.Context, what string, op func(context.Context) error) error {
	err := d.withLedger(ctx, what, func() error { return op(ctx) })
	if err == nil || ctx.Err() == nil {
		return err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return d.withLedger(dctx, what, func() error { return op(dctx) })
}

// estimate is what a provider call may use at most: the request's size in
// tokens (a generous four bytes a token), its max output, their price, and
// one step.
func (d *driver) estimate(requestBytes int) ledger.Usage {
	in := int64(requestBytes/4 + 1)
	out := int64(d.s.contract.Provider.MaxOutputTokens)
	micros, _ := d.c.cfg.Prices.Cost(d.s.contract.Provider.Model, in, out)
	return ledger.Usage{InputTokens: in, OutputTokens: out, CostMicros: micros, Steps: 1}
}

// withLedger runs one ledger operation until it gives an answer: a tree
// the ledger lost is rebuilt from the traces and the operation tried
// again; an unreachable ledger is waited for with back-off, the wait
// reported, and no provider call is made meanwhile (the ledger fails
// closed). It returns the operation's answer, or the end of ctx.
func (d *driver) withLedger(ctx context.Context, what string, op func() error) error {
	waiting := false
	rebuilt := 0
	return retrying(ctx, ledgerBackoff, func() error {
		err := op()
		switch {
		case errors.Is(err, ledger.ErrTreeUnknown) && rebuilt < 3:
			rebuilt++
			if rerr := d.rebuild(ctx); rerr != nil {
				err = rerr
				if !errors.Is(rerr, protocol.ErrUnavailable) {
					return done(rerr)
				}
			} else {
				return again(0)
			}
		case errors.Is(err, ledger.ErrAgentUnknown) && rebuilt < 3:
			rebuilt++
			if rerr := d.c.ledger.Register(ctx, d.s.tree, d.s.run, d.s.depth); rerr == nil || errors.Is(rerr, ledger.ErrTreeUnknown) {
				return again(0)
			}
		}
		if !errors.Is(err, protocol.ErrUnavailable) {
			if waiting {
				d.log.Info("the budget ledger answers again", "op", what)
				d.emit(d.s.step, protocol.EventLedger, &protocol.Event{Text: "the budget ledger answers again; the run goes on"})
				d.c.putState(ctx, d.runningState())
			}
			return done(err)
		}
		if !waiting {
			waiting = true
			why := "waiting for the budget ledger, which did not answer (" + what + "): no provider call is made without a reservation"
			d.log.Warn(why, "err", err)
			d.emit(d.s.step, protocol.EventLedger, &protocol.Event{Text: why + ": " + err.Error(), IsError: true})
			st := d.runningState()
			st.Reason = why
			d.c.putState(ctx, st)
		}
		return err
	})
}

// ledgerBackoff is how withLedger waits for a ledger that does not answer.
var ledgerBackoff = backoff{wait: 250 * time.Millisecond, max: 5 * time.Second}

// rebuild restores the run's tree on the ledger from what the traces of
// its agents say they spent, after the ledger lost it, and records the
// rebuild as an event. Of several agents racing to rebuild one tree, one
// does it.
func (d *driver) rebuild(ctx context.Context) error {
	s := d.s
	ceiling, err := d.c.treeCeiling(ctx, s)
	if err != nil {
		return err
	}
	own := s.spent
	for _, dr := range d.draws {
		own = own.Add(dr.Spend) // settled, not yet committed: the trace will have them
	}
	spent := map[string]ledger.Usage{s.run: usageOf(own)}
	if err := d.c.treeSpend(ctx, s.tree, s.run, spent); err != nil {
		return err
	}
	rebuilt, err := d.c.ledger.Restore(ctx, s.tree, ceiling, spent)
	if err != nil {
		return err
	}
	if rebuilt {
		var total ledger.Usage
		for _, u := range spent {
			total = total.Add(u)
		}
		text := fmt.Sprintf("the budget ledger had lost tree %s; rebuilt it from the traces of %d agent(s): %d tokens, %d micro-units, %d steps spent",
			s.tree, len(spent), total.Tokens(), total.CostMicros, total.Steps)
		d.log.Warn(text)
		d.emit(s.step, protocol.EventLedger, &protocol.Event{Text: text})
	}
	return nil
}

// treeCeiling is the ceiling of s's tree, from its root's started record.
func (c *Coordinator) treeCeiling(ctx context.Context, s *runState) (ledger.Ceiling, error) {
	if s.tree == s.run {
		return ceilingOf(s.contract, s.started), nil
	}
	root, err := c.rootOf(ctx, s)
	if err != nil {
		return ledger.Ceiling{}, err
	}
	return ceilingOf(root.Contract, root.Time), nil
}

var errFound = errors.New("found")

// treeSpend adds to spent what every other agent of the tree drew, summed
// from its trace.
func (c *Coordinator) treeSpend(ctx context.Context, tree, self string, spent map[string]ledger.Usage) error {
	runs, err := c.index.List(ctx)
	if err != nil {
		return err
	}
	for _, st := range runs {
		if st.Run == self || (st.Tree != tree && st.Run != tree) {
			continue
		}
		var sum protocol.Spend
		if _, err := c.trace.Each(ctx, st.Run, func(r *protocol.Record) error {
			sum = sum.Add(drawn(r))
			return nil
		}); err != nil {
			return err
		}
		spent[st.Run] = usageOf(sum)
	}
	return nil
}

// budgetsOf renders a ledger balance for the index and events.
func (d *driver) budgetsOf(b ledger.Balance) *protocol.Budgets {
	return &protocol.Budgets{
		Tree: d.s.tree, Depth: d.s.depth,
		Run:           spendOf(b.AgentSpent),
		RunRemaining:  allowanceOf(b.AgentRemaining(d.s.caps())),
		TreeSpent:     spendOf(b.Spent),
		TreeReserved:  spendOf(b.Reserved),
		TreeRemaining: allowanceOf(b.Remaining),
	}
}

func spendOf(u ledger.Usage) protocol.Spend {
	return protocol.Spend{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Steps: u.Steps}
}

func usageOf(s protocol.Spend) ledger.Usage {
	return ledger.Usage{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CostMicros: s.CostMicros, Steps: s.Steps}
}

func allowanceOf(l ledger.Limits) *protocol.Allowance {
	return &protocol.Allowance{InputTokens: l.InputTokens, OutputTokens: l.OutputTokens, Tokens: l.Tokens, CostMicros: l.CostMicros, Steps: l.Steps}
}
