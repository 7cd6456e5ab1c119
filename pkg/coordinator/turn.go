package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// Getting the model's turn for a step: the step task published to the
// provider's pool under a reservation, the turn awaited on the run's turns
// subject (looked for in the turns stream and the task published again
// meanwhile), and, for a driver that picks up a run, the turns its
// predecessor's attempts left recovered first.

// publishBackoff is how turn waits before it publishes again a step task
// JetStream did not take. A provider call that failed is made again after
// the wait the RetryPolicy gives it instead.
var publishBackoff = backoff{wait: time.Second}

// turn gets the provider's answer for a step: the one already durable in
// the turns stream if a previous driver of this run got that far, or a new
// one from a worker. Retryable failures are tried again with back-off, up to
// MaxRetries, unless the wait would outlast the run's deadline.
//
// While the turn is awaited, or a retry's delay runs, turn returns
// errParked: the driver leaves its goroutine and slot (see park.go), and
// the message or timer that wakes it calls turn again for the same step,
// which carries on from the attempt in d.wait.
func (d *driver) turn(ctx context.Context, step int) (turn *protocol.Turn, err error) {
	s := d.s
	w := d.wait
	if w == nil || w.step != step {
		d.draws, d.unsettled, d.estimates = nil, map[int]string{}, map[string]ledger.Usage{}
		d.asm = d.assemble(ctx, step)
		w = &turnWait{step: step, attempt: 1}
		if d.recovering > 0 {
			d.recovering--
			tr, next := d.recover(ctx, step)
			if tr != nil {
				if !d.committed(ctx) {
					return nil, errCommitLost
				}
				return tr.Turn, nil
			}
			w.attempt = next
		}
		d.wait = w
	}
	defer func() {
		if errors.Is(err, errParked) {
			return // carried on when woken
		}
		d.wait = nil
		if cancelOf(ctx) != nil {
			// Cancelled: nobody will wait for these answers. A worker may
			// be making the call, so each is charged at its estimate.
			for _, key := range d.unsettled {
				d.chargeAbandoned(ctx, key, d.estimates[key])
			}
			d.unsettled = map[int]string{}
			return
		}
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
	err = retrying(ctx, publishBackoff, func() error {
		if ctx.Err() != nil {
			return done(ctx.Err()) // cancelled, or out of time, while it waited
		}
		switch {
		case !w.retryAt.IsZero():
			if time.Now().Before(w.retryAt) {
				d.answer(ctx, w) // late answers of earlier attempts, charged
				d.indexProgress(ctx)
				if d.parkNow() {
					return done(errParked) // a retry's delay: woken by its timer
				}
				return again(0)
			}
			w.retryAt = time.Time{}
		case w.task != nil:
			return d.awaitTurn(ctx, w, &turn)
		}
		data, whole, err := d.layTask(step, w.attempt)
		if err != nil {
			return done(protocol.Errorf(protocol.CodeInternal, "encode step task: %s", err.Error()))
		}
		// No provider call without a reservation that fits every ceiling.
		key := protocol.StepKey(s.run, step, w.attempt)
		estimate := d.estimate(whole)
		if err := d.reserve(ctx, key, estimate); err != nil {
			if errors.Is(err, errStaleKey) {
				// An earlier driver settled this attempt and died before
				// its step was committed: what it charged goes into this
				// step's record, so the trace keeps what the ledger holds.
				d.keepSettled(ctx, key)
				w.attempt++
				return again(0)
			}
			return done(err)
		}
		d.unsettled[w.attempt] = key
		d.estimates[key] = estimate
		msg := &nats.Msg{Subject: wire.Steps(s.contract.Provider.Pool), Data: data}
		if limit := d.c.nc.MaxPayload(); limit > 0 && int64(whole) > limit-taskHeadroom {
			err = nats.ErrMaxPayload // known before it is sent
		} else {
			pctx, cancel := jsCall(ctx)
			_, err = d.c.js.PublishMsg(pctx, msg, jetstream.WithMsgID(key))
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return done(ctx.Err())
			}
			if isTooLarge(err) {
				// It would not fit the next time either: no worker can be
				// asked for this step.
				delete(d.unsettled, w.attempt)
				d.release(ctx, key)
				return done(protocol.FieldError(protocol.CodeTooLarge, "request", "keep tool output and files the model reads smaller, or raise the NATS server's max_payload",
					"the conversation is %d bytes as a step task, over the %d-byte message limit of the bus", whole, d.c.nc.MaxPayload()))
			}
			d.log.Warn("publish step task", "step", step, "err", err)
			return err // published again, the same attempt, after publishBackoff's wait
		}
		w.task, w.key, w.estimate, w.giveUp = msg, key, estimate, time.Now().Add(d.c.cfg.TurnTimeout)
		return d.awaitTurn(ctx, w, &turn)
	})
	return turn, err
}

// awaitTurn takes the answer of the attempt w waits on, if it has come,
// and acts on it as turn's retry expects: nil with *turn set, done with
// the step's error, again for another attempt, or done(errParked) while
// there is no answer yet.
func (d *driver) awaitTurn(ctx context.Context, w *turnWait, turn **protocol.Turn) error {
	s, step := d.s, w.step
	// The step task is out; nothing of its answer is acted on, and the
	// run does not park, before the step before it is in the trace.
	if !d.committed(ctx) {
		return done(errCommitLost)
	}
	tr := d.answer(ctx, w)
	if tr == nil {
		if time.Now().Before(w.giveUp) {
			d.indexProgress(ctx)
			if d.parkNow() {
				return done(errParked) // woken by the turn, or by the timer of giveUp
			}
			return again(0) // a turn came meanwhile
		}
		d.log.Warn("no turn in time; publishing again", "step", step, "attempt", w.attempt)
		w.task, w.attempt = nil, w.attempt+1
		return again(0)
	}
	w.task = nil
	key := w.key
	delete(d.unsettled, w.attempt)
	d.chargeLost(ctx, step, key, tr.Deliveries, w.estimate)
	if tr.Error == nil && tr.Turn != nil {
		draw, _ := d.settle(ctx, step, key, tr.Turn, d.cost(tr.Turn))
		d.draws = append(d.draws, draw)
		*turn = tr.Turn
		return nil
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
			return done(err)
		}
		w.attempt++ // approved now: asked again, with the endpoint remembered
		return again(0)
	}
	perr := tr.Error
	if perr == nil {
		perr = protocol.Errorf(protocol.CodeProviderMalformed, "the worker returned neither a turn nor an error")
	}
	w.retries++
	wait, ok := d.c.cfg.Retry.Next(w.retries, perr, time.Now(), s.deadline())
	if !ok {
		return done(perr) // not retryable, retries spent, or a wait that would outlast the time budget
	}
	d.log.Info("retrying provider call", "step", step, "attempt", w.attempt, "wait", wait, "err", perr)
	d.c.emit(s.run, step, protocol.EventRetry, &protocol.Event{Text: fmt.Sprintf("%s; retry %d in %s", perr.Name, w.retries, wait)})
	d.c.metrics.Retried()
	w.attempt++
	if wait > 0 {
		w.retryAt = time.Now().Add(wait)
		return done(errParked)
	}
	return again(0)
}

// answer takes the turns that came for the run (park.go's inbox) and
// returns the one of the attempt w waits on, or nil. An earlier attempt's
// answer, late, is charged under its own key, once.
func (d *driver) answer(ctx context.Context, w *turnWait) *protocol.TurnResult {
	step, attempt := w.step, w.attempt
	var found *protocol.TurnResult
	for _, m := range d.takeInbox() {
		var tr protocol.TurnResult
		if err := wirejson.Unmarshal(m.Data, &tr); err != nil {
			d.log.Warn("undecodable turn", "err", err)
			continue
		}
		if tr.GivenBack() {
			continue // a worker stopping gave the task back uncalled: another answers it
		}
		d.c.workers.heard(d.s.contract.Provider.Pool, tr.Worker, time.Now())
		if tr.Step == step && tr.Attempt == attempt {
			if found == nil {
				found = &tr
			}
			continue
		}
		if tr.Step > step || (tr.Step == step && tr.Attempt >= attempt) {
			continue
		}
		if tr.Step == step {
			delete(d.unsettled, tr.Attempt)
		}
		// The provider was paid for it, so it is charged under its own
		// key, once (a turn heard twice, or charged by an earlier driver,
		// is a replay).
		key := protocol.StepKey(d.s.run, tr.Step, tr.Attempt)
		if paid := spentOf(&tr); paid == nil {
			d.release(ctx, key)
		} else if draw, replayed := d.settle(ctx, step, key, paid, d.cost(paid)); !replayed {
			d.draws = append(d.draws, draw)
		}
	}
	return found
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

// cost prices a turn from the coordinator's table: by the model that
// answered, else the one the contract asked for.
func (d *driver) cost(turn *protocol.Turn) *protocol.Cost {
	model := turn.Model
	if model == "" {
		model = d.s.contract.Provider.Model
	}
	micros, ok := d.c.cfg.Prices.CostOf(model, turn.Usage)
	return &protocol.Cost{Model: model, Micros: micros, Priced: ok, TotalMicros: d.s.cost + micros, Reported: turn.Usage.ReportedCost}
}

// turnOf returns the durable turn of one attempt of a step, or nil.
func (d *driver) turnOf(ctx context.Context, step, attempt int) *protocol.TurnResult {
	m, err := d.lastTurn(ctx, step, attempt)
	if err != nil {
		return nil
	}
	return answerIn(m.Data)
}

// answerIn is the answer data read from a turn's subject holds, or nil:
// it does not decode, or it is a worker's mark of the task given back
// without a call, whose task is still out.
func answerIn(data []byte) *protocol.TurnResult {
	var tr protocol.TurnResult
	if err := wirejson.Unmarshal(data, &tr); err != nil || tr.GivenBack() {
		return nil
	}
	return &tr
}

// lastTurn reads one attempt's turn from the turns stream, bounded by
// jsTimeout.
func (d *driver) lastTurn(ctx context.Context, step, attempt int) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := jsCall(ctx)
	defer cancel()
	return d.c.assets.Turns.GetLastMsgForSubject(ctx, wire.Turn(d.s.run, step, attempt))
}

// lookupBackoff is how lookupTurn waits between its six lookups, and
// after the last before recover asks about the next attempt.
var lookupBackoff = backoff{wait: 250 * time.Millisecond, max: 8 * time.Second, waits: 6}

// lookupTurn is turnOf for recover: a lookup that failed for another
// reason than a missing turn (the stream electing a leader after a
// restart) is tried again for a while, since taking a missing answer for
// none would make the call again.
func (d *driver) lookupTurn(ctx context.Context, step, attempt int) *protocol.TurnResult {
	var tr *protocol.TurnResult
	_ = retrying(ctx, lookupBackoff, func() error {
		m, err := d.lastTurn(ctx, step, attempt)
		if err == nil {
			tr = answerIn(m.Data)
			return nil
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
			return nil
		}
		d.log.Warn("look up a turn; trying again", "step", step, "attempt", attempt, "err", err)
		return err
	})
	return tr
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
