package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// Waiting costs nothing. A run works in segments: a goroutine and a run
// slot carry it from one wait to the next, and between them it is parked,
// a driver in memory and nothing else. A run parks while it waits on a
// provider turn or a retry's delay; it is woken by the turn (every run's
// turns come to the coordinator's one inbox, which hands each to its
// driver), by a runtime timer (the attempt given up on, the delay over,
// the run out of time), or by a cancel. A woken run waits for a free slot
// like any other work, first woken first served.
//
// Its lease costs nothing either (lease.go: one heartbeat a coordinator),
// and its step task is published again only when something was lost: the
// connection to NATS came back, the steps stream was made anew (a NATS
// restart loses its step tasks, kept in memory), or the run's turns
// subscription dropped a message.

// errParked is turn's word that the run waits, parked.
var errParked = errors.New("the run waits, parked")

// parkRun is step's word that the run parked, in its outcome's place.
const parkRun protocol.Outcome = "\x00parked"

// inboxSize is how many turns the inbox holds before the dispatcher takes
// them; it takes them at once, so this is slack, not a queue.
const inboxSize = 1 << 14

// turnWait is the step task whose turn a step waits on, or the delay
// before its next attempt.
type turnWait struct {
	step, attempt, retries int
	task                   *nats.Msg // as published, to publish again; nil before
	key                    string    // its idempotency key
	estimate               ledger.Usage
	giveUp                 time.Time // when the attempt is given up on and a new one made
	retryAt                time.Time // set while a retry's delay runs
}

// due is when the wait ends without an answer.
func (w *turnWait) due() time.Time {
	if !w.retryAt.IsZero() {
		return w.retryAt
	}
	return w.giveUp
}

type parkState uint8

const (
	working parkState = iota // a goroutine carries the run
	leaving                  // its goroutine is leaving it
	parked                   // nothing carries it
)

// parking is a driver's part in the hand-off between its segments; mu
// guards it, taken by the dispatcher, timers and cancels.
type parking struct {
	mu     sync.Mutex
	state  parkState
	wakeup bool                 // woken while parking: the leaving goroutine carries on
	inbox  []*nats.Msg          // turns heard, not yet taken
	kids   []*protocol.RunState // finishes of sub-agents waited on, heard, not yet taken
	cancel *protocol.Cancel
	timer  *time.Timer
	lost   bool // a turn may have been lost: look it up before waiting again
	// relook is set when a look-up could not tell, or its publish failed:
	// watchLoss has the run look again at its next look.
	relook bool
	// dropped is how many turns the run's subscription had dropped at
	// watchLoss's last look.
	dropped int
	// gone is set by letGo for a run whose goroutine was leaving it: the
	// run does not park on a lease that may be another's by now.
	gone bool
}

// takeInbox returns the turns heard for the run since the last take.
func (d *driver) takeInbox() []*nats.Msg {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	in := d.pk.inbox
	d.pk.inbox = nil
	return in
}

// work carries a run in segments: one now, on sl, and one each time it is
// woken after it parked. It returns when the run leaves this coordinator
// or parks (its goroutine and slot then given back).
func (c *Coordinator) work(d *driver, sl *slot) {
	run := d.s.run
	for {
		d.slot = sl
		if !d.lookedUp() {
			sl.release()
			return
		}
		d.pk.mu.Lock()
		gone := d.pk.gone
		d.pk.mu.Unlock()
		if gone {
			// Let go of while it waited for this slot: another coordinator
			// may hold the run by now.
			d.dropKids()
			_ = d.sub.Unsubscribe()
			d.close()
			c.ended(d.ctx, run, d.ls, false)
			sl.release()
			return
		}
		rctx, drop := context.WithCancel(d.ctx)
		dctx, stop := context.WithCancelCause(rctx)
		c.mu.Lock()
		c.stops[run], c.drops[run] = stop, drop
		c.mu.Unlock()
		if mark := d.cancelAsked(); mark != nil {
			stop(&cancelled{mark})
		}
		c.metrics.Driving(1)
		parkedNow, settled := d.drive(rctx, dctx)
		c.metrics.Driving(-1)
		// Let go of while it worked (the heartbeat lapsed): its lease may
		// be another's by now, so it does not park on it.
		dropped := rctx.Err() != nil && d.ctx.Err() == nil
		c.mu.Lock()
		delete(c.stops, run)
		delete(c.drops, run)
		c.mu.Unlock()
		stop(nil)
		drop()
		sl = d.slot // lent and reclaimed by a wait on sub-agents, perhaps
		if parkedNow && d.ctx.Err() == nil {
			how := parkGone
			if !dropped {
				how = d.park()
			}
			switch how {
			case parkDone:
				sl.release()
				return
			case parkWoken:
				continue // woken while it was leaving: carried on at once
			}
			// Let go of: the workspace kept open for the step in hand is
			// closed, as for any driver that leaves its run.
			d.close()
			parkedNow = false
		}
		d.dropKids()
		_ = d.sub.Unsubscribe()
		c.ended(d.ctx, run, d.ls, settled)
		if mark := cancelOf(dctx); mark != nil && settled && d.s.finished == nil {
			// Cancelled as it paused: the cancel came too late for this
			// driver, and it is ended as a paused run is.
			if err := c.endIdle(d.ctx, run, mark); err != nil {
				c.log.Warn("end a cancelled run", "run", run, "err", err)
			}
		}
		sl.release()
		return
	}
}

// lookedUp makes sure a run that may have lost its turn does not wait for
// it: it reads the turn from the turns stream, where a worker's answer
// always lands, or publishes the task again under its message id. It
// reports false when the coordinator is stopping.
func (d *driver) lookedUp() bool {
	d.pk.mu.Lock()
	lost := d.pk.lost
	d.pk.lost = false
	d.pk.mu.Unlock()
	if lost && d.kids != nil {
		d.kids.look = true // read each sub-agent's state again, and a few times after
		d.kids.gap = 0
	}
	w := d.wait
	if !lost || w == nil || w.task == nil {
		return d.ctx.Err() == nil
	}
	m, err := d.lastTurn(d.ctx, w.step, w.attempt)
	if err == nil && answerIn(m.Data) != nil {
		d.pk.mu.Lock()
		d.pk.inbox = append(d.pk.inbox, &nats.Msg{Subject: m.Subject, Data: m.Data})
		d.pk.mu.Unlock()
		return true
	}
	// No answer: none at all, or a worker's mark of the task given back
	// uncalled, which the lost task (a steps stream made anew) leaves.
	relook := err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) // the stream did not say: look again
	pctx, cancel := jsCall(d.ctx)
	defer cancel()
	if _, err := d.c.js.PublishMsg(pctx, w.task, jetstream.WithMsgID(w.key)); err != nil {
		d.log.Debug("publish the step task again", "step", w.step, "err", err)
		relook = true // JetStream did not take it (a cluster still electing its leaders): again at the next look
	}
	if relook {
		d.pk.mu.Lock()
		d.pk.relook = true
		d.pk.mu.Unlock()
	}
	return d.ctx.Err() == nil
}

// How park left a run.
type parkHow uint8

const (
	parkDone  parkHow = iota // parked
	parkWoken                // woken while its goroutine was leaving it, which carries it on
	parkGone                 // let go of while its goroutine was leaving it (letGo)
)

// park leaves the run parked, with a timer for the end of its wait; or
// not, when it was woken or let go of while its goroutine was leaving it.
func (d *driver) park() parkHow {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	if d.pk.gone {
		d.pk.state = working
		return parkGone
	}
	if d.pk.wakeup || len(d.pk.inbox) > 0 || len(d.pk.kids) > 0 || d.pk.cancel != nil || d.pk.lost {
		d.pk.wakeup = false
		d.pk.state = working
		return parkWoken
	}
	d.pk.state = parked
	d.c.metrics.Waiting(1)
	var until time.Time
	switch {
	case d.wait != nil:
		until = d.wait.due()
		if t := d.indexed.Add(indexEvery); d.unindexed && t.Before(until) {
			until = t // woken then to write the progress the index lacks, and parked again
		}
	case d.kids != nil:
		until = d.kids.lookAt // a finish it did not hear is read then (zero: none)
	}
	if dl := d.s.deadline(); !dl.IsZero() && (until.IsZero() || dl.Before(until)) {
		until = dl
	}
	if !until.IsZero() {
		d.pk.timer = time.AfterFunc(time.Until(until), d.wake)
	}
	return parkDone
}

// parkNow marks the driver as leaving its goroutine, unless something
// came for it already: then it reports false and the run carries on.
func (d *driver) parkNow() bool {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	// A lost turn is looked up by the next segment (park sees it), not
	// here: nothing in this one would clear it.
	if len(d.pk.inbox) > 0 || len(d.pk.kids) > 0 || d.pk.cancel != nil {
		return false
	}
	d.pk.state = leaving
	return true
}

// wake carries a parked run on, on a goroutine of its own once a slot is
// free; a run working or leaving its goroutine carries on by itself.
func (d *driver) wake() {
	d.pk.mu.Lock()
	switch d.pk.state {
	case working:
		d.pk.mu.Unlock()
		return
	case leaving:
		d.pk.wakeup = true
		d.pk.mu.Unlock()
		return
	}
	d.pk.state = working
	if d.pk.timer != nil {
		d.pk.timer.Stop()
		d.pk.timer = nil
	}
	d.pk.mu.Unlock()
	c := d.c
	c.metrics.Waiting(-1)
	if !c.working() {
		d.pk.mu.Lock()
		d.pk.state = parked // the coordinator is stopping: its heartbeat's end hands the run over
		d.pk.mu.Unlock()
		c.metrics.Waiting(1)
		return
	}
	go func() {
		defer c.wg.Done()
		select {
		case c.slots <- struct{}{}:
		case <-d.ctx.Done():
			return
		}
		c.work(d, c.heldSlot())
	}()
}

// cancelAsked is the cancel asked while the run was parked or leaving
// its goroutine, if any, taken once.
func (d *driver) cancelAsked() *protocol.Cancel {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	m := d.pk.cancel
	d.pk.cancel = nil
	return m
}

// cancelParked hands a cancel to a run in hand here that no goroutine may
// be carrying, and wakes it to end it. It reports whether run is in hand.
func (c *Coordinator) cancelParked(run string, mark *protocol.Cancel) bool {
	c.mu.Lock()
	d := c.active[run]
	c.mu.Unlock()
	if d == nil {
		return false
	}
	d.pk.mu.Lock()
	d.pk.cancel = mark
	d.pk.mu.Unlock()
	d.wake()
	return true
}

// dispatch hands every turn of the inbox to its run's driver, waking it,
// until ctx ends.
func (c *Coordinator) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-c.inbox:
			c.deliver(m)
		}
	}
}

func (c *Coordinator) deliver(m *nats.Msg) {
	if kid := c.kidOf(m.Subject); kid != "" {
		c.deliverKid(kid, m)
		return
	}
	run := runOfTurn(m.Subject)
	c.mu.Lock()
	d := c.active[run]
	c.mu.Unlock()
	if d == nil {
		return // a run no longer in hand: its next driver reads the turn from the stream
	}
	d.pk.mu.Lock()
	d.pk.inbox = append(d.pk.inbox, m)
	d.pk.mu.Unlock()
	d.wake()
}

// runOfTurn is the run of a stored turn's subject (wire.Stored).
func runOfTurn(subject string) string {
	rest := strings.TrimPrefix(subject, wire.StoredPrefix)
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// keepAlive renews the coordinator's heartbeat, and with it every lease it
// holds, every third of the lease TTL until ctx ends. Should renewals fail
// for the heartbeat's whole life (leases.life), the leases may be another
// coordinator's by now: every run in hand here is let go (the trace's
// fencing stops a driver that has not heard yet). The renewal that then
// succeeds begins a new epoch, under which this coordinator takes back,
// at its next look, what nobody else took; whichever beat finds the
// lapse (this one, or one made to take a lease) lets go of the runs of
// older epochs at once (lapsed), and of those alone, so a run taken
// under the new epoch is kept.
func (c *Coordinator) keepAlive(ctx context.Context) {
	t := time.NewTicker(c.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.leases.beat(ctx); err != nil {
			c.log.Warn("renew the heartbeat", "err", err)
			if epoch, stale := c.leases.stale(); stale {
				c.letGo(epoch + 1)
			}
		}
	}
}

// lapsed is told by the leases that the heartbeat lapsed and epoch began.
func (c *Coordinator) lapsed(epoch uint64) {
	c.log.Warn("the heartbeat lapsed; letting go of the runs held under an older epoch", "epoch", epoch)
	c.letGo(epoch)
}

// letGo stops driving every run in hand whose lease is of an epoch before
// before: the lease of each may have been taken.
func (c *Coordinator) letGo(before uint64) {
	c.mu.Lock()
	var gone []*driver
	for run, d := range c.active {
		if d == nil || d.ls != nil && d.ls.epoch >= before {
			continue // being started (under a lease just taken), or alive
		}
		if drop := c.drops[run]; drop != nil {
			drop()
			continue
		}
		gone = append(gone, d)
	}
	c.mu.Unlock()
	var closing []*driver
	for _, d := range gone {
		d.pk.mu.Lock()
		if d.pk.state != parked {
			// Working, its segment about to end, or leaving its goroutine:
			// it leaves the run instead of parking (work).
			d.pk.gone = true
			d.pk.mu.Unlock()
			continue
		}
		if d.pk.timer != nil {
			d.pk.timer.Stop()
		}
		d.pk.state = working // no one will wake it: it is gone
		d.pk.mu.Unlock()
		c.metrics.Waiting(-1)
		d.dropKids()
		_ = d.sub.Unsubscribe()
		c.mu.Lock()
		if c.active[d.s.run] == d {
			delete(c.active, d.s.run)
		}
		c.mu.Unlock()
		closing = append(closing, d)
	}
	// Their workspaces are closed on the side: with NATS away each close
	// waits out its timeout, and the heartbeat must not wait for them.
	if len(closing) > 0 {
		go func() {
			for _, d := range closing {
				d.close()
			}
		}()
	}
}

// watchLoss wakes, to look their turn up, the runs in hand that may have
// lost it: all of them when the connection to NATS came back or the steps
// stream was made anew since the last look, those whose subscription
// dropped a message otherwise. It looks every RepublishInterval, reading
// one stream's info; it publishes nothing while nothing was lost.
func (c *Coordinator) watchLoss(ctx context.Context) {
	reconnects := c.nc.Stats().Reconnects
	var created time.Time
	if info, err := c.assets.Steps.Info(ctx); err == nil {
		created = info.Created
	}
	every(ctx, c.cfg.RepublishInterval, func() {
		all := false
		if r := c.nc.Stats().Reconnects; r != reconnects {
			reconnects, all = r, true
		}
		ictx, cancel := jsCall(ctx)
		info, err := c.assets.Steps.Info(ictx)
		cancel()
		// A stream that does not answer is no sign of loss (a busy
		// server answers late): one made anew is, once it answers.
		if err == nil && !info.Created.Equal(created) {
			if !created.IsZero() {
				all = true
			}
			created = info.Created
		}
		c.mu.Lock()
		var lost []*driver
		for _, d := range c.active {
			if d == nil {
				continue
			}
			if all {
				lost = append(lost, d)
				continue
			}
			d.pk.mu.Lock()
			relook := d.pk.relook
			d.pk.relook = false
			n, _ := d.sub.Dropped()
			if d.pk.state == parked {
				n += d.kidsDropped()
			}
			d.pk.mu.Unlock()
			if n > d.pk.dropped || relook {
				d.pk.dropped = max(d.pk.dropped, n) // watchLoss's alone
				lost = append(lost, d)
			}
		}
		c.mu.Unlock()
		for _, d := range lost {
			d.pk.mu.Lock()
			again := d.pk.lost // woken for it already, not looked up yet
			d.pk.lost = true
			d.pk.mu.Unlock()
			if !again {
				d.wake()
			}
		}
	})
}
