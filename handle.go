package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// RunHandle is one run of a cluster, by id: what Client.Submit returns and
// Client.Run looks up. Its methods ask the cluster each time; a handle
// holds no state of the run's own, so any number of handles on one run,
// in any processes, agree. It is safe for concurrent use.
type RunHandle struct {
	c   *Client
	id  string
	obs *pump // WithObserver's, until Wait returns
}

// Run returns a handle on the run with this id. Nothing is asked of the
// cluster: a run that does not exist is reported by the handle's calls,
// as protocol.ErrUnknownRun.
func (c *Client) Run(id string) *RunHandle { return &RunHandle{c: c, id: id} }

// ID is the run's id.
func (h *RunHandle) ID() string { return h.id }

// Status returns where the run stands. Errors: protocol.ErrUnknownRun.
func (h *RunHandle) Status(ctx context.Context) (*protocol.RunState, error) {
	if !protocol.ValidToken(h.id) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", h.id)
	}
	return h.c.index.Get(ctx, h.id)
}

// Wait blocks until the run is no longer running (finished, or paused
// awaiting approval) and returns its result, with the patch of a snapshot
// workspace once the run finished (Patch fetches the diff). It ends the
// observation WithObserver began, once every event it heard is delivered.
// Errors: the context's.
func (h *RunHandle) Wait(ctx context.Context) (*protocol.Result, error) {
	defer h.stopObserving()
	st, err := h.c.index.Wait(ctx, h.id, func(st *protocol.RunState) bool { return st.Status != protocol.StatusRunning })
	if err != nil {
		return nil, err
	}
	return h.c.withPatch(ctx, resultOf(st)), nil
}

// waitSince is Wait for a state written at or after since, by the driver
// a resume started rather than the one before it.
func (h *RunHandle) waitSince(ctx context.Context, since time.Time) (*protocol.Result, error) {
	defer h.stopObserving()
	st, err := h.c.index.Wait(ctx, h.id, func(st *protocol.RunState) bool {
		return st.Status != protocol.StatusRunning && !st.Updated.Before(since)
	})
	if err != nil {
		return nil, err
	}
	return h.c.withPatch(ctx, resultOf(st)), nil
}

func resultOf(st *protocol.RunState) *protocol.Result {
	return &protocol.Result{Run: st.Run, Outcome: st.Outcome, Success: st.Outcome == protocol.OutcomeSuccess, Steps: st.Step,
		Tokens: st.Tokens, Reason: st.Reason, Started: st.Started, Finished: st.Updated}
}

func finished(st *protocol.RunState) bool {
	return st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed
}

// Trace returns the run's trace, every record in order, with content held
// by reference filled in. Errors: protocol.ErrUnknownRun when the run has
// no trace; a damaged or too-new trace as a *protocol.Error.
func (h *RunHandle) Trace(ctx context.Context) ([]protocol.Record, error) {
	if !protocol.ValidToken(h.id) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", h.id)
	}
	recs, _, err := h.c.trace.Read(ctx, h.id)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "no run %s", h.id)
	}
	if err := coordinator.Resolve(ctx, h.c.blobs, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// Request is exactly what the run's model was sent at step: the request
// rebuilt from the trace by the same context assembly the coordinator ran
// (the same records give the same request), with how it was assembled and
// what the provider counted it at. Errors: protocol.ErrUnknownRun;
// protocol.ErrNotFound for a step the run has not committed.
func (h *RunHandle) Request(ctx context.Context, step int) (*protocol.CompletionRequest, *protocol.Assembly, error) {
	recs, err := h.Trace(ctx)
	if err != nil {
		return nil, nil, err
	}
	return coordinator.Request(h.id, recs, step)
}

// Follow calls fn with every record of the run's trace in order (content
// held by reference filled in): those written so far, then each as it is
// committed, until the run's finished record (Follow then returns nil) or
// ctx ends (its error). A paused run is followed through its pause.
// Errors: protocol.ErrUnknownRun for a run with no trace.
func (h *RunHandle) Follow(ctx context.Context, fn func(*protocol.Record)) error {
	if _, err := h.c.lastRecord(ctx, h.id); err != nil {
		return err
	}
	return h.c.trace.Follow(ctx, h.id, func(rec *protocol.Record) error {
		one := []protocol.Record{*rec}
		if err := coordinator.Resolve(ctx, h.c.blobs, one); err != nil {
			return err
		}
		fn(&one[0])
		if rec.Kind == protocol.RecordFinished {
			return trace.ErrStop
		}
		return nil
	})
}

// Contract returns the contract the run was started with, from its trace.
// Errors: as Trace.
func (h *RunHandle) Contract(ctx context.Context) (*protocol.Contract, error) {
	recs, err := h.Trace(ctx)
	if err != nil {
		return nil, err
	}
	if recs[0].Contract == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "the trace of %s does not begin with its contract", h.id)
	}
	return recs[0].Contract, nil
}

// Watch calls fn for every live event of the run until the returned stop
// is called. Events are notifications: one published before Watch began
// is not seen; the trace has everything.
func (h *RunHandle) Watch(fn func(*protocol.Event)) (stop func(), err error) {
	if !protocol.ValidToken(h.id) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", h.id)
	}
	sub, err := h.c.nc.Subscribe(wire.EventsPrefix+h.id+".>", func(m *nats.Msg) {
		var ev protocol.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			fn(&ev)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watch run %s: %w", h.id, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Patch returns what the finished run changed in its snapshot workspace:
// the patch as recorded with the outcome, and the unified diff itself
// (empty when nothing changed). snapshot.Apply applies it to a directory.
//
// Errors: protocol.ErrUnknownRun when the run has no trace;
// protocol.ErrNotFound while the run has not finished, or when its
// workspace was not a snapshot; a *protocol.Error carrying the patch's
// own error when the changes could not be collected (the patch is
// returned with it); the object store's, wrapped.
func (h *RunHandle) Patch(ctx context.Context) (*protocol.Patch, []byte, error) {
	return h.c.patch(ctx, h.id)
}

// Series returns the commits the finished run made in its snapshot
// workspace (the agent's git_commit calls and the commit
// workspace.commit asks for), oldest first, and them as a patch series:
// git format-patch's mails in one mbox, which git am applies to the
// directory the snapshot was made of. No commits is nil, nil.
//
// Errors: those of Patch, and a *protocol.Error with
// CodeInvalidField when the stored series is not what its ref names.
func (h *RunHandle) Series(ctx context.Context) ([]protocol.CommitInfo, []byte, error) {
	return h.c.series(ctx, h.id)
}

// Decide records a person's decision on an action of this run (approval
// is the id the paused run printed, RUN.STEP.CALL); see Client.Decide.
// The cluster's coordinators carry the run on from there. Errors: as
// Client.Decide, and protocol.ErrInvalidField for an approval of another
// run.
func (h *RunHandle) Decide(ctx context.Context, approval string, d *protocol.Decision) (*protocol.Approval, error) {
	if err := approvalOf(h.id, approval); err != nil {
		return nil, err
	}
	return h.c.Decide(ctx, approval, d)
}

// Resume carries the run on from the step after its last committed one,
// on whichever coordinator of the cluster takes it (a run whose process
// was killed, or one paused for approval), and waits for its outcome. A
// finished run reports its outcome and records nothing. WithDecision
// records a decision first; WithPolicy changes the policy.
//
// Errors: protocol.ErrUnknownRun; protocol.ErrFenced while another live
// coordinator drives the run (after waiting out a lease that may belong to
// a process just killed); protocol.ErrUnavailable when no coordinator had
// room; a policy that does not validate; with WithDecision, as Decide, and
// protocol.ErrRunFinished when the approval was decided otherwise.
func (h *RunHandle) Resume(ctx context.Context, opts ...CarryOption) (*protocol.Result, error) {
	var co callOptions
	for _, o := range opts {
		o.applyCarry(&co)
	}
	return h.resume(ctx, &co)
}

func (h *RunHandle) resume(ctx context.Context, co *callOptions) (*protocol.Result, error) {
	defer h.stopObserving()
	if co.decided {
		if err := approvalOf(h.id, co.approval); err != nil {
			return nil, err
		}
	}
	st, err := h.Status(ctx)
	switch {
	case err == nil && finished(st):
		return h.c.withPatch(ctx, resultOf(st)), nil
	case co.decided && err != nil:
		return nil, err
	case co.decided && co.decision == nil:
		return resultOf(st), nil // deferred again: nothing is written
	case co.decided:
		if _, err := h.c.Decide(ctx, co.approval, co.decision); err != nil {
			if !errors.Is(err, protocol.ErrRunFinished) {
				return nil, err
			}
			// Decided before: by this same decision, the resume of a
			// crashed caller carries on; by another, it is refused.
			ap, gerr := h.c.approvals.Get(ctx, co.approval)
			if gerr != nil || ap.Decision == nil || !sameDecision(ap.Decision, co.decision) {
				return nil, err
			}
		}
	}
	since, err := h.c.requestResume(ctx, h.id, co.policy)
	if err != nil {
		return nil, err
	}
	return h.waitSince(ctx, since)
}

// Cancel stops the run, wherever it is driven, and ends it cancelled with
// who asked (by, "" for "client") and why in its trace: the provider call
// it waits for is abandoned (charged at its estimate: a worker may be
// making it), the command it runs is killed, a paused run ends too, and
// its unfinished sub-agents are cancelled with it. It returns once the
// cancel is recorded; Wait returns the cancelled outcome. Cancelling a
// cancelled run again returns the first cancel. Errors:
// protocol.ErrUnknownRun; protocol.ErrRunFinished for a run that ended
// otherwise; protocol.ErrUnavailable when no coordinator answers.
func (h *RunHandle) Cancel(ctx context.Context, by, reason string) (*protocol.Cancel, error) {
	if !protocol.ValidToken(h.id) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", h.id)
	}
	body, err := json.Marshal(protocol.CancelRequest{By: cmp.Or(by, "client"), Reason: reason})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * coordinator.DefaultLeaseTTL)
	for {
		m, err := h.c.nc.RequestWithContext(ctx, wire.Cancel(h.id), body)
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline) {
			select { // a coordinator may be starting
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(resumeRetry):
				continue
			}
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "no coordinator is running to cancel run %s: start one (harness up, or a coordinator process)", h.id)
		}
		if err != nil {
			return nil, fmt.Errorf("cancel run %s: %w", h.id, err)
		}
		var reply protocol.CancelReply
		if err := json.Unmarshal(m.Data, &reply); err != nil {
			return nil, fmt.Errorf("undecodable answer from the coordinator: %w", err)
		}
		if reply.Error != nil {
			return nil, reply.Error
		}
		return reply.Cancel, nil
	}
}

// requestResume asks the cluster's coordinators to carry run on, and
// returns the clock of the one that took it. A run whose process died a
// moment ago is fenced until its lease runs out, and a coordinator may
// have no room: both are asked again, for up to two lease lifetimes.
func (c *Client) requestResume(ctx context.Context, run string, pol *protocol.Policy) (time.Time, error) {
	body, err := json.Marshal(protocol.ResumeRequest{Policy: pol})
	if err != nil {
		return time.Time{}, fmt.Errorf("encode the resume request: %w", err)
	}
	deadline := time.Now().Add(2 * coordinator.DefaultLeaseTTL)
	for {
		var reply protocol.ResumeReply
		m, err := c.nc.RequestWithContext(ctx, wire.Resume(run), body)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			// None yet: one may be starting (in this process, or
			// restarting).
			reply.Error = protocol.Errorf(protocol.CodeUnavailable, "no coordinator is running to resume run %s: start one (harness up, or a coordinator process)", run)
		case err != nil:
			return time.Time{}, fmt.Errorf("resume run %s: %w", run, err)
		default:
			if err := json.Unmarshal(m.Data, &reply); err != nil {
				return time.Time{}, fmt.Errorf("undecodable answer from the coordinator: %w", err)
			}
			if reply.Error == nil {
				return reply.Since, nil
			}
		}
		again := errors.Is(reply.Error, protocol.ErrFenced) || errors.Is(reply.Error, protocol.ErrUnavailable)
		if !again || time.Now().After(deadline) {
			return time.Time{}, reply.Error
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(resumeRetry):
		}
	}
}

// resumeRetry is how long requestResume waits before asking again.
const resumeRetry = 100 * time.Millisecond

// pump delivers a run's events to an observer on one goroutine, in order;
// a stalled observer loses events, never the run.
type pump struct {
	events chan *protocol.Event
	quit   chan struct{}
	done   chan struct{}
	stop   func()
	nc     *nats.Conn
	once   sync.Once
}

// observeWith starts what the call's options observe, WithObserver and
// WithFlow, if either: the first time the flow returns FlowCancel, the run
// is cancelled by "observer".
func (h *RunHandle) observeWith(co *callOptions) error {
	if co.observer == nil && co.flow == nil {
		return nil
	}
	var once sync.Once
	return h.observe(func(ev *protocol.Event) {
		if co.observer != nil {
			co.observer(ev)
		}
		if co.flow != nil && co.flow(ev) == FlowCancel {
			once.Do(func() {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*coordinator.DefaultLeaseTTL)
					defer cancel()
					_, _ = h.Cancel(ctx, "observer", "the observer asked to cancel")
				}()
			})
		}
	})
}

// observe starts delivering the run's events to fn until Wait returns.
func (h *RunHandle) observe(fn func(*protocol.Event)) error {
	p := &pump{events: make(chan *protocol.Event, 1024), quit: make(chan struct{}), done: make(chan struct{}), nc: h.c.nc}
	stop, err := h.Watch(func(ev *protocol.Event) {
		select {
		case p.events <- ev:
		case <-p.quit:
		default: // a stalled observer loses events, never the run
		}
	})
	if err != nil {
		return err
	}
	p.stop = stop
	go func() {
		defer close(p.done)
		for {
			select {
			case ev := <-p.events:
				fn(ev)
			case <-p.quit:
				for {
					select {
					case ev := <-p.events:
						fn(ev)
					default:
						return
					}
				}
			}
		}
	}()
	h.obs = p
	return nil
}

// stopObserving ends an observation once the events the server has sent
// are delivered.
func (h *RunHandle) stopObserving() {
	p := h.obs
	if p == nil {
		return
	}
	p.once.Do(func() {
		_ = p.nc.Flush()
		p.stop()
		close(p.quit)
		<-p.done
	})
}
