package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
)

// Approvals holds the actions waiting for a person and the decisions made
// about them, one key per approval id. The pending action and the decision
// are written separately, each by compare-and-set, so either may come
// first and neither overwrites the other.
type Approvals struct {
	kv jetstream.KeyValue
}

// NewApprovals returns Approvals over the bucket.
func NewApprovals(kv jetstream.KeyValue) *Approvals { return &Approvals{kv: kv} }

// Get returns an approval. Errors: protocol.ErrUnknownRun (code
// unknown_run) when there is no such approval.
func (a *Approvals) Get(ctx context.Context, id string) (*protocol.Approval, error) {
	ap, _, err := a.get(ctx, id)
	return ap, err
}

func (a *Approvals) get(ctx context.Context, id string) (*protocol.Approval, uint64, error) {
	e, err := a.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, protocol.Errorf(protocol.CodeUnknownRun, "no approval %s", id)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read approval %s: %w", id, err)
	}
	var ap protocol.Approval
	if err := json.Unmarshal(e.Value(), &ap); err != nil {
		return nil, 0, fmt.Errorf("decode approval %s: %w", id, err)
	}
	return &ap, e.Revision(), nil
}

// update applies change to the approval under id, creating it if absent,
// retrying on a concurrent write.
func (a *Approvals) update(ctx context.Context, id string, change func(*protocol.Approval) error) (*protocol.Approval, error) {
	for range 10 {
		ap, rev, err := a.get(ctx, id)
		if errors.Is(err, protocol.ErrUnknownRun) {
			ap, rev = &protocol.Approval{ID: id}, 0
		} else if err != nil {
			return nil, err
		}
		if err := change(ap); err != nil {
			return nil, err
		}
		data, err := json.Marshal(ap)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			_, err = a.kv.Create(ctx, id, data)
		} else {
			_, err = a.kv.Update(ctx, id, data, rev)
		}
		if err == nil {
			return ap, nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongSeq(err) {
			continue
		}
		return nil, fmt.Errorf("write approval %s: %w", id, err)
	}
	return nil, fmt.Errorf("write approval %s: too many concurrent writers", id)
}

// Defer records a pending action and returns the approval as it now
// stands, with a decision if one arrived first.
func (a *Approvals) Defer(ctx context.Context, id string, p *protocol.Pending) (*protocol.Approval, error) {
	return a.update(ctx, id, func(ap *protocol.Approval) error {
		ap.Pending = p
		return nil
	})
}

// Decide records a decision. A decision may arrive before the action is
// deferred; it then waits for it. Errors: CodeRunFinished when the
// approval was already decided.
func (a *Approvals) Decide(ctx context.Context, id string, d *protocol.Decision) (*protocol.Approval, error) {
	if d.Time.IsZero() {
		d.Time = time.Now().UTC()
	}
	return a.update(ctx, id, func(ap *protocol.Approval) error {
		if ap.Decision != nil {
			return protocol.Errorf(protocol.CodeRunFinished, "approval %s was already decided", id)
		}
		ap.Decision = d
		return nil
	})
}

// List returns every approval in the bucket.
func (a *Approvals) List(ctx context.Context) ([]protocol.Approval, error) {
	lister, err := a.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []protocol.Approval
	for k := range lister.Keys() {
		if ap, err := a.Get(ctx, k); err == nil {
			out = append(out, *ap)
		}
	}
	return out, nil
}

// Watch calls fn for every approval as it stands now and on each change,
// until ctx ends.
func (a *Approvals) Watch(ctx context.Context, fn func(*protocol.Approval)) error {
	w, err := a.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch approvals: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var ap protocol.Approval
			if json.Unmarshal(e.Value(), &ap) == nil {
				fn(&ap)
			}
		}
	}
}

func isWrongSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
