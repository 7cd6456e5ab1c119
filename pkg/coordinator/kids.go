package coordinator

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/protocol"
)

// A run waiting on its sub-agents waits parked, like one waiting on a
// turn (park.go): the step in hand is kept in memory (kidsWait), each
// sub-agent's entry in the run index is subscribed to, into the
// coordinator's one inbox, and the finish the index records wakes the
// parent, which composes the outcomes in the calls' order and carries
// the step on. Nothing durable is kept of the wait: a driver that takes
// the run over replays the step, whose spawns find the sub-agents they
// started (their ids are the spawning calls').
//
// A finish can be missed. JetStream stores a publish after it routes it
// to subscribers, and answers a read from what it has stored: a finish
// published just before the subscription was there, and stored just
// after the first read, reaches the parent by neither. NATS may be away,
// too. So the wait reads each sub-agent's state once after it subscribes,
// whenever watchLoss says something may have been lost (as it does for
// turns), and a few times after each of those looks, 100 ms later and
// then twice as long each time (nextLook). A missed finish costs a
// look's delay, never the run, and a long wait does no work of its own.

// kidsWait is the step in hand waiting on the sub-agents of one run of
// its spawn_agent calls.
type kidsWait struct {
	step  int
	turn  *protocol.Turn
	rec   *protocol.Record // the step's record so far
	unrun string
	next  int // the index of the call after the group
	obs   []*protocol.Observation
	kids  []kid // the sub-agents not finished yet
	pl    places
	// look is set when each sub-agent's state is to be read from the
	// index rather than waited for: at the start, and after a loss.
	look bool
	// lookAt is when the states are read again whatever was heard (zero:
	// not on a timer), and gap the wait before it.
	lookAt time.Time
	gap    time.Duration
}

// firstRelook is the wait between a look at a step's sub-agents and the
// next. Each later one waits twice as long as the one before, until that
// would be longer than the coordinator's RepublishInterval: by then a
// finish stored late is long stored, and the run waits without looking.
const firstRelook = 100 * time.Millisecond

// nextLook sets when the sub-agents are looked up again after a look, or
// that they are not (lookAt zero).
func (h *kidsWait) nextLook(most time.Duration) {
	h.gap = max(2*h.gap, firstRelook)
	if h.gap > most {
		h.lookAt = time.Time{}
		return
	}
	h.lookAt = time.Now().Add(h.gap)
}

// kidsLooked, set by tests alone, runs after each look at a step's
// sub-agents, on the driver's goroutine.
var kidsLooked func()

// kid is a started sub-agent a step waits on.
type kid struct {
	k         int // its call's index in the group
	run, goal string
	sub       *nats.Subscription
}

// waitKids parks the step on the sub-agents started for the group of
// calls obs answers (those of kids), or composes their outcomes at once
// when none is left running. It reports whether the step parked.
func (d *driver) waitKids(ctx context.Context, h *kidsWait) (parked bool) {
	for i := range h.kids {
		kd := &h.kids[i]
		sub, err := d.c.nc.ChanSubscribe(d.c.index.Subject(kd.run), d.c.inbox)
		if err != nil {
			d.log.Warn("subscribe to a sub-agent's state; reading it at each look", "child", kd.run, "err", err)
		} else {
			kd.sub = sub
		}
		d.c.mu.Lock()
		d.c.parents[kd.run] = d
		d.c.mu.Unlock()
	}
	h.look = true
	d.kids = h
	return d.awaitKids(ctx)
}

// awaitKids takes the sub-agents' finishes heard since the last look and
// composes each into its call's observation. It reports true, parked,
// while some still run; false once the group is answered (d.kids is then
// nil, and h.obs complete), the run's context ended included.
func (d *driver) awaitKids(ctx context.Context) bool {
	h := d.kids
	for {
		d.pk.mu.Lock()
		heard := d.pk.kids
		d.pk.kids = nil
		d.pk.mu.Unlock()
		done := map[string]*protocol.RunState{}
		for _, st := range heard {
			done[st.Run] = st
		}
		look := h.look || !h.lookAt.IsZero() && !time.Now().Before(h.lookAt)
		h.look = false
		left := h.kids[:0]
		for _, kd := range h.kids {
			st := done[kd.run]
			if st == nil && look {
				if got, err := d.c.index.Get(ctx, kd.run); err == nil && runFinished(got) {
					st = got
				} else if err != nil && ctx.Err() == nil {
					h.look = true // the index did not answer: read it again at the next look
				}
			}
			if st == nil && ctx.Err() == nil {
				left = append(left, kd)
				continue
			}
			d.forget(kd)
			if st == nil {
				h.obs[kd.k].Status, h.obs[kd.k].Content = protocol.CallIndeterminate, "[spawn error] the sub-agent's outcome is unknown: "+ctx.Err().Error()
				continue
			}
			h.obs[kd.k] = d.childOutcome(ctx, h.obs[kd.k], kd.run, kd.goal, h.pl, st)
		}
		h.kids = left
		if look {
			h.nextLook(d.c.cfg.RepublishInterval)
			if kidsLooked != nil {
				kidsLooked()
			}
		}
		if len(left) == 0 {
			d.kids = nil
			d.asideEnd(ctx, h.pl)
			return false
		}
		if d.parkNow() {
			return true
		}
	}
}

// forget stops listening for a sub-agent the step no longer waits on.
func (d *driver) forget(kd kid) {
	if kd.sub != nil {
		_ = kd.sub.Unsubscribe()
	}
	d.c.mu.Lock()
	if d.c.parents[kd.run] == d {
		delete(d.c.parents, kd.run)
	}
	d.c.mu.Unlock()
}

// dropKids stops the wait on sub-agents of a driver leaving the run
// (taken over, let go, the coordinator stopping): the next driver replays
// the step.
func (d *driver) dropKids() {
	if h := d.kids; h != nil {
		for _, kd := range h.kids {
			d.forget(kd)
		}
		d.kids = nil
	}
}

// kidsDropped is how many finishes the subscriptions of the sub-agents
// waited on have dropped. Only the driver's goroutine changes d.kids, and
// only while the run is not parked, so watchLoss reads it under pk.mu,
// with the state parked.
func (d *driver) kidsDropped() int {
	n := 0
	if h := d.kids; h != nil {
		for _, kd := range h.kids {
			if kd.sub != nil {
				m, _ := kd.sub.Dropped()
				n += m
			}
		}
	}
	return n
}

// deliverKid hands the state of a sub-agent, heard on its index entry, to
// the parent waiting on it, and wakes the parent when the sub-agent has
// finished; a step is news to no one.
func (c *Coordinator) deliverKid(child string, m *nats.Msg) {
	var st protocol.RunState
	if json.Unmarshal(m.Data, &st) != nil || !runFinished(&st) {
		return
	}
	if lose := kidFinishLost; lose != nil && lose(child) {
		return
	}
	st.Run = child
	c.mu.Lock()
	d := c.parents[child]
	c.mu.Unlock()
	if d == nil {
		return
	}
	d.pk.mu.Lock()
	d.pk.kids = append(d.pk.kids, &st)
	d.pk.mu.Unlock()
	d.wake()
}

// kidFinishLost, set by tests alone, says which sub-agents' finishes
// deliverKid drops, as a finish published before the parent subscribed
// is never heard.
var kidFinishLost func(child string) bool

// kidOf is the run of an index entry's subject, or "" for another subject.
func (c *Coordinator) kidOf(subject string) string {
	run, ok := strings.CutPrefix(subject, c.index.Subject(""))
	if !ok {
		return ""
	}
	return run
}
