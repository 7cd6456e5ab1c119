package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// A cancel is kept in the harness-cancels bucket before anything else
// happens, so it holds whatever dies next: the coordinator driving the run
// hears it through its watch of the bucket and stops the driver at once;
// a driver that starts later (a takeover, a resume) finds it before its
// first step; a run no one drives (paused, or its coordinator gone) is
// ended here, under its lease.

// cancelled is the cause a cancelled driver's context ends with.
type cancelled struct{ c *protocol.Cancel }

func (e *cancelled) Error() string { return "run cancelled by " + e.c.By }

// cancelOf is the cancel that ended ctx, or nil.
func cancelOf(ctx context.Context) *protocol.Cancel {
	var c *cancelled
	if errors.As(context.Cause(ctx), &c) {
		return c.c
	}
	return nil
}

// cancelReason is the reason a cancelled run ends with.
func cancelReason(c *protocol.Cancel) string {
	if c.Reason == "" {
		return "cancelled by " + c.By
	}
	return "cancelled by " + c.By + ": " + c.Reason
}

// Cancel stops a run, wherever it is driven, and ends it cancelled with
// who asked (by) and why, in the trace; its unfinished sub-agents are
// cancelled with it. Cancelling a cancelled run again changes nothing and
// returns the first cancel. Errors: CodeUnknownRun; CodeRunFinished for a
// run that ended otherwise; the bucket's.
func (c *Coordinator) Cancel(ctx context.Context, run, by, reason string) (*protocol.Cancel, error) {
	if !protocol.ValidToken(run) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", run)
	}
	st, err := c.index.Get(ctx, run)
	if errors.Is(err, protocol.ErrUnknownRun) {
		// The index may have lost a write its trace has.
		recs, _, rerr := c.trace.Read(ctx, run)
		if rerr != nil {
			return nil, rerr
		}
		if len(recs) == 0 {
			return nil, protocol.Errorf(protocol.CodeUnknownRun, "no run %s: check the id (harness ls lists the runs)", run)
		}
		st, err = &protocol.RunState{Run: run, Status: protocol.StatusRunning}, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed {
		if st.Outcome != protocol.OutcomeCancelled {
			return nil, protocol.Errorf(protocol.CodeRunFinished, "run %s already ended %s; there is nothing to cancel", run, st.Outcome)
		}
		if mark, err := c.cancelMark(ctx, run); err != nil || mark != nil {
			return mark, err
		}
		return &protocol.Cancel{Run: run, By: "unknown", Reason: st.Reason, Time: st.Updated}, nil
	}
	mark := &protocol.Cancel{Run: run, By: by, Reason: reason, Time: time.Now().UTC()}
	data, err := json.Marshal(mark)
	if err != nil {
		return nil, err
	}
	if _, err := c.assets.Cancels.Create(ctx, run, data); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("record the cancel of %s: %w", run, err)
		}
		first, gerr := c.cancelMark(ctx, run)
		if gerr != nil {
			return nil, gerr
		}
		if first != nil {
			mark = first // asked before: the first cancel stands
		}
	}
	c.log.Info("run cancel asked", "run", run, "by", mark.By, "reason", mark.Reason)
	// The driver here ends the run itself, with what it was doing (the
	// call it abandons is charged); only a run no one drives is ended here.
	if !c.stopDriver(run, mark) {
		if err := c.endIdle(ctx, run, mark); err != nil {
			c.log.Warn("end a cancelled run", "run", run, "err", err)
		}
	}
	c.cancelChildren(ctx, run, mark)
	return mark, nil
}

// cancelChildren cancels the unfinished sub-agents of run, and theirs.
func (c *Coordinator) cancelChildren(ctx context.Context, run string, mark *protocol.Cancel) {
	runs, err := c.index.List(ctx)
	if err != nil {
		c.log.Warn("list the sub-agents of a cancelled run", "run", run, "err", err)
		return
	}
	for _, st := range runs {
		if st.Parent != run || st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed {
			continue
		}
		if _, err := c.Cancel(ctx, st.Run, mark.By, "its parent "+run+" was cancelled"); err != nil && !errors.Is(err, protocol.ErrRunFinished) {
			c.log.Warn("cancel a sub-agent", "run", st.Run, "err", err)
		}
	}
}

// stopDriver ends the driver of run, if this coordinator has the run in
// hand (working, or parked: then it is woken to end), and says whether it
// does.
func (c *Coordinator) stopDriver(run string, mark *protocol.Cancel) bool {
	c.mu.Lock()
	stop := c.stops[run]
	d, inHand := c.active[run]
	if inHand && d == nil {
		c.early[run] = mark // its driver, being made, takes it
	}
	c.mu.Unlock()
	if stop != nil {
		stop(&cancelled{mark})
	}
	parkedHere := c.cancelParked(run, mark)
	return stop != nil || parkedHere || inHand
}

// endIdle ends run cancelled when no coordinator drives it: paused for a
// person, or left by a coordinator that is gone. A run whose lease is held
// is left to its driver, which hears the cancel; a lease held by a
// coordinator that died runs out, and whoever takes the run over finds the
// cancel before its first step.
func (c *Coordinator) endIdle(ctx context.Context, run string, mark *protocol.Cancel) error {
	ls, err := c.leases.acquire(ctx, run)
	if errors.Is(err, errHeld) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.leases.release(context.WithoutCancel(ctx), ls)
	recs, last, err := c.trace.Read(ctx, run)
	if err != nil {
		return err
	}
	s, err := newRunState(run, recs)
	if err != nil {
		return err
	}
	if s.finished != nil {
		return nil
	}
	rec := &protocol.Record{Kind: protocol.RecordFinished, Step: s.step, Outcome: protocol.OutcomeCancelled, Reason: cancelReason(mark), Tokens: s.tokens,
		Coordinator: c.cfg.ID}
	if err := c.trace.Writer(run, last).Append(ctx, rec); err != nil {
		return err
	}
	_ = s.apply(rec)
	c.metrics.RunFinished(protocol.OutcomeCancelled)
	c.indexFinished(ctx, s)
	c.log.Info("run finished", "outcome", protocol.OutcomeCancelled, "steps", s.step, "reason", rec.Reason)
	return nil
}

// cancelMark returns the cancel asked for run, or nil.
func (c *Coordinator) cancelMark(ctx context.Context, run string) (*protocol.Cancel, error) {
	e, err := c.assets.Cancels.Get(ctx, run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the cancel of %s: %w", run, err)
	}
	var mark protocol.Cancel
	if err := json.Unmarshal(e.Value(), &mark); err != nil {
		return nil, fmt.Errorf("the cancel of %s does not decode: %w", run, err)
	}
	return &mark, nil
}

// watchCancels stops the drivers of the runs cancelled while this
// coordinator drives them, until ctx ends; a watch that ends is begun
// again.
func (c *Coordinator) watchCancels(ctx context.Context) {
	for {
		err := c.watchCancelsOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("the watch of the cancels ended; watching again", "err", err)
		if sleep(ctx, rewatchWait) != nil {
			return
		}
	}
}

func (c *Coordinator) watchCancelsOnce(ctx context.Context) error {
	w, err := c.assets.Cancels.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch's channel closed")
			}
			if e == nil {
				continue
			}
			var mark protocol.Cancel
			if json.Unmarshal(e.Value(), &mark) == nil && mark.Run != "" {
				c.stopDriver(mark.Run, &mark)
			}
		}
	}
}

// handleCancel cancels a run at a client's request.
func (c *Coordinator) handleCancel(ctx context.Context, r micro.Request) {
	reply := func(ans protocol.CancelReply) { respondJSON(r, ans, ans.Error) }
	run := strings.TrimPrefix(r.Subject(), wire.CancelPrefix)
	var req protocol.CancelRequest
	if len(bytes.TrimSpace(r.Data())) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Data()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply(protocol.CancelReply{Error: protocol.FieldError(protocol.CodeMalformed, "", `send {} or {"reason": "..."}`,
				"the cancel request is not valid JSON: %s", err.Error())})
			return
		}
	}
	mark, err := c.Cancel(ctx, run, decider(r.Headers(), req.By), req.Reason)
	if err != nil {
		reply(protocol.CancelReply{Error: protocol.AsError(err)})
		return
	}
	reply(protocol.CancelReply{Cancel: mark})
}

// finishCancelled ends a run whose driver was cancelled, on live (the
// driver's context before the cancel, which still holds the lease): its
// commands on the sandboxer are stopped, the calls it was waiting for
// charged at their estimate (a worker may be making them), and the run
// ends cancelled with who and why. It does nothing for a driver that was
// not cancelled or a run that has ended.
func (d *driver) finishCancelled(live, ctx context.Context) {
	mark := cancelOf(ctx)
	if mark == nil || live.Err() != nil || d.s.finished != nil {
		return
	}
	d.stopOps(live)
	d.finish(live, protocol.OutcomeCancelled, cancelReason(mark))
}

// stopOps asks the sandboxer holding the run's workspace to end its
// operations in progress.
func (d *driver) stopOps(ctx context.Context) {
	if d.node == "" {
		return // no workspace open yet
	}
	op := &protocol.SandboxOp{OpID: d.s.run + ".stop", Run: d.s.run, Kind: protocol.OpStop}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.c.request(ctx, wire.SandboxOps(d.node), op, 5*time.Second); err != nil {
		d.log.Warn("stop the run's commands", "err", err)
	}
}

// chargeAbandoned charges, at its estimate, a provider call the run stops
// waiting for because it was cancelled: a worker may be making it, and the
// ledger errs toward charging a call that never happened.
func (d *driver) chargeAbandoned(ctx context.Context, key string, estimate ledger.Usage) {
	var st ledger.Settlement
	err := d.afterCall(ctx, "charge an abandoned call", func(ctx context.Context) error {
		var err error
		st, err = d.c.ledger.Settle(ctx, d.s.tree, key, estimate)
		return err
	})
	if err != nil {
		d.log.Warn("the ledger did not take an abandoned call's charge", "key", key, "err", err)
		return
	}
	d.draws = append(d.draws, protocol.Draw{Key: key, Spend: spendOf(st.Charged)})
}
