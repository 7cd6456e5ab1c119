package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Leases: one writer per run, at no cost while the run waits.
//
// A run's lease is a key in the harness-leases bucket naming the
// coordinator that drives it and that coordinator's epoch. It lives as
// long as its owner's heartbeat (the key "coordinator.<id>" of the same
// bucket) is renewed within the heartbeat's life (the TTL less a
// twentieth, life) under that epoch: a coordinator renews one key however
// many runs it holds, and a run waiting on a model or a person costs
// nothing to keep. A coordinator that misses its renewals for that long
// begins a new epoch, and every lease of the old one is dead
// at once, for whoever takes the runs over (itself included); the trace's
// fencing stops a driver that has not heard yet. A lease handed over
// (Expires set in the past) is dead whoever owns it.
//
// Every coordinator watches the bucket and keeps its leases and heartbeats
// in memory, so finding the runs to take over reads no key: it looks at
// the few heartbeats, and at the runs only of an owner found dead.

// leaseClock is the clock of every coordinator's leases; a test moves it
// to lapse a heartbeat on cue.
var leaseClock = time.Now

// errHeld means another coordinator holds a live lease on the run.
var errHeld = errors.New("lease held by another coordinator")

// leaseValue is what the harness-leases bucket holds for a running run.
type leaseValue struct {
	Owner      string `json:"owner"`
	Generation uint64 `json:"generation"`
	// Epoch is the owner's heartbeat epoch the lease lives with.
	Epoch uint64 `json:"epoch,omitempty"`
	// Expires, when set, ends the lease then whatever the heartbeat: a
	// lease handed over has it in the past.
	Expires time.Time `json:"expires,omitzero"`
}

// heartbeatValue is a coordinator's heartbeat: its leases of that epoch
// live until Expires.
type heartbeatValue struct {
	Coordinator string    `json:"coordinator"`
	Epoch       uint64    `json:"epoch"`
	Expires     time.Time `json:"expires"`
}

// heartbeatPrefix begins the key of every heartbeat; a run id has no dot,
// so none is taken for a run's lease.
const heartbeatPrefix = "coordinator."

// lease is one coordinator's hold on one run: the generation it took,
// the bucket revision it wrote and the heartbeat epoch it lives with.
type lease struct {
	run   string
	gen   uint64
	rev   uint64
	epoch uint64
}

// leases takes and gives back run leases and keeps this coordinator's
// heartbeat. A lease is written only by compare-and-set, so two
// coordinators can never both take a run.
type leases struct {
	kv    jetstream.KeyValue
	owner string
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	epoch   uint64 // 0 until the first beat
	beatRev uint64
	lastOK  time.Time
	// onLapse, when set, is told the new epoch after a beat that found the
	// heartbeat lapsed, whichever beat that was (the renewal's, or a lease
	// taken): every lease of an older epoch may be another's by now, and
	// one taken under the new epoch is alive. It is called without l.mu.
	onLapse func(epoch uint64)
	// view is the bucket as the watch last showed it.
	beats map[string]heartbeatValue          // by coordinator
	runs  map[string]leaseValue              // by run
	owned map[ownerEpoch]map[string]struct{} // runs by the heartbeat they live with
	ended map[string]struct{}                // runs whose lease has an Expires of its own
	ready bool                               // the watch has delivered the whole bucket
	// due holds a timer for each deadline the view shows (another
	// coordinator's heartbeat, a lease handed over), which nudges the
	// look for runs to take over the moment the deadline passes, rather
	// than at the next tick after it.
	due   map[string]*time.Timer
	nudge chan struct{}
}

type ownerEpoch struct {
	owner string
	epoch uint64
}

// life is how long a heartbeat keeps its leases alive unrenewed: the TTL
// less a twentieth, the time the survivors take to see it end and take the
// runs, so that a run whose coordinator died is taken over within the TTL,
// whenever the coordinator last renewed it.
func (l *leases) life() time.Duration { return l.ttl - l.ttl/20 }

// beat renews this coordinator's heartbeat, writing the first one (epoch
// 1, or one past the last this coordinator held) if there is none. It
// reports lapsed when the previous renewal was a whole life ago or more:
// the leases of the old epoch may have been taken, and a new epoch has
// begun; onLapse is told so before beat returns.
func (l *leases) beat(ctx context.Context) (lapsed bool, err error) {
	lapsed, epoch, err := l.renew(ctx)
	if lapsed && l.onLapse != nil {
		l.onLapse(epoch)
	}
	return lapsed, err
}

// renew is beat without telling onLapse: it also returns the epoch it
// renewed (the one it began, after a lapse).
func (l *leases) renew(ctx context.Context) (lapsed bool, epoch uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.epoch != 0 && now.Sub(l.lastOK) >= l.life() {
		lapsed = true
		l.epoch++
		l.beatRev = 0
	}
	key := heartbeatPrefix + l.owner
	if l.epoch == 0 {
		l.epoch = 1
		if e, err := l.kv.Get(ctx, key); err == nil {
			var hb heartbeatValue
			if json.Unmarshal(e.Value(), &hb) == nil {
				l.epoch = hb.Epoch + 1 // a coordinator of this id that came before: its leases are not ours
			}
			l.beatRev = e.Revision()
		}
	}
	epoch = l.epoch
	v := heartbeatValue{Coordinator: l.owner, Epoch: epoch, Expires: now.Add(l.life())}
	var rev uint64
	if l.beatRev == 0 {
		rev, err = l.kv.Put(ctx, key, mustJSON(v))
	} else {
		rev, err = l.kv.Update(ctx, key, mustJSON(v), l.beatRev)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			rev, err = l.kv.Put(ctx, key, mustJSON(v)) // nobody else writes it: a lost revision is ours
		}
	}
	if err != nil {
		return lapsed, epoch, fmt.Errorf("renew the heartbeat: %w", err)
	}
	l.beatRev, l.lastOK = rev, now
	return lapsed, epoch, nil
}

// current is the epoch this coordinator's leases are taken under, beating
// first if it has not yet, or not within its life (a lease taken under a
// lapsed epoch would be dead).
func (l *leases) current(ctx context.Context) (uint64, error) {
	l.mu.Lock()
	e, fresh := l.epoch, l.now().Sub(l.lastOK) < l.life()
	l.mu.Unlock()
	if e != 0 && fresh {
		return e, nil
	}
	if _, err := l.beat(ctx); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, nil
}

// stale reports whether the heartbeat has gone its whole life unrenewed, and
// the epoch it was renewed under: every lease of that epoch or an older
// one may be another's by now. A lease taken later is of a newer epoch,
// which only a renewal begins.
func (l *leases) stale() (epoch uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.epoch != 0 && l.now().Sub(l.lastOK) >= l.life()
}

// stop ends this coordinator's heartbeat, and with it every lease it
// holds: another coordinator takes the runs over at its next look.
func (l *leases) stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch == 0 {
		return nil
	}
	v := heartbeatValue{Coordinator: l.owner, Epoch: l.epoch, Expires: l.now().Add(-time.Millisecond)}
	_, err := l.kv.Put(ctx, heartbeatPrefix+l.owner, mustJSON(v))
	l.epoch++ // a lease taken from now on is of an epoch no heartbeat has yet
	l.beatRev = 0
	return err
}

// alive reports whether a heartbeat keeps leases of epoch alive, reading
// the bucket when the view does not say so.
func (l *leases) alive(ctx context.Context, owner string, epoch uint64) bool {
	l.mu.Lock()
	hb, ok := l.beats[owner]
	now := l.now()
	l.mu.Unlock()
	if ok && hb.Epoch == epoch && now.Before(hb.Expires) {
		return true
	}
	e, err := l.kv.Get(ctx, heartbeatPrefix+owner)
	if err != nil {
		return false
	}
	if json.Unmarshal(e.Value(), &hb) != nil {
		return false
	}
	return hb.Epoch == epoch && now.Before(hb.Expires)
}

// live reports whether v is a live lease.
func (l *leases) live(ctx context.Context, v leaseValue) bool {
	if !v.Expires.IsZero() || v.Epoch == 0 {
		return l.now().Before(v.Expires)
	}
	return l.alive(ctx, v.Owner, v.Epoch)
}

// acquire takes the run's lease if it is free, dead or already ours.
// Errors: errHeld if another coordinator's lease is live.
func (l *leases) acquire(ctx context.Context, run string) (*lease, error) {
	epoch, err := l.current(ctx)
	if err != nil {
		return nil, err
	}
	for range 3 {
		// Most runs taken are new: the create comes first, so their lease
		// costs one round trip rather than a read and then the create.
		first := leaseValue{Owner: l.owner, Generation: 1, Epoch: epoch}
		rev, err := l.kv.Create(ctx, run, mustJSON(first))
		if err == nil {
			return &lease{run: run, gen: 1, rev: rev, epoch: epoch}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("create lease %s: %w", run, err)
		}
		e, err := l.kv.Get(ctx, run)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // given back a moment ago: create it again
		}
		if err != nil {
			return nil, fmt.Errorf("read lease %s: %w", run, err)
		}
		var cur leaseValue
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			cur = leaseValue{} // unreadable: taken for dead
		}
		if cur.Owner != l.owner && l.live(ctx, cur) {
			return nil, errHeld
		}
		v := leaseValue{Owner: l.owner, Generation: cur.Generation + 1, Epoch: epoch}
		rev, err = l.kv.Update(ctx, run, mustJSON(v), e.Revision())
		if err != nil {
			continue // lost a race: look again
		}
		return &lease{run: run, gen: v.Generation, rev: rev, epoch: epoch}, nil
	}
	return nil, errHeld
}

// release gives the lease back, if it is still ours.
func (l *leases) release(ctx context.Context, ls *lease) {
	_ = l.kv.Delete(ctx, ls.run, jetstream.LastRevision(ls.rev))
}

// handOver ends a held lease at once, if it is still ours, so that
// another coordinator's next look for dead leases takes the run over.
// Unlike release it leaves the key: a run with no lease is one no
// coordinator looks for.
func (l *leases) handOver(ctx context.Context, ls *lease) error {
	v := leaseValue{Owner: l.owner, Generation: ls.gen, Expires: l.now().Add(-time.Millisecond)}
	_, err := l.kv.Update(ctx, ls.run, mustJSON(v), ls.rev)
	return err
}

// watch keeps the view of the bucket until ctx ends, watching again when
// a watch ends.
func (l *leases) watch(ctx context.Context, onErr func(error)) {
	for ctx.Err() == nil {
		err := l.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		onErr(err)
		if sleep(ctx, rewatchWait) != nil {
			return
		}
	}
}

func (l *leases) watchOnce(ctx context.Context) error {
	w, err := l.kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	l.mu.Lock()
	l.beats, l.runs = map[string]heartbeatValue{}, map[string]leaseValue{}
	l.owned, l.ended, l.ready = map[ownerEpoch]map[string]struct{}{}, map[string]struct{}{}, false
	l.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch's channel closed")
			}
			l.mu.Lock()
			if e == nil {
				l.ready = true
			} else {
				l.see(e)
			}
			l.mu.Unlock()
		}
	}
}

// see takes one entry of the watch into the view; l.mu is held.
func (l *leases) see(e jetstream.KeyValueEntry) {
	key := e.Key()
	gone := e.Operation() != jetstream.KeyValuePut
	if owner, ok := strings.CutPrefix(key, heartbeatPrefix); ok {
		var hb heartbeatValue
		if gone || json.Unmarshal(e.Value(), &hb) != nil {
			delete(l.beats, owner)
			l.disarm(key)
			l.poke() // its leases are dead now
			return
		}
		l.beats[owner] = hb
		if owner != l.owner {
			l.at(key, hb.Expires)
		}
		return
	}
	l.disarm(key)
	if old, ok := l.runs[key]; ok {
		oe := ownerEpoch{old.Owner, old.Epoch}
		delete(l.owned[oe], key)
		if len(l.owned[oe]) == 0 {
			delete(l.owned, oe)
		}
		delete(l.ended, key)
		delete(l.runs, key)
	}
	var v leaseValue
	if gone {
		return
	}
	if json.Unmarshal(e.Value(), &v) != nil {
		v = leaseValue{Expires: time.Unix(0, 0)} // unreadable: dead
	}
	l.runs[key] = v
	if !v.Expires.IsZero() || v.Epoch == 0 {
		l.ended[key] = struct{}{}
		l.at(key, v.Expires)
		return
	}
	oe := ownerEpoch{v.Owner, v.Epoch}
	if l.owned[oe] == nil {
		l.owned[oe] = map[string]struct{}{}
	}
	l.owned[oe][key] = struct{}{}
}

// at arms key's timer to nudge when t passes (at once if it has). The
// caller holds l.mu.
func (l *leases) at(key string, t time.Time) {
	l.nudges()
	d := t.Sub(l.now()) + time.Millisecond // just past it: the look finds it dead
	if tm, ok := l.due[key]; ok {
		tm.Reset(d)
		return
	}
	l.due[key] = time.AfterFunc(d, l.poke)
}

// disarm stops key's timer, if it has one. The caller holds l.mu.
func (l *leases) disarm(key string) {
	if tm, ok := l.due[key]; ok {
		tm.Stop()
		delete(l.due, key)
	}
}

// poke nudges the look for runs to take over, unless a nudge is waiting.
func (l *leases) poke() {
	select {
	case l.nudge <- struct{}{}:
	default:
	}
}

// nudges returns the channel the deadlines' timers nudge. The caller
// holds l.mu, or is the only user of l yet.
func (l *leases) nudges() <-chan struct{} {
	if l.nudge == nil {
		l.nudge, l.due = make(chan struct{}, 1), map[string]*time.Timer{}
	}
	return l.nudge
}

// expired lists the runs whose lease is dead: their coordinator died,
// stopped or lapsed without finishing them, or handed them over. It reads
// the view, and nothing before the watch has shown the whole bucket.
func (l *leases) expired(ctx context.Context) ([]string, error) {
	l.mu.Lock()
	ready := l.ready
	l.mu.Unlock()
	if !ready {
		if err := l.load(ctx); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var out []string
	for oe, runs := range l.owned {
		if hb, ok := l.beats[oe.owner]; ok && hb.Epoch == oe.epoch && now.Before(hb.Expires) {
			continue
		}
		if oe.owner == l.owner && oe.epoch == l.epoch && now.Sub(l.lastOK) < l.life() {
			continue // ours, and alive: the view has not shown the latest beat yet
		}
		for run := range runs {
			out = append(out, run)
		}
	}
	for run := range l.ended {
		if !now.Before(l.runs[run].Expires) {
			out = append(out, run)
		}
	}
	return out, nil
}

// load reads the whole bucket into the view, for a coordinator that does
// not watch it.
func (l *leases) load(ctx context.Context) error {
	lister, err := l.kv.ListKeys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return err
	}
	var entries []jetstream.KeyValueEntry
	if err == nil {
		for k := range lister.Keys() {
			if e, err := l.kv.Get(ctx, k); err == nil {
				entries = append(entries, e)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beats, l.runs = map[string]heartbeatValue{}, map[string]leaseValue{}
	l.owned, l.ended = map[ownerEpoch]map[string]struct{}{}, map[string]struct{}{}
	for _, e := range entries {
		l.see(e)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // leaseValue always encodes
	}
	return b
}
