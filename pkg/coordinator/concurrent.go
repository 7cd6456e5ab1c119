package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// How many agents of a tree run at once (its root's
// budget.tree.max_concurrent) is held on the budget ledger's places, which
// every coordinator shares, so the cap holds whichever coordinators drive
// the tree's agents.
//
// The root holds a place from its first spawn_agent call to its finish. A
// sub-agent's place is taken by its parent before the sub-agent is
// submitted, queued first come first served behind the spawns that asked
// before it, and kept until the sub-agent finishes. A sub-agent that waits
// for sub-agents of its own gives its place back meanwhile and queues to
// take one again before it goes on: the root alone keeps its place while
// it waits, so agents waiting on their own sub-agents never hold every
// place, and a tree never waits on itself.
//
// A place is freed by the agent's run id, once however often it is asked:
// by the run's finish (freeRunPlace), by its parent once it sees the
// outcome, and by a spawn that waits and finds its holder finished in the
// run index (a finish whose freeing was lost). A place given to a
// sub-agent not yet started lapses unless the parent claims it once the
// sub-agent is seen started: a coordinator that dies between taking the
// place and submitting the sub-agent holds it for placeClaim at most, and
// a queued spawn whose waiter died loses its turn after placeKeep.
//
// The queue is bounded by the tree's agents: a parent starts its spawns
// one after the other, so it has at most one waiting at a time, and a
// sub-agent waits to take its own place back only once they are done.

// placeKeep is how long a queued spawn keeps its turn without asking
// again; its waiter asks at least every placePoll.max.
const placeKeep = 15 * time.Second

// placePoll is how a queued spawn asks again when it has not been told a
// place was given (a ledger's notice may be lost).
var placePoll = backoff{wait: 50 * time.Millisecond, max: time.Second}

// placeFreeTimeout bounds freeing or claiming a place where nothing waits
// on the answer: the finish of a run, a parent that saw its sub-agent
// start or end. A ledger that does not answer in time leaves the place to
// the paths that free or claim it again.
const placeFreeTimeout = 5 * time.Second

// places is what a spawn needs of its tree's max_concurrent.
type places struct {
	// limit is the tree's max_concurrent, from its root's contract; 0 for
	// no cap, and then nothing below asks the ledger.
	limit int
	// until is when a spawn stops waiting for a place: the run's own
	// deadline or the tree's, whichever comes first; zero for none.
	until time.Time
}

// treePlaces reads the tree's max_concurrent from its root's contract,
// the only one that may set it (a sub-agent's contract may not carry a
// tree budget), so no agent of the tree can raise it. Errors: the root's
// trace could not be read.
func (d *driver) treePlaces(ctx context.Context) (places, error) {
	s := d.s
	root := &protocol.Record{Contract: s.contract, Time: s.started}
	if s.tree != s.run {
		r, err := d.c.rootOf(ctx, s)
		if err != nil {
			return places{}, err
		}
		root = r
	}
	t := root.Contract.Budget.Tree
	if t == nil || t.MaxConcurrent <= 0 {
		return places{}, nil
	}
	pl := places{limit: t.MaxConcurrent, until: s.deadline()}
	if dl, ok := ceilingOf(root.Contract, root.Time).Deadline(); ok && (pl.until.IsZero() || dl.Before(pl.until)) {
		pl.until = dl
	}
	return pl, nil
}

// placeClaim is how long a place given to a sub-agent is kept for it
// before it is seen started: its parent waits OpenTimeout for that, and a
// parent whose coordinator died is taken over within about two leases and
// claims it on its replay.
func (d *driver) placeClaim() time.Duration {
	return d.c.cfg.OpenTimeout + 2*d.c.cfg.LeaseTTL
}

func (d *driver) placeRequest(agent string, pl places, running bool, claim time.Duration) ledger.PlaceRequest {
	return ledger.PlaceRequest{Tree: d.s.tree, Agent: agent, Limit: pl.limit, Running: running, Claim: claim, Keep: placeKeep}
}

// takePlace asks the ledger for a place once, with withLedger's waits
// and rebuilds; it returns its answer or the end of ctx.
func (d *driver) takePlace(ctx context.Context, req ledger.PlaceRequest) (ledger.Place, error) {
	var p ledger.Place
	err := d.withLedger(ctx, "take a place in the tree", func() error {
		var err error
		p, err = d.c.ledger.TakePlace(ctx, req)
		return err
	})
	return p, err
}

// freePlace gives back agent's place, or its turn in the queue, without
// waiting on a ledger that does not answer: the finish of the agent, or a
// queued spawn that finds it finished, frees it then.
func (d *driver) freePlace(ctx context.Context, agent string) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), placeFreeTimeout)
	defer cancel()
	if _, err := d.c.ledger.FreePlace(fctx, d.s.tree, agent); err != nil && !errors.Is(err, ledger.ErrTreeUnknown) {
		d.log.Warn("give back a place in the tree", "agent", agent, "err", err)
	}
}

// errPlaceTimeUp says a spawn stopped waiting for a place because the
// run's time, or its tree's, ran out.
var errPlaceTimeUp = errors.New("the run's time ran out while it waited for a place")

// waitPlace waits until req.Agent holds one of the tree's places, queued
// first come first served behind those who asked before it, with the
// run's slot lent back (waitIdle). It reports whether it had to queue.
// If ctx ends, or pl.until passes (errPlaceTimeUp), the agent leaves the
// queue, or gives back a place it was given meanwhile, and the error is
// returned; so it is for an error of the ledger that is not a wait
// (withLedger waits those out).
func (d *driver) waitPlace(ctx context.Context, req ledger.PlaceRequest, pl places) (bool, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if !pl.until.IsZero() {
		wctx, cancel = context.WithDeadline(ctx, pl.until)
	}
	defer cancel()
	// Watched before the first ask, so a place given in between is told.
	var notices <-chan struct{}
	if w, ok := d.c.ledger.(ledger.PlaceWatcher); ok {
		ch, err := w.WatchPlaces(wctx, d.s.tree)
		if err != nil {
			d.log.Debug("watch the tree's places; polling them", "err", err)
		}
		notices = ch
	}
	p, err := d.takePlace(wctx, req)
	if err == nil && p.Held {
		return false, nil
	}
	if err == nil {
		d.log.Info("waiting for a place in the tree", "agent", req.Agent, "taken", p.Taken, "ahead", p.Ahead)
		st := d.runningState()
		st.Reason = fmt.Sprintf("waiting for a place: %d agents of the tree run, as many as it may at once; %d queued ahead", p.Taken, p.Ahead)
		d.c.putState(ctx, st)
		werr := d.waitIdle(ctx, func() { err = d.queueFor(wctx, req, notices, p) })
		if err == nil {
			err = werr
		}
		d.c.putState(ctx, d.runningState())
	}
	if err != nil {
		d.freePlace(ctx, req.Agent)
		if ctx.Err() == nil && wctx.Err() != nil {
			err = errPlaceTimeUp
		}
		return true, err
	}
	return true, nil
}

// queueFor asks for req's place again each time the ledger tells a place
// was given, and at least every placePoll.max, until it is held; the
// asks the ledger was not told of free the places of agents found
// finished. It returns the end of ctx or the ledger's error.
func (d *driver) queueFor(ctx context.Context, req ledger.PlaceRequest, notices <-chan struct{}, p ledger.Place) error {
	wait := placePoll.wait
	for !p.Held {
		timer := time.NewTimer(wait)
		polled := false
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-notices:
		case <-timer.C:
			wait, polled = min(2*wait, placePoll.max), true
		}
		timer.Stop()
		if polled {
			d.freeFinished(ctx)
		}
		var err error
		if p, err = d.takePlace(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

// freeFinished frees the places held by agents of the tree that the run
// index says have finished: a finish whose own freeing was lost (its
// coordinator died after recording it, the ledger did not answer) holds
// no place for ever.
func (d *driver) freeFinished(ctx context.Context) {
	t, err := d.c.ledger.Totals(ctx, d.s.tree)
	if err != nil {
		return
	}
	for _, a := range t.Places {
		if st, err := d.c.index.Get(ctx, a); err == nil && runFinished(st) {
			if freed, err := d.c.ledger.FreePlace(ctx, d.s.tree, a); err == nil && freed {
				d.log.Info("freed the place of an agent of the tree that had finished", "agent", a)
			}
		}
	}
}

func runFinished(st *protocol.RunState) bool {
	return st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed
}

// placeForChild gives the sub-agent run a place before it is submitted,
// waiting for one if the tree has none free. It reports whether it had to
// wait, or what the spawn's refusal says when it stopped waiting. A
// sub-agent already there (a step replayed after a crash) takes no new
// place: a running one claims its own, over the cap if it lapsed, and a
// finished one needs none.
func (d *driver) placeForChild(ctx context.Context, run string, pl places) (queued bool, refusal string) {
	if st, err := d.c.index.Get(ctx, run); err == nil {
		if !runFinished(st) {
			d.claimPlace(ctx, run, pl)
		}
		return false, ""
	}
	queued, err := d.waitPlace(ctx, d.placeRequest(run, pl, false, d.placeClaim()), pl)
	switch {
	case err == nil:
		return queued, ""
	case errors.Is(err, errPlaceTimeUp):
		return true, fmt.Sprintf("the run's time ran out while the sub-agent waited for a place (the tree runs at most %d agents at once); it was not started. Finish with what you have.", pl.limit)
	case ctx.Err() != nil:
		return true, "the run stopped while the sub-agent waited for a place; it was not started"
	}
	return queued, "the sub-agent could not be given a place among the tree's running agents: " + err.Error()
}

// claimPlace holds run's place for good once it runs, over the cap if the
// place it was given lapsed before it was seen started. A ledger that does
// not answer leaves the place to lapse.
func (d *driver) claimPlace(ctx context.Context, run string, pl places) {
	cctx, cancel := context.WithTimeout(ctx, placeFreeTimeout)
	defer cancel()
	if _, err := d.c.ledger.TakePlace(cctx, d.placeRequest(run, pl, true, 0)); err != nil {
		d.log.Warn("claim a sub-agent's place in the tree", "child", run, "err", err)
	}
}

// asideBegin puts the run's own place right for a step's spawns and the
// wait for their sub-agents, and asideEnd puts it back after: the root
// holds its place throughout, as it counts; a sub-agent gives its place
// back for the while and queues to take one again before it goes on.
func (d *driver) asideBegin(ctx context.Context, pl places) {
	switch {
	case pl.limit == 0:
	case d.s.tree == d.s.run:
		d.claimPlace(ctx, d.s.run, pl)
	default:
		d.freePlace(ctx, d.s.run)
	}
}

func (d *driver) asideEnd(ctx context.Context, pl places) {
	if pl.limit == 0 || d.s.tree == d.s.run {
		return
	}
	if _, err := d.waitPlace(ctx, d.placeRequest(d.s.run, pl, false, 0), pl); err != nil {
		d.log.Info("go on without a place in the tree", "err", err) // the run's time is up, or it stops
	}
}

// freeRunPlace gives back the place the finished run s held among its
// tree's max_concurrent, and hands it to the first spawn queued for one;
// it is meant for the end of the finish path (indexFinished), once the
// outcome is in the index, so that no agent started in the freed place is
// seen running beside it. It is idempotent by run id, so a finish found
// again or replayed frees nothing twice. A root whose contract sets no
// max_concurrent holds no place and asks nothing; a ledger that does not
// answer leaves the place to the parent, which frees it when it sees the
// outcome, or to a spawn queued for one, which finds it finished.
func (c *Coordinator) freeRunPlace(ctx context.Context, s *runState) {
	if s.finished == nil || s.tree == "" {
		return
	}
	if t := s.contract.Budget.Tree; s.tree == s.run && (t == nil || t.MaxConcurrent <= 0) {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), placeFreeTimeout)
	defer cancel()
	if _, err := c.ledger.FreePlace(fctx, s.tree, s.run); err != nil && !errors.Is(err, ledger.ErrTreeUnknown) {
		c.log.Warn("give back the finished run's place in its tree", "run", s.run, "err", err)
	}
}
