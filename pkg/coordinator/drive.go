package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// driver carries one run through its steps. It is used by one goroutine.
type driver struct {
	c     *Coordinator
	s     *runState
	w     *trace.Writer
	log   *slog.Logger
	turns chan *nats.Msg
	node  string
	tools []protocol.ToolSpec
	pol   *policy.Policy // the run's policy with remembered rules on top
	base  *policy.Policy // the run's policy alone, which sub-agents are contained in
	// draws are the settled charges of the step in hand, not yet
	// committed; unsettled maps the attempts of that step whose
	// reservations are held without an answer yet to their keys.
	draws     []protocol.Draw
	unsettled map[int]string
	// spawning is set when the run was offered spawn_agent.
	spawning bool
	// hostRemember holds the provider endpoints an approver allowed during
	// the step in hand, for its record; hostAsked those asked about since
	// this driver began, so an endpoint that asks again after its approval
	// fails the run instead of asking for ever.
	hostRemember []protocol.Rule
	hostDecided  []protocol.Decided
	hostAsked    map[string]bool
	// recovering is set until the driver's first step: a previous driver
	// may have left turns of it.
	recovering bool
}

// drive carries a run from the state its trace records to its outcome.
func (c *Coordinator) drive(ctx context.Context, run string, recs []protocol.Record, last uint64) {
	log := c.log.With("run", run)
	if err := c.resolve(ctx, recs); err != nil {
		log.Error("read trace content", "err", err)
		return
	}
	s, err := newRunState(run, recs)
	if err != nil {
		log.Error("rebuild run", "err", err)
		c.putState(ctx, &protocol.RunState{Run: run, Status: protocol.StatusFailed, Outcome: protocol.OutcomeFailed,
			Reason: err.Error(), Coordinator: c.cfg.ID})
		return
	}
	if s.finished != nil {
		c.indexFinished(ctx, s)
		return
	}
	d := &driver{c: c, s: s, w: c.trace.Writer(run, last), log: log, turns: make(chan *nats.Msg, 16), recovering: true}
	if err := d.compilePolicy(); err != nil {
		log.Error("compile the run's policy", "err", err)
		return
	}
	sub, err := c.nc.ChanSubscribe(streams.Turns(run), d.turns)
	if err != nil {
		log.Error("subscribe to turns", "err", err)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	d.loop(ctx)
}

func (d *driver) loop(ctx context.Context) {
	s := d.s
	if ok, why := gate.Allowed(d.pol, s.contract.Verification); !ok {
		d.finish(ctx, protocol.OutcomeRefused, why)
		return
	}
	if o, why := s.beforeStep(time.Now()); o != "" {
		d.finish(ctx, o, why)
		return
	}
	if o, why, err := d.admit(ctx); err != nil {
		return // shutting down
	} else if o != "" {
		d.finish(ctx, o, why)
		return
	}
	if err := d.open(ctx); err != nil {
		d.finish(ctx, protocol.OutcomeFailed, err.Error())
		return
	}
	d.offerSpawn(ctx)
	defer d.close()
	stepCtx := ctx
	if dl := s.deadline(); !dl.IsZero() {
		var cancel context.CancelFunc
		stepCtx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	for {
		if ctx.Err() != nil {
			return // shutting down: the run stays running, to be picked up again
		}
		if o, why := s.beforeStep(time.Now()); o != "" {
			d.finish(ctx, o, why)
			return
		}
		if s.unpaused != "" {
			// The step that deferred a call was committed but its pause was
			// not recorded: record it now, from the step itself.
			p, err := d.pendingOf(s.unpaused)
			if err != nil {
				d.finish(ctx, protocol.OutcomeFailed, err.Error())
				return
			}
			if !d.pause(ctx, p) {
				return
			}
			continue
		}
		if s.paused != nil {
			// A read that fails while NATS recovers is tried again: taken
			// for "not decided yet", it would leave a run whose decision
			// is already in (the one that woke it) paused for good.
			var ap *protocol.Approval
			err := d.persist(ctx, "read the approval", func() (err error) {
				ctx, cancel := jsCall(ctx)
				defer cancel()
				ap, err = d.c.approvals.Get(ctx, s.paused.Approval)
				if errors.Is(err, protocol.ErrUnknownRun) {
					return nil // no such approval: nothing to retry
				}
				return err
			}, "approval", s.paused.Approval)
			if err != nil || ap == nil || ap.Decision == nil || ap.Pending == nil {
				// Still waiting for a person; the run holds nothing meanwhile.
				d.c.putState(ctx, d.pausedState(s.paused.Reason))
				return
			}
			d.c.putState(ctx, d.runningState())
			if !d.decide(stepCtx, ap) {
				return
			}
			continue
		}
		step := s.step + 1
		began := time.Now()
		rec, pending, outcome, why := d.step(stepCtx, step)
		if ctx.Err() != nil {
			return
		}
		if outcome != "" {
			d.finish(ctx, outcome, why)
			return
		}
		if rec == nil {
			// The provider's endpoint waits for a person: the run pauses
			// before the step, which has nothing to commit yet.
			if !d.pause(ctx, pending) {
				return
			}
			continue
		}
		stalled, stallWhy := s.stalled(rec)
		fault.Hit(fault.BeforeCommit)
		if err := d.append(ctx, d.c.slim(ctx, rec)); err != nil {
			if errors.Is(err, protocol.ErrFenced) {
				d.log.Warn("run taken over; stopping", "step", step)
				return
			}
			if ctx.Err() != nil {
				// The lease was lost or the coordinator is stopping: the
				// step stays uncommitted, for whoever takes the run next.
				d.log.Warn("stopped before the step was committed", "step", step, "err", err)
				return
			}
			d.log.Error("commit step", "step", step, "err", err)
			d.finish(ctx, protocol.OutcomeFailed, "the trace could not be written: "+err.Error())
			return
		}
		fault.Hit(fault.AfterCommit)
		d.c.metrics.Step(time.Since(began))
		_ = s.apply(rec)
		d.draws = nil
		if len(rec.Remember) > 0 {
			if err := d.compilePolicy(); err != nil {
				d.finish(ctx, protocol.OutcomeFailed, err.Error())
				return
			}
		}
		if pending != nil {
			d.c.emit(s.run, step, protocol.EventStep, &protocol.Event{Tokens: rec.Tokens, Text: stepSummary(rec)})
			if !d.pause(ctx, pending) {
				return
			}
			continue
		}
		st := s.status(protocol.StatusRunning, d.c.cfg.ID)
		st.Updated = time.Now().UTC()
		if err := d.c.index.Progress(ctx, st); err != nil {
			d.log.Warn("update run index", "err", err)
		}
		d.c.emit(s.run, step, protocol.EventStep, &protocol.Event{Tokens: rec.Tokens, Text: stepSummary(rec)})
		if stalled {
			d.finish(ctx, protocol.OutcomeStalled, stallWhy)
			return
		}
		if o, why := s.afterStep(rec); o != "" {
			d.finish(ctx, o, why)
			return
		}
	}
}

// step runs one step up to its commit. It returns the record to commit, or
// an outcome that ends the run before anything is committed.
func (d *driver) step(ctx context.Context, step int) (rec *protocol.Record, pending *protocol.Pending, outcome protocol.Outcome, why string) {
	s := d.s
	turn, err := d.turn(ctx, step)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, nil, protocol.OutcomeTimeBudgetExceeded, "the wall-clock budget ran out during a provider call"
		}
		var wait *hostPending
		if errors.As(err, &wait) {
			// The provider's endpoint waits for a person: no step to commit,
			// the run pauses before it. Its next driver looks for the turns
			// of this step's attempts so far, so none is asked for twice.
			d.recovering = true
			return nil, wait.p, "", ""
		}
		var denied *hostDenied
		if errors.As(err, &denied) {
			return nil, nil, protocol.OutcomeDenied, denied.why
		}
		var refusal *ledger.Refusal
		if errors.As(err, &refusal) {
			o, why, _ := d.refusedBy(err)
			return nil, nil, o, why
		}
		pe := protocol.AsError(err)
		if pe.Code == protocol.CodeRefused {
			return nil, nil, protocol.OutcomeRefused, pe.Message
		}
		if pe.Retryable() {
			return nil, nil, protocol.OutcomeEscalatedRetryable, "provider failed: " + pe.Error()
		}
		return nil, nil, protocol.OutcomeEscalatedTerminal, "provider failed: " + pe.Error()
	}
	d.c.emit(s.run, step, protocol.EventTurn, &protocol.Event{Text: clip(turn.Text, 2000), Tokens: turn.Usage.Total()})
	rec = &protocol.Record{Kind: protocol.RecordStep, Step: step, Turn: turn, Tokens: s.tokens + turn.Usage.Total(), Cost: d.cost(turn),
		Draws: d.draws, Remember: d.hostRemember, Decided: d.hostDecided}
	d.hostRemember, d.hostDecided = nil, nil
	for i := range turn.ToolCalls {
		call := &turn.ToolCalls[i]
		if call.ID == "" {
			call.ID = fmt.Sprintf("call_%d_%d", step, i)
		}
		if pending != nil {
			// A call earlier in this step waits for a person; the rest wait
			// with it, unrun, and the model hears why.
			rec.Observations = append(rec.Observations, protocol.Observation{CallID: call.ID, Tool: call.Name,
				Content: "[not run] an earlier call of this step is waiting for a person's approval; ask again if it is still needed."})
			continue
		}
		d.c.emit(s.run, step, protocol.EventToolCall, &protocol.Event{Tool: call.Name, Target: target(call)})
		var obs *protocol.Observation
		obs, pending = d.act(ctx, step, i, call, rec)
		if obs.Changed {
			rec.Changed = true
		}
		d.c.emit(s.run, step, protocol.EventObserved, &protocol.Event{Tool: call.Name, Text: clip(obs.Content, 2000), IsError: obs.IsError})
		rec.Observations = append(rec.Observations, *obs)
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, nil, protocol.OutcomeTimeBudgetExceeded, "the wall-clock budget ran out during a tool call"
		}
		return nil, nil, "", ""
	}
	if pending != nil {
		return rec, pending, "", "" // no verification while a call waits
	}
	if s.needsCheck(turn, rec.Tokens) {
		rec.Check = d.check(ctx, step)
		passed := rec.Check.Passed
		d.c.emit(s.run, step, protocol.EventCheck, &protocol.Event{Passed: &passed, Text: rec.Check.Detail})
	}
	rec.Note = s.note(rec)
	return rec, nil, "", ""
}

// turn gets the provider's answer for a step: the one already durable in
// the turns stream if a previous driver of this run got that far, or a new
// one from a worker. Retryable failures are tried again with back-off, up to
// MaxRetries, unless the wait would outlast the run's deadline.
func (d *driver) turn(ctx context.Context, step int) (*protocol.Turn, error) {
	s := d.s
	d.draws, d.unsettled = nil, map[int]string{}
	defer func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The run's time is up, and no worker starts a call past it.
			for _, key := range d.unsettled {
				d.release(ctx, key)
			}
		}
		// Otherwise an attempt that got no answer stays reserved: its task
		// may still be in a worker's hands. Its answer is charged if it
		// comes while the run goes on; if not, the reservation ages out.
	}()
	attempt := 1
	if d.recovering {
		d.recovering = false
		tr, next := d.recover(ctx, step)
		if tr != nil {
			return tr.Turn, nil
		}
		attempt = next
	}
	retries := 0
	for {
		task := &protocol.StepTask{Run: s.run, Step: step, Attempt: attempt, Request: *s.request(d.tools), Deadline: s.deadline(),
			Policy: d.pol.Protocol(), Expires: time.Now().Add(d.c.cfg.TurnTimeout)}
		data, err := json.Marshal(task)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "encode step task: %s", err.Error())
		}
		// No provider call without a reservation that fits every ceiling.
		key := protocol.StepKey(s.run, step, attempt)
		estimate := d.estimate(len(data))
		if err := d.reserve(ctx, key, estimate); err != nil {
			if errors.Is(err, errStaleKey) {
				// An earlier driver settled this attempt and died before
				// its step was committed: what it charged goes into this
				// step's record, so the trace keeps what the ledger holds.
				d.keepSettled(ctx, key)
				attempt++
				continue
			}
			return nil, err
		}
		d.unsettled[attempt] = key
		if limit := d.c.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit-taskHeadroom {
			err = nats.ErrMaxPayload // known before it is sent
		} else {
			pctx, cancel := jsCall(ctx)
			_, err = d.c.js.PublishMsg(pctx, &nats.Msg{Subject: streams.Steps(s.contract.Provider.Pool), Data: data},
				jetstream.WithMsgID(task.Key()))
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if isTooLarge(err) {
				// It would not fit the next time either: no worker can be
				// asked for this step.
				delete(d.unsettled, attempt)
				d.release(ctx, key)
				return nil, protocol.FieldError(protocol.CodeTooLarge, "request", "keep tool output and files the model reads smaller, or raise the NATS server's max_payload",
					"the conversation is %d bytes as a step task, over the %d-byte message limit of the bus", len(data), d.c.nc.MaxPayload())
			}
			d.log.Warn("publish step task", "step", step, "err", err)
			if err := sleep(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		}
		tr, err := d.await(ctx, step, attempt, &nats.Msg{Subject: streams.Steps(s.contract.Provider.Pool), Data: data}, task.Key())
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d.log.Warn("no turn in time; publishing again", "step", step, "attempt", attempt)
			attempt++
			continue
		}
		delete(d.unsettled, attempt)
		d.chargeLost(ctx, step, key, tr.Deliveries, estimate)
		if tr.Error == nil && tr.Turn != nil {
			draw, _ := d.settle(ctx, step, key, tr.Turn, d.cost(tr.Turn))
			d.draws = append(d.draws, draw)
			return tr.Turn, nil
		}
		if paid := spentOf(tr); paid != nil {
			// A call made and paid for whose answer could not come back
			// (too_large): charged as it was, though there is no turn.
			draw, _ := d.settle(ctx, step, key, paid, d.cost(paid))
			d.draws = append(d.draws, draw)
		} else {
			d.release(ctx, key)
		}
		if tr.Refused != nil && tr.Refused.Effect == policy.Ask.String() {
			if err := d.askHost(ctx, step, tr.Refused); err != nil {
				return nil, err
			}
			attempt++ // approved now: asked again, with the endpoint remembered
			continue
		}
		perr := tr.Error
		if perr == nil {
			perr = protocol.Errorf(protocol.CodeProviderMalformed, "the worker returned neither a turn nor an error")
		}
		retries++
		wait, retry := d.c.cfg.Retry.Next(retries, perr, time.Now(), s.deadline())
		if !retry {
			return nil, perr // not retryable, retries spent, or a wait that would outlast the time budget
		}
		d.log.Info("retrying provider call", "step", step, "attempt", attempt, "wait", wait, "err", perr)
		d.c.emit(s.run, step, protocol.EventRetry, &protocol.Event{Text: fmt.Sprintf("%s; retry %d in %s", perr.Name, retries, wait)})
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		attempt++
	}
}

// await waits for the turn of one attempt on the run's turns subject.
// Every RepublishInterval it looks for the turn in the turns stream (it
// may have been published while this coordinator was cut off from NATS)
// and publishes the task again under the same message id: a no-op while
// the task is still queued, and its recovery when a NATS restart lost it
// (step tasks are kept in memory).
func (d *driver) await(ctx context.Context, step, attempt int, task *nats.Msg, key string) (*protocol.TurnResult, error) {
	timer := time.NewTimer(d.c.cfg.TurnTimeout)
	defer timer.Stop()
	tick := time.NewTicker(d.c.cfg.RepublishInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, errors.New("turn timeout")
		case <-tick.C:
			if tr := d.turnOf(ctx, step, attempt); tr != nil {
				return tr, nil
			}
			pctx, cancel := jsCall(ctx)
			if _, err := d.c.js.PublishMsg(pctx, task, jetstream.WithMsgID(key)); err != nil {
				d.log.Debug("publish the step task again", "step", step, "err", err)
			}
			cancel()
		case m := <-d.turns:
			var tr protocol.TurnResult
			if err := json.Unmarshal(m.Data, &tr); err != nil {
				d.log.Warn("undecodable turn", "err", err)
				continue
			}
			if tr.Step == step && tr.Attempt == attempt {
				return &tr, nil
			}
			if tr.Step > step || (tr.Step == step && tr.Attempt >= attempt) {
				continue
			}
			if tr.Step == step {
				delete(d.unsettled, tr.Attempt)
			}
			// An earlier attempt's answer, late: the provider was paid for
			// it, so it is charged under its own key, once (a turn heard
			// twice, or charged by an earlier driver, is a replay).
			key := protocol.StepKey(d.s.run, tr.Step, tr.Attempt)
			if paid := spentOf(&tr); paid == nil {
				d.release(ctx, key)
			} else if draw, replayed := d.settle(ctx, step, key, paid, d.cost(paid)); !replayed {
				d.draws = append(d.draws, draw)
			}
		}
	}
}

// taskHeadroom is what a step task's publish needs beyond its JSON: the
// subject, the message id and the other headers.
const taskHeadroom = 4 << 10

// isTooLarge reports whether a publish failed for the message's size: the
// client's check of the server's limit, or a stream's own.
func isTooLarge(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}

// spentOf is what a turn result says the provider was paid for: its turn,
// or for a call whose answer could not be delivered (too_large) a turn
// holding only its usage; nil when no call was made.
func spentOf(tr *protocol.TurnResult) *protocol.Turn {
	switch {
	case tr.Turn != nil:
		return tr.Turn
	case tr.Usage != nil:
		return &protocol.Turn{Usage: *tr.Usage, Model: tr.Model}
	}
	return nil
}

// appendWindow bounds how long a record's append is retried while the
// trace does not answer: a stream electing a new leader after a node died,
// or a server restarting.
const appendWindow = 2 * time.Minute

// append commits a record to the run's trace, trying again while the trace
// stream does not answer, within appendWindow and ctx. A retry cannot write
// twice (the writer's message id) nor past another writer (fencing), so
// only protocol.ErrFenced, the end of ctx, or a stream that stays silent
// ends it.
func (d *driver) append(ctx context.Context, rec *protocol.Record) error {
	return d.persist(ctx, "append to the trace", func() error {
		ctx, cancel := jsCall(ctx)
		defer cancel()
		return d.w.Append(ctx, rec)
	}, "kind", rec.Kind, "step", rec.Step)
}

// persist runs write, an idempotent write to JetStream, until it succeeds,
// trying again while JetStream does not answer (a stream electing a new
// leader after a node died, or a server restarting) within appendWindow
// and ctx. protocol.ErrFenced ends it at once: it will not change.
func (d *driver) persist(ctx context.Context, what string, write func() error, attrs ...any) error {
	deadline := time.Now().Add(appendWindow)
	wait := 100 * time.Millisecond
	for {
		err := write()
		if err == nil || errors.Is(err, protocol.ErrFenced) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		d.log.Warn(what+"; trying again", append(attrs, "err", err)...)
		if serr := sleep(ctx, wait); serr != nil {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// turnOf returns the durable turn of one attempt of a step, or nil.
func (d *driver) turnOf(ctx context.Context, step, attempt int) *protocol.TurnResult {
	m, err := d.lastTurn(ctx, step, attempt)
	if err != nil {
		return nil
	}
	var tr protocol.TurnResult
	if err := json.Unmarshal(m.Data, &tr); err != nil {
		return nil
	}
	return &tr
}

// lastTurn reads one attempt's turn from the turns stream, bounded by
// jsTimeout.
func (d *driver) lastTurn(ctx context.Context, step, attempt int) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := jsCall(ctx)
	defer cancel()
	return d.c.assets.Turns.GetLastMsgForSubject(ctx, streams.Turn(d.s.run, step, attempt))
}

// jsTimeout bounds one JetStream call made under a run's context. That
// context's deadline is the run's own, often hours away, and the client
// then applies no timeout of its own: a request or an answer lost while a
// restarted cluster elects its leaders was waited for until then (seen in
// the e2e suite, every resumed run stuck in its first turn lookup).
var jsTimeout = 10 * time.Second

// jsCall returns ctx bounded by jsTimeout.
func jsCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, jsTimeout)
}

// lookupTurn is turnOf for recover: a lookup that failed for another
// reason than a missing turn (the stream electing a leader after a
// restart) is tried again for a while, since taking a missing answer for
// none would make the call again.
func (d *driver) lookupTurn(ctx context.Context, step, attempt int) *protocol.TurnResult {
	wait := 250 * time.Millisecond
	for range 6 {
		m, err := d.lastTurn(ctx, step, attempt)
		if err == nil {
			var tr protocol.TurnResult
			if json.Unmarshal(m.Data, &tr) != nil {
				return nil
			}
			return &tr
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
			return nil
		}
		d.log.Warn("look up a turn; trying again", "step", step, "attempt", attempt, "err", err)
		if sleep(ctx, wait) != nil {
			return nil
		}
		wait *= 2
	}
	return nil
}

// recover finds what a previous driver of the run left of the step it
// was in: the durable turns of its attempts. The step acts on the turn of
// the highest attempt that has one, as that driver did (it only ever
// waited for its latest attempt); every other answered attempt is charged,
// and every failed one released. It returns that turn, or nil and the
// attempt to make next.
func (d *driver) recover(ctx context.Context, step int) (*protocol.TurnResult, int) {
	s := d.s
	var found []*protocol.TurnResult
	for a, misses := 1, 0; misses < 2; a++ { // tolerate one attempt that never got an answer
		tr := d.lookupTurn(ctx, step, a)
		if tr == nil {
			misses++
			continue
		}
		misses = 0
		found = append(found, tr)
	}
	var use *protocol.TurnResult
	next := 1
	for _, tr := range found {
		if tr.Turn != nil {
			use = tr
		}
		next = tr.Attempt + 1
	}
	for _, tr := range found {
		key := protocol.StepKey(s.run, step, tr.Attempt)
		paid := spentOf(tr)
		if paid == nil {
			d.release(ctx, key)
			continue
		}
		// Settled already if the driver that got it lived that long: a
		// replay then charges nothing more, and the draw is recorded
		// with this step, which that driver never committed.
		draw, _ := d.settle(ctx, step, key, paid, d.cost(paid))
		d.draws = append(d.draws, draw)
		d.chargeLost(ctx, step, key, tr.Deliveries, usageOf(draw.Spend))
	}
	if use != nil {
		d.log.Info("reusing durable turn", "step", step, "attempt", use.Attempt)
	}
	return use, next
}

// open finds a sandboxer that serves the run's workspace, asking again
// until OpenTimeout passes, so a run submitted while the sandboxers are
// still coming up waits for them.
func (d *driver) open(ctx context.Context) error {
	op, subject := d.openOp()
	holder := ""
	deadline := time.Now().Add(d.c.cfg.OpenTimeout)
	for {
		wait := time.Until(deadline)
		if subject == streams.SandboxOpenSubject {
			// Opening a directory is quick: an answer lost to a NATS
			// restart is asked for again rather than waited for until the
			// deadline.
			wait = min(resendInterval, wait)
		}
		reply, err := d.c.request(ctx, subject, op, wait)
		switch {
		case err == nil && reply.Error == nil && reply.Holder != "" && holder == "" && protocol.ValidToken(reply.Holder):
			// Another sandboxer holds the run's snapshot workspace: ask it.
			holder, subject = reply.Holder, streams.SandboxOps(reply.Holder)
			continue
		case err == nil && reply.Error != nil && reply.Error.Retryable() && time.Now().Before(deadline):
			d.log.Info("the workspace cannot be opened yet; asking again", "err", reply.Error)
		case err == nil && reply.Error != nil:
			return reply.Error
		case err == nil:
			d.node, d.tools = reply.Node, reply.Tools
			d.log.Info("workspace opened", "sandboxer", d.node)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout):
			return fmt.Errorf("open workspace: %w", err)
		case !time.Now().Before(deadline):
			return errors.New(d.noSandboxer(holder))
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

func (d *driver) close() {
	op := &protocol.SandboxOp{OpID: d.s.run + ".close", Run: d.s.run, Kind: protocol.OpClose}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = d.c.request(ctx, streams.SandboxOps(d.node), op, 5*time.Second)
}

// act decides one tool call and, if allowed, has the sandboxer carry it
// out. It returns the observation, and the pending action when the policy
// asks a person and no approver answered at once: then nothing ran, and the
// step ends waiting. Nothing here fails the run: every failure is an
// observation the model can act on.
func (d *driver) act(ctx context.Context, step, i int, call *protocol.ToolCall, rec *protocol.Record) (*protocol.Observation, *protocol.Pending) {
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	if !d.offers(call.Name) {
		obs.IsError = true
		obs.Content = fmt.Sprintf("[unknown tool] %q is not a tool here; the tools are: %s", call.Name, d.toolNames())
		return obs, nil
	}
	if call.Name == SpawnTool && d.spawning {
		return d.spawn(ctx, step, i, call), nil // no act of the policy's: the sub-agent works under this run's policy
	}
	v, bad := gate.Verdict(d.pol, call)
	if bad != "" {
		obs.IsError, obs.Content = true, bad
		return obs, nil
	}
	d.c.emit(d.s.run, step, protocol.EventVerdict, &protocol.Event{Tool: call.Name, Target: v.Target, Effect: v.Effect.String(), Rule: v.Rule, Layer: v.Layer})
	if v.Effect == policy.Ask {
		p := d.pending(step, i, call, v)
		id := protocol.ApprovalID(d.s.run, step, i)
		d.c.emit(d.s.run, step, protocol.EventApproval, &protocol.Event{Tool: call.Name, Target: v.Target, Approval: id})
		dec, err := d.c.cfg.Approver.Decide(ctx, p)
		if err != nil {
			d.log.Warn("approver failed; deferring to a person", "approval", id, "err", err)
		}
		if dec == nil {
			obs.Approval = id
			// The id stays out of what the model reads: it names the run, and
			// a transcript must not depend on which run it is.
			obs.Content = fmt.Sprintf("[awaiting approval] %s %q needs a person's approval; the run pauses here until they decide.", v.Act, v.Target)
			return obs, p
		}
		d.c.emit(d.s.run, step, protocol.EventDecided, &protocol.Event{Tool: call.Name, Target: v.Target, Approval: id, Text: decisionWord(dec)})
		rec.Decided = append(rec.Decided, protocol.Decided{Approval: id, Decision: dec})
		if !dec.Approve {
			obs.IsError = true
			obs.Content = fmt.Sprintf("[%s denied] %q: %s", v.Act, v.Target, orWord(dec.Reason, "a person said no"))
			return obs, nil
		}
		if dec.Rewrite != nil {
			call = &protocol.ToolCall{ID: call.ID, Name: call.Name, Arguments: dec.Rewrite}
			if v, bad = gate.Verdict(d.pol, call); bad != "" {
				obs.IsError, obs.Content = true, bad
				return obs, nil
			}
		}
		if v.Effect == policy.Deny {
			return d.refuse(step, call, v, obs), nil
		}
		if dec.Remember {
			rec.Remember = append(rec.Remember, rememberRules(v, call)...)
		}
		return d.dispatch(ctx, fmt.Sprintf("%s.%d.%d.1", d.s.run, step, i), call, id), nil
	}
	if v.Effect != policy.Allow {
		return d.refuse(step, call, v, obs), nil
	}
	return d.dispatch(ctx, fmt.Sprintf("%s.%d.%d.1", d.s.run, step, i), call, ""), nil
}

// refuse renders a policy refusal as an observation, and publishes it.
func (d *driver) refuse(step int, call *protocol.ToolCall, v policy.Verdict, obs *protocol.Observation) *protocol.Observation {
	obs.IsError, obs.Content = true, v.Refusal()
	obs.Refused = &protocol.Refusal{Act: v.Act.String(), Target: v.Target, Effect: v.Effect.String(), Rule: v.Rule, Layer: v.Layer}
	d.c.emit(d.s.run, step, protocol.EventRefused, &protocol.Event{Tool: call.Name, Target: v.Target, Refused: obs.Refused})
	return obs
}

// dispatch sends an allowed call to the sandboxer under an op id and
// returns its observation.
func (d *driver) dispatch(ctx context.Context, opID string, call *protocol.ToolCall, approval string) *protocol.Observation {
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	op := &protocol.SandboxOp{OpID: opID, Run: d.s.run, Kind: protocol.OpTool,
		Workspace: d.s.contract.Workspace.Root, Call: call, Sandbox: &d.s.contract.Sandbox, Policy: d.pol.Protocol(), Approval: approval}
	reply, err := d.c.request(ctx, streams.SandboxOps(d.node), op, d.opTimeout())
	switch {
	case err != nil:
		obs.IsError = true
		obs.Content = "[tool failed] the sandboxer did not answer: " + err.Error() + ". The call may or may not have taken effect; look before you repeat it."
	case reply.Error != nil:
		obs.IsError = true
		obs.Content = "[tool failed] " + reply.Error.Message
	case reply.Observation != nil:
		*obs = *reply.Observation
		obs.CallID, obs.Tool = call.ID, call.Name
	}
	return obs
}

// pendingOf rebuilds the pending action of an approval id from the last
// committed step, whose turn holds the call.
func (d *driver) pendingOf(id string) (*protocol.Pending, error) {
	_, step, call, err := protocol.ParseApprovalID(id)
	if err != nil {
		return nil, err
	}
	msgs := d.s.messages
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == protocol.RoleAssistant {
			if call >= len(m.ToolCalls) {
				break
			}
			c := m.ToolCalls[call]
			v, _ := gate.Verdict(d.pol, &c)
			return d.pending(step, call, &c, v), nil
		}
	}
	return nil, protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: no call for approval %s", d.s.run, id)
}

// pending describes a call for the person who decides it: exactly what it
// would do.
func (d *driver) pending(step, i int, call *protocol.ToolCall, v policy.Verdict) *protocol.Pending {
	return &protocol.Pending{Run: d.s.run, Step: step, Call: i, Tool: call.Name, Arguments: call.Arguments,
		Act: v.Act.String(), Target: v.Target, Shown: shown(call), Rule: v.Rule, Layer: v.Layer, Time: time.Now().UTC()}
}

// shown is what a person deciding a call sees: the content a write would
// produce, the edit, the command.
func shown(call *protocol.ToolCall) string {
	var a struct {
		Path    string   `json:"path"`
		Content string   `json:"content"`
		Search  string   `json:"search"`
		Replace string   `json:"replace"`
		Argv    []string `json:"argv"`
	}
	_ = json.Unmarshal(call.Arguments, &a)
	switch call.Name {
	case "write_file":
		return fmt.Sprintf("write %s (%d bytes):\n%s", a.Path, len(a.Content), a.Content)
	case "edit_file":
		return fmt.Sprintf("edit %s, replacing:\n%s\nwith:\n%s", a.Path, a.Search, a.Replace)
	case "exec":
		return "run: " + strings.Join(a.Argv, " ")
	}
	return call.Name + " " + string(call.Arguments)
}

// rememberRules are the rules a person's "remember" adds for the rest of
// the run: an allow of exactly what was approved (for exec, the program and
// the command, since both are checked).
func rememberRules(v policy.Verdict, call *protocol.ToolCall) []protocol.Rule {
	rules := []protocol.Rule{{Act: v.Act.String(), Effect: "allow", Pattern: v.Target}}
	if v.Act == policy.Exec {
		var a struct {
			Argv []string `json:"argv"`
		}
		if json.Unmarshal(call.Arguments, &a) == nil && len(a.Argv) > 0 {
			rules = []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: a.Argv[0]},
				{Act: "exec", Effect: "allow", Pattern: strings.Join(a.Argv, " ")}}
		}
	}
	return rules
}

func decisionWord(d *protocol.Decision) string {
	if d.Approve {
		return "approve"
	}
	return "deny"
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// decide applies a person's decision to the paused call: it performs the
// approved action (rewritten, if the person rewrote it) after checking it
// against the policy again, or ends the run denied. It reports whether the
// run goes on.
func (d *driver) decide(ctx context.Context, ap *protocol.Approval) bool {
	s, p, dec := d.s, ap.Pending, ap.Decision
	rec := &protocol.Record{Kind: protocol.RecordDecision, Step: s.step, Approval: ap.ID, Decision: dec}
	d.c.emit(s.run, s.step, protocol.EventDecided, &protocol.Event{Tool: p.Tool, Target: p.Target, Approval: ap.ID, Text: decisionWord(dec)})
	var outcome protocol.Outcome
	var why string
	switch {
	case p.Tool == "" && !dec.Approve:
		outcome, why = protocol.OutcomeDenied, fmt.Sprintf("a person denied calling the model provider at %s: %s", p.Target, orWord(dec.Reason, "no reason given"))
	case p.Tool == "":
		// The provider's endpoint: nothing to perform, an allow to
		// remember, unless a deny rule covers it now (the net default does
		// not: a worker allows its own endpoints over it).
		if v := d.pol.Check(policy.Net, p.Target); v.Effect == policy.Deny && !v.ByDefault() {
			outcome, why = protocol.OutcomeDenied, fmt.Sprintf("the approved provider endpoint %s is denied by the policy (%s)", p.Target, v.DecidedBy())
		} else {
			rec.Remember = []protocol.Rule{hostRule(p.Target)}
		}
	case !dec.Approve:
		rec.Note = fmt.Sprintf("[%s denied by a person] %q: %s", p.Act, p.Target, orWord(dec.Reason, "no reason given"))
		outcome, why = protocol.OutcomeDenied, fmt.Sprintf("a person denied %s %q: %s", p.Act, p.Target, orWord(dec.Reason, "no reason given"))
	default:
		call := &protocol.ToolCall{ID: ap.ID, Name: p.Tool, Arguments: p.Arguments}
		if dec.Rewrite != nil {
			call.Arguments = dec.Rewrite
		}
		v, bad := gate.Verdict(d.pol, call)
		switch {
		case bad != "":
			rec.Note = "[approved, but the rewritten call cannot run] " + bad
		case v.Effect == policy.Deny:
			// An approval cannot move an action across a deny, whether the
			// deny came with a rewrite or while the run was paused.
			rec.Note = v.Refusal()
			outcome, why = protocol.OutcomeDenied, fmt.Sprintf("the approved action %s %q is denied by the policy (%s)", v.Act, v.Target, v.DecidedBy())
		default:
			obs := d.dispatch(ctx, ap.ID+".approved", call, ap.ID)
			rec.Observations = []protocol.Observation{*obs}
			rec.Changed = obs.Changed
			if dec.Remember {
				rec.Remember = rememberRules(v, call)
			}
			rec.Note = fmt.Sprintf("[approved by a person] %s %q:\n%s", v.Act, v.Target, obs.Content)
		}
	}
	fault.Hit(fault.BeforeCommit)
	if err := d.append(ctx, d.c.slim(ctx, rec)); err != nil {
		d.log.Error("record decision", "approval", ap.ID, "err", err)
		return false
	}
	_ = s.apply(rec)
	if err := d.compilePolicy(); err != nil {
		d.finish(ctx, protocol.OutcomeFailed, err.Error())
		return false
	}
	if outcome != "" {
		d.finish(ctx, outcome, why)
		return false
	}
	d.c.putState(ctx, d.runningState())
	return true
}

// compilePolicy sets the driver's policy: the run's effective one (a
// sub-agent's contained in its parent's, as its trace records it), with
// the rules people asked to remember on top.
func (d *driver) compilePolicy() error {
	base, err := policy.FromProtocol(d.s.policy)
	if err != nil {
		return fmt.Errorf("compile the run's policy: %w", err)
	}
	d.base = base
	var rules []policy.Rule
	for _, r := range d.s.remembered {
		pr, err := policy.ParseRule(r)
		if err != nil {
			return fmt.Errorf("remembered rule: %w", err)
		}
		rules = append(rules, pr)
	}
	if len(rules) > 0 {
		base = base.Remember(rules...)
	}
	d.pol = base
	return nil
}

// cost prices a turn from the coordinator's table: by the model that
// answered, else the one the contract asked for.
func (d *driver) cost(turn *protocol.Turn) *protocol.Cost {
	model := turn.Model
	if model == "" {
		model = d.s.contract.Provider.Model
	}
	micros, ok := d.c.cfg.Prices.Cost(model, turn.Usage.InputTokens, turn.Usage.OutputTokens)
	return &protocol.Cost{Model: model, Micros: micros, Priced: ok, TotalMicros: d.s.cost + micros}
}

func (d *driver) pausedState(why string) *protocol.RunState {
	st := d.s.status(protocol.StatusPaused, d.c.cfg.ID)
	st.Outcome, st.Reason = protocol.OutcomeAwaitingApproval, why
	return st
}

func (d *driver) runningState() *protocol.RunState {
	return d.s.status(protocol.StatusRunning, d.c.cfg.ID)
}

// check runs the contract's verification on the sandboxer.
func (d *driver) check(ctx context.Context, step int) *protocol.CheckResult {
	defer fault.During(fault.DuringVerification)()
	v := d.s.contract.Verification
	op := &protocol.SandboxOp{OpID: fmt.Sprintf("%s.%d.verify.1", d.s.run, step), Run: d.s.run, Kind: protocol.OpVerify,
		Workspace: d.s.contract.Workspace.Root, Verification: &v, Sandbox: &d.s.contract.Sandbox, Policy: d.pol.Protocol()}
	reply, err := d.c.request(ctx, streams.SandboxOps(d.node), op, d.opTimeout())
	switch {
	case err != nil:
		return &protocol.CheckResult{Kind: v.Kind(), Detail: "the verification could not run: " + err.Error()}
	case reply.Error != nil:
		return &protocol.CheckResult{Kind: v.Kind(), Detail: "the verification could not run: " + reply.Error.Message}
	case reply.Check == nil:
		return &protocol.CheckResult{Kind: v.Kind(), Detail: "the sandboxer returned no verification result"}
	}
	return reply.Check
}

func (d *driver) opTimeout() time.Duration {
	return time.Duration(d.s.contract.Sandbox.Limits.WallSecs)*time.Second + d.c.cfg.OpTimeout
}

func (d *driver) offers(name string) bool {
	for _, t := range d.tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func (d *driver) toolNames() string {
	s := ""
	for i, t := range d.tools {
		if i > 0 {
			s += ", "
		}
		s += t.Name
	}
	return s
}

// pause records that the step waits for a person: the pending action in
// the approvals bucket, a paused record in the trace, the run paused in the
// index. It reports whether a decision was already there, so the run goes
// on at once.
func (d *driver) pause(ctx context.Context, p *protocol.Pending) bool {
	s := d.s
	id := pendingID(s.run, p)
	// Recording it again is harmless: the same pending action, and any
	// decision already there is kept.
	var ap *protocol.Approval
	err := d.persist(ctx, "record the pending action", func() (err error) {
		ctx, cancel := jsCall(ctx)
		defer cancel()
		ap, err = d.c.approvals.Defer(ctx, id, p)
		return err
	}, "approval", id)
	if err != nil {
		d.log.Error("record the pending action", "approval", id, "err", err)
		d.finish(ctx, protocol.OutcomeFailed, "the pending action could not be recorded: "+err.Error())
		return false
	}
	why := fmt.Sprintf("waiting for a person to approve %s %q: harness approve %s or harness deny %s --reason ...", p.Act, p.Target, id, id)
	rec := &protocol.Record{Kind: protocol.RecordPaused, Step: s.step, Approval: id, Outcome: protocol.OutcomeAwaitingApproval, Reason: why}
	if err := d.append(ctx, rec); err != nil {
		d.log.Error("record the pause", "err", err)
		return false
	}
	fault.Hit(fault.DuringApprovalPause)
	_ = s.apply(rec)
	if ap.Decision != nil {
		return true // decided before the pause was seen: it still counts
	}
	d.c.putState(ctx, d.pausedState(why))
	d.log.Info("run paused", "approval", id)
	return false
}

// finish records the run's outcome: the finished record, the index, the
// event. A run is never left showing running once it has an outcome.
func (d *driver) finish(ctx context.Context, o protocol.Outcome, why string) {
	s := d.s
	// Draws of a step that will never commit are kept with the outcome.
	rec := &protocol.Record{Kind: protocol.RecordFinished, Step: s.step, Outcome: o, Reason: why, Tokens: s.tokens, Draws: d.draws}
	rec.Patch = d.collect(ctx) // what the run changed in a snapshot workspace
	if err := d.append(ctx, rec); err != nil {
		d.log.Error("record outcome", "outcome", o, "err", err)
		return
	}
	_ = s.apply(rec)
	d.c.metrics.RunFinished(o) // before the index says so, so a scrape after the result sees it
	d.c.indexFinished(ctx, s)
	d.log.Info("run finished", "outcome", o, "steps", s.step, "tokens", s.tokens, "reason", why)
}

func (c *Coordinator) indexFinished(ctx context.Context, s *runState) {
	f := s.finished
	st := s.status(protocol.StatusOf(f.Outcome), c.cfg.ID)
	st.Outcome, st.Reason = f.Outcome, f.Reason
	c.putState(ctx, st)
	c.emit(s.run, s.step, protocol.EventFinished, &protocol.Event{Outcome: f.Outcome, Tokens: s.tokens, Text: f.Reason})
}

// request sends a sandbox operation and decodes the reply.
func (c *Coordinator) request(ctx context.Context, subject string, op *protocol.SandboxOp, timeout time.Duration) (*protocol.SandboxReply, error) {
	data, err := json.Marshal(op)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Ops are idempotent by op id, so a request lost to a broken connection
	// or a sandboxer that is restarting is sent again until the op's time
	// is up; the sandboxer answers a repeat from its first result, or,
	// while the first still runs, when it ends. An op sent to one node is
	// also sent again every resendInterval while unanswered, since its
	// reply may be what was lost (NATS restarted under it). Opens go to
	// every sandboxer or a queue group, and are asked again by open.
	direct := subject != streams.SandboxOpenSubject && subject != streams.SandboxSnapshotSubject
	var m *nats.Msg
	for {
		actx, acancel := rctx, context.CancelFunc(func() {})
		if direct {
			actx, acancel = context.WithTimeout(rctx, resendInterval)
		}
		m, err = c.nc.RequestWithContext(actx, subject, data)
		acancel()
		if err == nil || rctx.Err() != nil || !direct {
			break
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			continue // unanswered within resendInterval: ask again
		}
		if !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
			errors.Is(err, nats.ErrDisconnected)) {
			break
		}
		if serr := sleep(rctx, 250*time.Millisecond); serr != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var reply protocol.SandboxReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return nil, fmt.Errorf("undecodable sandbox reply: %w", err)
	}
	return &reply, nil
}

// resendInterval is how long a sandbox operation's request waits for an
// answer before it is sent again under the same op id.
const resendInterval = 5 * time.Second

// slim returns the record as the trace keeps it: content larger than the
// inline limit moves to the blob store and is held by reference (ARCHITECTURE
// invariant 9). A blob that cannot be stored stays inline.
func (c *Coordinator) slim(ctx context.Context, rec *protocol.Record) *protocol.Record {
	out := *rec
	if rec.Turn != nil {
		if data, err := json.Marshal(rec.Turn); err == nil && len(data) > c.cfg.InlineLimit {
			if ref, err := c.blobs.Put(ctx, data); err == nil {
				out.Turn, out.TurnRef = nil, ref
			}
		}
	}
	if len(rec.Observations) > 0 {
		out.Observations = make([]protocol.Observation, len(rec.Observations))
		for i, o := range rec.Observations {
			if len(o.Content) > c.cfg.InlineLimit {
				if ref, err := c.blobs.Put(ctx, []byte(o.Content)); err == nil {
					o.Ref, o.Size, o.Content = ref, len(o.Content), ""
				}
			}
			if o.Image != nil {
				if data, err := json.Marshal(o.Image); err == nil {
					if ref, err := c.blobs.Put(ctx, data); err == nil {
						o.ImageRef, o.Image = ref, nil
					}
				}
			}
			out.Observations[i] = o
		}
	}
	return &out
}

// resolve fills in content held by reference, in place.
func (c *Coordinator) resolve(ctx context.Context, recs []protocol.Record) error {
	return Resolve(ctx, c.blobs, recs)
}

// Resolve fills in the content that records hold by reference (turns and
// observations in the blob store), in place. Errors: a missing blob.
func Resolve(ctx context.Context, blobs *trace.Blobs, recs []protocol.Record) error {
	for i := range recs {
		r := &recs[i]
		if r.TurnRef != "" && r.Turn == nil {
			data, err := blobs.Get(ctx, r.TurnRef)
			if err != nil {
				return err
			}
			var t protocol.Turn
			if err := json.Unmarshal(data, &t); err != nil {
				return fmt.Errorf("decode turn blob %s: %w", r.TurnRef, err)
			}
			r.Turn = &t
		}
		for j := range r.Observations {
			o := &r.Observations[j]
			if o.Ref != "" && o.Content == "" {
				data, err := blobs.Get(ctx, o.Ref)
				if err != nil {
					return err
				}
				o.Content = string(data)
			}
			if o.ImageRef != "" && o.Image == nil {
				data, err := blobs.Get(ctx, o.ImageRef)
				if err != nil {
					return err
				}
				var img protocol.Image
				if err := json.Unmarshal(data, &img); err != nil {
					return fmt.Errorf("decode image blob %s: %w", o.ImageRef, err)
				}
				o.Image = &img
			}
		}
	}
	return nil
}

// target is what a tool call acts on, for events: its path, pattern or
// program.
func target(call *protocol.ToolCall) string {
	var args map[string]any
	if json.Unmarshal(call.Arguments, &args) != nil {
		return ""
	}
	for _, k := range []string{"path", "pattern", "name_glob", "glob"} {
		if v, ok := args[k].(string); ok {
			return v
		}
	}
	if argv, ok := args["argv"].([]any); ok {
		s := ""
		for i, a := range argv {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprint(a)
		}
		return s
	}
	return ""
}

func stepSummary(rec *protocol.Record) string {
	n := 0
	if rec.Turn != nil {
		n = len(rec.Turn.ToolCalls)
	}
	s := fmt.Sprintf("%d tool call(s)", n)
	if rec.Check != nil {
		if rec.Check.Passed {
			s += ", verification passed"
		} else {
			s += ", verification failed"
		}
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
