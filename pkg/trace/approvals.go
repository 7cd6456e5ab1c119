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
// first and neither overwrites the other. A decision is taken only for an
// approval that exists: pending, or one the run has reached (see Decide),
// which the runs' traces tell.
type Approvals struct {
	kv     jetstream.KeyValue
	traces *Trace
}

// NewApprovals returns Approvals over the bucket, judging decisions by the
// runs' traces.
func NewApprovals(kv jetstream.KeyValue, traces *Trace) *Approvals {
	return &Approvals{kv: kv, traces: traces}
}

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

// Decide records a person's decision on approval id, with who decided in
// d.By. It is accepted for an action that is pending and not decided yet,
// or, made early, for a tool call of a step the run has reached: the step
// it is taking (the decision then waits for the pause and counts), or a
// committed step whose call deferred to a person before the pause was
// recorded. A provider endpoint's approval (step 0) is decided only once it
// is pending: nobody can know the endpoint before the run asks.
//
// Errors: CodeInvalidField for a malformed id; CodeUnknownRun when the run
// has no trace, or the id names no action the run deferred or has reached
// (a step it has not reached, a call of a past step that asked nobody);
// CodeRunFinished when the approval was already decided, or its run has
// finished; the trace's and the bucket's read and write errors.
func (a *Approvals) Decide(ctx context.Context, id string, d *protocol.Decision) (*protocol.Approval, error) {
	run, step, _, err := protocol.ParseApprovalID(id)
	if err != nil {
		return nil, err
	}
	if d.Time.IsZero() {
		d.Time = time.Now().UTC()
	}
	r, err := a.reach(ctx, run)
	if err != nil {
		return nil, err
	}
	return a.update(ctx, id, func(ap *protocol.Approval) error {
		if ap.Decision != nil {
			return protocol.Errorf(protocol.CodeRunFinished, "approval %s was already decided", id)
		}
		if r.finished {
			return protocol.Errorf(protocol.CodeRunFinished, "run %s has finished; approval %s has nothing left to decide", run, id)
		}
		if ap.Pending == nil {
			if err := r.early(id, step); err != nil {
				return err
			}
		}
		ap.Decision = d
		return nil
	})
}

// reached is what a run's trace says about the approvals it may have.
type reached struct {
	last     int             // the last committed step
	paused   bool            // the run waits for a person, so takes no step
	finished bool            // the run has its outcome
	deferred map[string]bool // the approval ids committed steps deferred calls to
}

// reach reads run's trace for Decide. Errors: CodeUnknownRun when the run
// has no trace; the trace's read errors.
func (a *Approvals) reach(ctx context.Context, run string) (*reached, error) {
	r := &reached{deferred: map[string]bool{}}
	started := false
	_, err := a.traces.Each(ctx, run, func(rec *protocol.Record) error {
		switch rec.Kind {
		case protocol.RecordStarted:
			started = true
		case protocol.RecordPaused:
			r.paused = true
		case protocol.RecordDecision:
			r.paused = false
		case protocol.RecordStep:
			r.last = max(r.last, rec.Step)
			for _, o := range rec.Observations {
				if o.Approval != "" {
					r.deferred[o.Approval] = true
				}
			}
		case protocol.RecordFinished:
			r.finished = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !started {
		return nil, protocol.FieldError(protocol.CodeUnknownRun, "id", "use the id a paused run printed, such as RUN.3.0",
			"no run %s, so no approval of it to decide", run)
	}
	return r, nil
}

// early says why a decision made before its action is pending is refused,
// or nil when the run has reached it.
func (r *reached) early(id string, step int) error {
	const hint = "decide an action the run waits for (harness status shows it), or one of the step it is taking"
	at := fmt.Sprintf("it has committed %d", r.last)
	if r.paused {
		at += " and waits for a person"
	}
	switch {
	case step == 0:
		return protocol.FieldError(protocol.CodeUnknownRun, "id", "decide it once the run asks, when its endpoint is known",
			"no provider endpoint waits for approval %s", id)
	case step == r.last+1 && !r.paused:
		return nil // the step in hand: decided before its pause is seen
	case step > r.last:
		return protocol.FieldError(protocol.CodeUnknownRun, "id", hint,
			"no approval %s: the run has not reached step %d (%s)", id, step, at)
	case !r.deferred[id]:
		return protocol.FieldError(protocol.CodeUnknownRun, "id", hint,
			"no approval %s: step %d of the run asked nobody about that call", id, step)
	}
	return nil
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
