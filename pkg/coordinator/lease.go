package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errHeld means another coordinator holds a live lease on the run.
var errHeld = errors.New("lease held by another coordinator")

// leaseValue is what the harness-leases bucket holds for a running run.
type leaseValue struct {
	Owner      string    `json:"owner"`
	Generation uint64    `json:"generation"`
	Expires    time.Time `json:"expires"`
}

// lease is one coordinator's hold on one run: the generation it took and
// the bucket revision it last wrote, which every renewal must match.
type lease struct {
	run string
	gen uint64
	rev uint64
}

// leases takes, renews and gives back run leases. A lease is a key in a
// key-value bucket written only by compare-and-set, so two coordinators
// can never both hold a run; the trace's fencing stops a holder that lost
// its lease without noticing.
type leases struct {
	kv    jetstream.KeyValue
	owner string
	ttl   time.Duration
	now   func() time.Time
}

// acquire takes the run's lease if it is free, expired or already ours.
// Errors: errHeld if another coordinator's lease is live.
func (l *leases) acquire(ctx context.Context, run string) (*lease, error) {
	for range 3 {
		e, err := l.kv.Get(ctx, run)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			v := leaseValue{Owner: l.owner, Generation: 1, Expires: l.now().Add(l.ttl)}
			rev, err := l.kv.Create(ctx, run, mustJSON(v))
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // someone took it a moment ago: look again
			}
			if err != nil {
				return nil, fmt.Errorf("create lease %s: %w", run, err)
			}
			return &lease{run: run, gen: 1, rev: rev}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read lease %s: %w", run, err)
		}
		var cur leaseValue
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			cur = leaseValue{} // unreadable: treat as expired
		}
		if cur.Owner != l.owner && l.now().Before(cur.Expires) {
			return nil, errHeld
		}
		v := leaseValue{Owner: l.owner, Generation: cur.Generation + 1, Expires: l.now().Add(l.ttl)}
		rev, err := l.kv.Update(ctx, run, mustJSON(v), e.Revision())
		if err != nil {
			continue // lost a race: look again
		}
		return &lease{run: run, gen: v.Generation, rev: rev}, nil
	}
	return nil, errHeld
}

// renew extends a held lease. Errors: errHeld when the lease was taken
// over (its revision moved on), otherwise the bucket's error.
func (l *leases) renew(ctx context.Context, ls *lease) error {
	v := leaseValue{Owner: l.owner, Generation: ls.gen, Expires: l.now().Add(l.ttl)}
	rev, err := l.kv.Update(ctx, ls.run, mustJSON(v), ls.rev)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return errHeld
		}
		return fmt.Errorf("renew lease %s: %w", ls.run, err)
	}
	ls.rev = rev
	return nil
}

// release gives the lease back, if it is still ours.
func (l *leases) release(ctx context.Context, ls *lease) {
	_ = l.kv.Delete(ctx, ls.run, jetstream.LastRevision(ls.rev))
}

// handOver ends a held lease at once, if it is still ours, so that
// another coordinator's next look for expired leases takes the run over
// instead of after the lease's lifetime. Unlike release it leaves the key:
// a run with no lease is one no coordinator looks for.
func (l *leases) handOver(ctx context.Context, ls *lease) error {
	v := leaseValue{Owner: l.owner, Generation: ls.gen, Expires: l.now().Add(-time.Millisecond)}
	_, err := l.kv.Update(ctx, ls.run, mustJSON(v), ls.rev)
	return err
}

// expired lists the runs whose lease has run out: their coordinator died
// or stopped without finishing them.
func (l *leases) expired(ctx context.Context) ([]string, error) {
	lister, err := l.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		e, err := l.kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var v leaseValue
		if json.Unmarshal(e.Value(), &v) != nil || !l.now().Before(v.Expires) {
			out = append(out, k)
		}
	}
	return out, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // leaseValue always encodes
	}
	return b
}
