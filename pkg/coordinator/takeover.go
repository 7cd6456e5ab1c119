package coordinator

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// driving reports whether this coordinator is driving run.
func (c *Coordinator) driving(run string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.active[run]
	return ok
}

// takeOver drives the runs whose lease ran out: their coordinator died or
// stopped without finishing them. It looks the moment a deadline in the
// leases' view passes (a heartbeat not renewed, a lease handed over), and
// every TakeoverInterval besides.
func (c *Coordinator) takeOver(ctx context.Context) {
	c.leases.mu.Lock()
	nudge := c.leases.nudges()
	c.leases.mu.Unlock()
	t := time.NewTicker(c.cfg.TakeoverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-nudge:
		}
		c.takeExpired(ctx)
	}
}

// takeOverAtOnce is how many runs one look resumes side by side.
const takeOverAtOnce = 16

// takeExpired resumes the runs whose lease is dead, side by side, each
// survivor starting at a place of its own in their order, so that the
// coordinators left share a dead one's runs rather than all racing for
// the same one first, and the last is taken about as soon as the first.
func (c *Coordinator) takeExpired(ctx context.Context) {
	runs, err := c.leases.expired(ctx)
	if err != nil {
		c.log.Debug("list leases", "err", err)
		return
	}
	c.mu.Lock()
	for run := range c.orphans {
		if !slices.Contains(runs, run) {
			runs = append(runs, run)
		}
	}
	c.mu.Unlock()
	runs = slices.DeleteFunc(runs, c.driving)
	if len(runs) == 0 {
		return
	}
	slices.Sort(runs)
	h := fnv.New32a()
	_, _ = h.Write([]byte(c.cfg.ID))
	k := int(h.Sum32() % uint32(len(runs)))
	runs = append(runs[k:], runs[:k]...)
	var wg sync.WaitGroup
	gate := make(chan struct{}, takeOverAtOnce)
	for _, run := range runs {
		gate <- struct{}{}
		wg.Go(func() {
			defer func() { <-gate }()
			err := c.Resume(ctx, run)
			switch {
			case err == nil:
				c.metrics.TakenOver()
			case !errors.Is(err, protocol.ErrFenced) && !errors.Is(err, errNoRoom):
				c.log.Warn("take over run", "run", run, "err", err)
			}
			if err == nil || errors.Is(err, protocol.ErrFenced) || errors.Is(err, protocol.ErrUnknownRun) {
				c.mu.Lock()
				delete(c.orphans, run)
				c.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// every calls f every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

// carryOnDecided watches the approvals and carries on every paused run
// whose pending action has been decided, on whichever coordinator gets its
// lease first, including decisions made while no coordinator was running.
// A watch that ends (NATS lost the bucket's stream, or could not start
// one) is begun again until ctx ends: a coordinator that stopped watching
// would leave every later decision waiting. Every sweepInterval it also
// looks over every decided approval, for a decision whose carrying on
// failed (NATS restarting under it) or whose event was missed: nothing
// else would wake its run.
func (c *Coordinator) carryOnDecided(ctx context.Context) {
	swept := make(chan struct{})
	defer func() { <-swept }()
	go func() {
		defer close(swept)
		every(ctx, sweepInterval, func() {
			aps, err := c.approvals.List(ctx)
			if err != nil {
				return
			}
			for i := range aps {
				c.carryOn(ctx, &aps[i], true)
			}
		})
	}()
	for {
		err := c.approvals.Watch(ctx, func(ap *protocol.Approval) { c.carryOn(ctx, ap, false) })
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("the watch of the approvals ended; watching again", "err", err)
		if sleep(ctx, rewatchWait) != nil {
			return
		}
	}
}

// sweepInterval is how often carryOnDecided looks over every approval.
var sweepInterval = 5 * time.Second

// carryOn resumes the run of a decided approval unless it is finished,
// driven here already, or held by another coordinator. A sweep leaves
// alone the approvals of steps the run has gone past: they were carried
// on.
func (c *Coordinator) carryOn(ctx context.Context, ap *protocol.Approval, sweep bool) {
	if ap.Pending == nil || ap.Decision == nil {
		return
	}
	run := ap.Pending.Run
	if c.driving(run) {
		return
	}
	st, err := c.index.Get(ctx, run)
	// Not only a run the index shows paused: the pause may be in the
	// trace while the index write was lost (NATS died in between).
	if err != nil || st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed || sweep && st.Step > ap.Pending.Step {
		return
	}
	err = c.Resume(ctx, run)
	switch {
	case errors.Is(err, errNoRoom):
		c.resumeWhenRoom(ctx, run)
	case err != nil && !errors.Is(err, protocol.ErrFenced):
		c.log.Warn("carry on a decided run", "run", run, "err", err)
	}
}

// resumeWhenRoom carries a decided run on as soon as a slot is free here,
// in the order the decisions came, rather than at the next sweep: a
// thousand approvals decided at once drain at the rate slots free up. A
// run queued already is not queued twice; one another coordinator took
// meanwhile is fenced, and left to it.
func (c *Coordinator) resumeWhenRoom(ctx context.Context, run string) {
	c.mu.Lock()
	if c.queued[run] {
		c.mu.Unlock()
		return
	}
	c.queued[run] = true
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.queued, run)
			c.mu.Unlock()
		}()
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if c.driving(run) {
			<-c.slots
			return
		}
		if err := c.resumeHeld(ctx, run, nil); err != nil && !errors.Is(err, protocol.ErrFenced) {
			c.log.Warn("carry on a decided run", "run", run, "err", err)
		}
	}()
}

// rewatchWait is how long carryOnDecided waits before watching again.
const rewatchWait = time.Second

// errNoRoom means every run slot is taken.
var errNoRoom = errors.New("no room for another run")

// Resume takes over a run whose coordinator is gone and drives it from the
// step after its last committed one. A finished run is left as it is.
// Errors: a *protocol.Error with CodeUnknownRun when the run has no trace;
// CodeFenced when another coordinator holds it; the trace's read errors.
func (c *Coordinator) Resume(ctx context.Context, run string) error {
	return c.ResumeWith(ctx, run, nil)
}

// ResumeWith is Resume under another policy, which is recorded in the trace
// as the run's policy from then on; nil keeps the stored one. A sub-agent's
// new policy is contained in its parent's as it was when the sub-agent
// started, like the one it started with. Errors: as Resume, and a
// *protocol.Error for a policy that does not validate or names a layer
// "remembered".
func (c *Coordinator) ResumeWith(ctx context.Context, run string, pol *protocol.Policy) error {
	if pol != nil {
		if err := cmp.Or(pol.Validate(), reservedLayers(pol)); err != nil {
			return err
		}
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return errNoRoom
	}
	return c.resumeHeld(ctx, run, pol)
}

// readHook, when set (by tests), is called in resumeHeld between the read
// begun beside the lease and the look-up that checks it is whole.
var readHook func(run string)

// traceRead is what a read of a run's trace gave.
type traceRead struct {
	recs []protocol.Record
	last uint64
	err  error
}

// leaseBesideRead takes run's lease while it reads the run's trace, a
// synced write beside a read, rather than one after the other. A record
// the run's last holder appended meanwhile is found by looking the run's
// last sequence up once the lease is ours, as a read begun then would
// have: the trace is then read again, and so is a read that failed. A
// read that found no records is looked at again only if emptyToo: the
// admission of a new run writes its first record expecting none, and is
// fenced off if one came (trace.Writer). Errors: the lease's (errHeld:
// another coordinator holds it); the read's own is in the traceRead.
func (c *Coordinator) leaseBesideRead(ctx context.Context, run string, emptyToo bool) (*lease, traceRead, error) {
	rctx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	reading := make(chan traceRead, 1)
	go func() {
		var r traceRead
		r.recs, r.last, r.err = c.trace.Read(rctx, run)
		reading <- r
	}()
	ls, err := c.leases.acquire(ctx, run)
	if err != nil {
		stopRead()
		<-reading
		return nil, traceRead{}, err
	}
	r := <-reading
	if readHook != nil {
		readHook(run)
	}
	stale := r.err != nil
	if !stale && (emptyToo || len(r.recs) > 0) {
		seq, lerr := c.trace.LastSeq(ctx, run)
		stale = lerr != nil || seq != r.last
	}
	if stale {
		r.recs, r.last, r.err = c.trace.Read(ctx, run)
	}
	return ls, r, nil
}

// resumeHeld is ResumeWith with a slot already taken for the run: passed
// on to its driver, or given back when none starts.
func (c *Coordinator) resumeHeld(ctx context.Context, run string, pol *protocol.Policy) error {
	ls, r, err := c.leaseBesideRead(ctx, run, true)
	if err != nil {
		<-c.slots
		if errors.Is(err, errHeld) {
			return protocol.Errorf(protocol.CodeFenced, "run %s is being driven by another coordinator", run)
		}
		return err
	}
	recs, last, err := r.recs, r.last, r.err
	if err != nil {
		// The trace did not answer (NATS electing a leader, say). The
		// lease is ours now and lives with this coordinator's heartbeat,
		// so no other coordinator takes the run: this one takes it back
		// at its next look. Deleting the lease instead would leave the
		// run running with no owner for good.
		<-c.slots
		c.orphan(run)
		return err
	}
	if len(recs) == 0 {
		c.leases.release(ctx, ls)
		<-c.slots
		return protocol.Errorf(protocol.CodeUnknownRun, "no run %s", run)
	}
	if pol != nil && recs[0].ParentPolicy != nil {
		// A sub-agent stays within its parent, whoever resumes it.
		parent, perr := policy.FromProtocol(recs[0].ParentPolicy)
		own, oerr := policy.FromProtocol(pol)
		if err := cmp.Or(perr, oerr); err != nil {
			c.leases.release(ctx, ls)
			<-c.slots
			return err
		}
		pol = policy.Contain(parent, own).Protocol()
	}
	if pol != nil && recs[len(recs)-1].Kind != protocol.RecordFinished {
		w := c.trace.Writer(run, last)
		rec := &protocol.Record{Kind: protocol.RecordPolicy, Step: len(recs), Policy: pol, Coordinator: c.cfg.ID}
		if err := w.Append(ctx, rec); err != nil {
			<-c.slots
			c.orphan(run) // taken back at the next look, as above
			return err
		}
		recs, last = append(recs, *rec), w.LastSeq()
	}
	c.log.Info("resuming run", "run", run, "records", len(recs), "generation", ls.gen)
	c.start(ctx, run, recs, last, ls, c.heldSlot())
	return nil
}
