package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"

	"github.com/ioharness/harness/pkg/ledger"
)

// HammerCeiling is the ceiling a tree must be opened with for Hammer: only
// tokens are capped.
var HammerCeiling = ledger.Ceiling{Limits: ledger.Limits{Tokens: 40_000}}

// The Hammer's draws: every reservation holds hammerEstimate; settled
// usage is hammerOver (HammerExcess tokens more than the estimate) or
// hammerUnder; every fifth plain draw is released instead.
var (
	hammerEstimate = ledger.Usage{InputTokens: 40, OutputTokens: 60, CostMicros: 100, Steps: 1}
	hammerOver     = ledger.Usage{InputTokens: 40, OutputTokens: 90, CostMicros: 150, Steps: 1}
	hammerUnder    = ledger.Usage{InputTokens: 40, OutputTokens: 10, CostMicros: 50, Steps: 1}
)

// HammerExcess is the most one settled draw's tokens exceed its estimate
// in Hammer's workload.
const HammerExcess = 30

// Tally is what one Hammer workload was granted and charged, by its own
// count. It is JSON so a helper process can report it.
type Tally struct {
	// Grants counts reservations granted.
	Grants int `json:"grants"`
	// Settled counts reservations settled; Released, those released.
	Settled  int `json:"settled"`
	Released int `json:"released"`
	// Charged sums the settlements' Charged.
	Charged ledger.Usage `json:"charged"`
	// Violations describes grants whose balance showed more spent and
	// reserved than the ceiling.
	Violations []string `json:"violations,omitempty"`
}

func (t *Tally) add(u Tally) {
	t.Grants += u.Grants
	t.Settled += u.Settled
	t.Released += u.Released
	t.Charged = t.Charged.Add(u.Charged)
	t.Violations = append(t.Violations, u.Violations...)
}

// Hammer draws on tree concurrently, one goroutine per agent (each must be
// registered), until the tree's ceiling refuses each of them; then every
// goroutine settles what it holds and stops. About a third of the agents
// (chosen by a hash of their id) chain their draws with SettleAndReserve;
// the others Reserve, then Settle or Release. The tree must have been opened with
// HammerCeiling. It returns what it was granted and charged, or the first
// error other than the ceiling's refusal.
func Hammer(ctx context.Context, l ledger.Ledger, tree string, agents []string) (Tally, error) {
	var (
		mu    sync.Mutex
		total Tally
		wg    sync.WaitGroup
		errs  = make([]error, len(agents))
	)
	for g, agent := range agents {
		wg.Go(func() {
			var local Tally
			errs[g] = hammerOne(ctx, l, tree, agent, chains(agent), &local)
			mu.Lock()
			total.add(local)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// chains reports whether agent's goroutine chains its draws.
func chains(agent string) bool {
	h := fnv.New32a()
	h.Write([]byte(agent))
	return h.Sum32()%3 == 0
}

func hammerOne(ctx context.Context, l ledger.Ledger, tree, agent string, chain bool, tally *Tally) error {
	ceiling := HammerCeiling.Tokens
	actual := func(i int) ledger.Usage {
		if i%2 == 0 {
			return hammerOver
		}
		return hammerUnder
	}
	settled := func(s ledger.Settlement, want ledger.Usage) error {
		if s.Charged != want || s.Replayed {
			return fmt.Errorf("%s: settlement %+v, want %+v charged, not replayed", agent, s, want)
		}
		tally.Settled++
		tally.Charged = tally.Charged.Add(s.Charged)
		return nil
	}
	held := "" // the chained draw's key awaiting settlement
	heldAt := 0
	for i := 0; ; i++ {
		r := ledger.Reservation{Tree: tree, Agent: agent, Key: fmt.Sprintf("%s.%d.0", agent, i), Estimate: hammerEstimate}
		var (
			g   ledger.Grant
			err error
		)
		if held != "" {
			var s ledger.Settlement
			s, g, err = l.SettleAndReserve(ctx, held, actual(heldAt), r)
			var ref *ledger.Refusal
			if err == nil || errors.As(err, &ref) {
				if serr := settled(s, actual(heldAt)); serr != nil {
					return serr
				}
			}
			held = ""
		} else {
			g, err = l.Reserve(ctx, r)
		}
		if errors.Is(err, ledger.ErrCeilingReached) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s draw %d: %w", agent, i, err)
		}
		tally.Grants++
		if b := g.Balance; b.Spent.Tokens()+b.Reserved.Tokens() > ceiling || g.Reserved != hammerEstimate || g.Replayed {
			tally.Violations = append(tally.Violations, fmt.Sprintf("%s draw %d granted %+v with balance %+v", agent, i, g.Reserved, b))
		}
		switch {
		case chain:
			held, heldAt = r.Key, i
		case i%5 == 4:
			if err := l.Release(ctx, tree, r.Key); err != nil {
				return fmt.Errorf("%s release %d: %w", agent, i, err)
			}
			tally.Released++
		default:
			s, err := l.Settle(ctx, tree, r.Key, actual(i))
			if err != nil {
				return fmt.Errorf("%s settle %d: %w", agent, i, err)
			}
			if err := settled(s, actual(i)); err != nil {
				return err
			}
		}
	}
}

// CheckHammer checks a tree's totals after Hammer workloads with inFlight
// concurrent drawers in all: nothing is still held; what the tree spent is
// exactly what the workloads were charged (tree-wide and summed over
// agents); no grant saw the ceiling broken; and the overrun beyond the
// ceiling is at most what was in flight could add (inFlight draws each
// exceeding its estimate by HammerExcess).
func CheckHammer(t testing.TB, tot ledger.Totals, tallies []Tally, inFlight int) {
	t.Helper()
	var sum Tally
	for _, ta := range tallies {
		sum.add(ta)
	}
	if tot.Reserved != (ledger.Usage{}) {
		t.Errorf("Reserved after the workload = %+v, want nothing held", tot.Reserved)
	}
	if tot.Spent != sum.Charged {
		t.Errorf("Spent = %+v, want the sum of the settlements %+v", tot.Spent, sum.Charged)
	}
	var agents ledger.Usage
	for _, a := range tot.Agents {
		agents = agents.Add(a.Spent)
	}
	if agents != tot.Spent {
		t.Errorf("sum of agents' Spent = %+v, want the tree's %+v", agents, tot.Spent)
	}
	if tot.Spent.Steps != int64(sum.Settled) || sum.Grants != sum.Settled+sum.Released {
		t.Errorf("%d grants, %d settled, %d released, %d steps spent: want grants = settled + released = steps", sum.Grants, sum.Settled, sum.Released, tot.Spent.Steps)
	}
	for _, v := range sum.Violations {
		t.Errorf("ceiling broken at grant: %s", v)
	}
	ceiling := tot.Ceiling.Tokens
	if over := tot.Spent.Tokens() - ceiling; over > int64(inFlight)*HammerExcess {
		t.Errorf("spent %d tokens, %d over the ceiling of %d: more than %d in flight could add", tot.Spent.Tokens(), over, ceiling, int64(inFlight)*HammerExcess)
	}
	if tot.Spent.Tokens() < ceiling/2 {
		t.Errorf("spent %d tokens of %d: the workload did not reach the ceiling", tot.Spent.Tokens(), ceiling)
	}
	t.Logf("%d grants (%d settled, %d released), spent %d tokens of %d", sum.Grants, sum.Settled, sum.Released, tot.Spent.Tokens(), ceiling)
}
