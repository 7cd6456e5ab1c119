package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/pkg/protocol"
)

// A step's commit overlaps the next step's request. The record is written
// on a goroutine of its own while the driver assembles the next request
// and publishes its step task; the driver waits for the write to be
// acknowledged (committed) before it acts on anything the next step brings
// (its turn, recovered or new), before any other record is written, and
// before it leaves the step loop for anything but another step. So no
// effect of a step, and no event of it, comes before its predecessor is
// in the trace, and a step costs its turn's synced write and its record's
// overlapped rather than one after the other.
//
// A coordinator that dies with a record unacknowledged leaves what it
// would leave dying in the middle of any step: the next driver reads the
// trace, finds or does not find the record, and carries on from there;
// the next step's turn, if a worker answered it meanwhile, was asked for
// with the same transcript the trace gives that driver.

// commit is a step's record on its way into the trace.
type commit struct {
	rec   *protocol.Record
	began time.Time
	done  chan error
	// prev is the run's state before the record was folded in, put back
	// when the write fails, so the outcome recorded then counts only the
	// steps the trace holds.
	prev runState
	// index: the record is not in the run index yet (indexProgress).
	index bool
}

// commitHook, set by tests alone, runs on a record's goroutine before it
// is written: a write that takes its time, or fails.
var commitHook func(*protocol.Record) error

// errCommitLost is turn's word that the previous step's record could not
// be written, which committed has already acted on: the loop leaves the run.
var errCommitLost = errors.New("the previous step's record could not be written")

// leaveRun is step's word that the run was left, committed having dealt
// with a commit that failed, in its outcome's place.
const leaveRun protocol.Outcome = "\x00left"

// begin starts writing the step's record to the trace and folds it into
// the run's state at once, for the next step's request. committed waits
// for the write.
func (d *driver) begin(ctx context.Context, rec *protocol.Record, began time.Time, index bool) {
	cm := &commit{rec: rec, began: began, done: make(chan error, 1), prev: *d.s, index: index}
	slim := d.c.blobs.Slim // the record is not changed by it, nor by the write, while the state reads it
	go func() {
		if h := commitHook; h != nil {
			if err := h(rec); err != nil {
				cm.done <- err
				return
			}
		}
		cm.done <- d.write(ctx, slim(ctx, rec, d.c.cfg.InlineLimit))
	}()
	d.commit = cm
	_ = d.s.apply(rec)
}

// committed waits for the record begun last, if any, to be written, and then
// does what follows a commit: the metric, the run index, the step's event
// and the events of the next step held meanwhile. A write that failed is
// acted on as the loop acts on any commit that fails (a run fenced off or
// stopping is left; otherwise it finishes failed, the step not counted),
// and committed reports false: the loop leaves the run.
func (d *driver) committed(ctx context.Context) bool {
	cm := d.commit
	if cm == nil {
		return true
	}
	d.commit = nil
	held := d.held
	d.held = nil
	s, rec := d.s, cm.rec
	if err := <-cm.done; err != nil {
		*s = cm.prev
		if errors.Is(err, protocol.ErrFenced) {
			d.log.Warn("run taken over; stopping", "step", rec.Step)
			d.leaveHeld(ctx)
			return false
		}
		if ctx.Err() != nil {
			// The lease was lost or the coordinator is stopping: the
			// step stays uncommitted, for whoever takes the run next,
			// and the next step's reservation with it (recover).
			d.log.Warn("stopped before the step was committed", "step", rec.Step, "err", err)
			return false
		}
		d.log.Error("commit step", "step", rec.Step, "err", err)
		d.releaseHeld(ctx)                      // the run ends here: nobody will take the answer
		d.draws = append(rec.Draws, d.draws...) // kept with the outcome, as a step that never commits
		d.finish(ctx, protocol.OutcomeFailed, "the trace could not be written: "+err.Error())
		return false
	}
	fault.Hit(fault.AfterCommit)
	d.c.metrics.Step(time.Since(cm.began))
	if cm.index {
		// The trace holds the step; the index only shows how far the
		// run has come, so it is brought up to date at most once every
		// indexEvery, sparing a synced write on most steps, and at the
		// end of that time while the run waits (indexProgress). Every
		// change of state (paused, finished) is written at once.
		d.unindexed = true
		d.indexProgress(ctx)
	}
	d.c.emit(s.run, rec.Step, protocol.EventStep, &protocol.Event{Tokens: rec.Tokens, Text: stepSummary(rec)})
	for _, ev := range held {
		d.c.emit(s.run, ev.Step, ev.Kind, ev)
	}
	return true
}

// leaveHeld is what a driver fenced off does with the reservations of the
// next step, whose task may be out: the run's owner asks for that step
// under the same key (the steps stream lets one task through) and settles
// it, so they are left to it; unless the run is finished, when nobody
// will, and they are released.
func (d *driver) leaveHeld(ctx context.Context) {
	if len(d.unsettled) == 0 {
		return
	}
	last, err := d.c.trace.Last(ctx, d.s.run)
	if err != nil {
		d.log.Warn("look for the run's outcome", "err", err)
		return // left to age out
	}
	if last != nil && last.Kind == protocol.RecordFinished {
		d.releaseHeld(ctx)
	}
}

// releaseHeld releases the reservations of the step in hand.
func (d *driver) releaseHeld(ctx context.Context) {
	for _, key := range d.unsettled {
		d.release(ctx, key)
	}
	d.unsettled = map[int]string{}
}

// emit publishes an event of the run, or, while a step's record is being
// written, holds it until the step's own event is out.
func (d *driver) emit(step int, kind string, ev *protocol.Event) {
	if d.commit == nil {
		d.c.emit(d.s.run, step, kind, ev)
		return
	}
	ev.Step, ev.Kind = step, kind
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC() // when it happened, not when it went out
	}
	d.held = append(d.held, ev)
}
