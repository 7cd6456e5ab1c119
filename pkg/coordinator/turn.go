package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
func (d *driver) turn(ctx context.Context, step int) (*protocol.Turn, error) {
	s := d.s
	d.draws, d.unsettled = nil, map[int]string{}
	estimates := map[string]ledger.Usage{}
	defer func() {
		if cancelOf(ctx) != nil {
			// Cancelled: nobody will wait for these answers. A worker may
			// be making the call, so each is charged at its estimate.
			for _, key := range d.unsettled {
				d.chargeAbandoned(ctx, key, estimates[key])
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
	d.asm = d.assemble(ctx, step)
	attempt := 1
	if d.recovering {
		d.recovering = false
		tr, next := d.recover(ctx, step)
		if tr != nil {
			return tr.Turn, nil
		}
		attempt = next
	}
	var turn *protocol.Turn
	retries := 0
	err := retrying(ctx, publishBackoff, func() error {
		task := &protocol.StepTask{Run: s.run, Step: step, Attempt: attempt, Request: *d.asm.req, Deadline: s.deadline(),
			Policy: d.pol.Protocol(), Expires: time.Now().Add(d.c.cfg.TurnTimeout)}
		data, err := json.Marshal(task)
		if err != nil {
			return done(protocol.Errorf(protocol.CodeInternal, "encode step task: %s", err.Error()))
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
				return again(0)
			}
			return done(err)
		}
		d.unsettled[attempt] = key
		estimates[key] = estimate
		if limit := d.c.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit-taskHeadroom {
			err = nats.ErrMaxPayload // known before it is sent
		} else {
			pctx, cancel := jsCall(ctx)
			_, err = d.c.js.PublishMsg(pctx, &nats.Msg{Subject: wire.Steps(s.contract.Provider.Pool), Data: data},
				jetstream.WithMsgID(task.Key()))
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return done(ctx.Err())
			}
			if isTooLarge(err) {
				// It would not fit the next time either: no worker can be
				// asked for this step.
				delete(d.unsettled, attempt)
				d.release(ctx, key)
				return done(protocol.FieldError(protocol.CodeTooLarge, "request", "keep tool output and files the model reads smaller, or raise the NATS server's max_payload",
					"the conversation is %d bytes as a step task, over the %d-byte message limit of the bus", len(data), d.c.nc.MaxPayload()))
			}
			d.log.Warn("publish step task", "step", step, "err", err)
			return err // published again, the same attempt, after publishBackoff's wait
		}
		tr, err := d.await(ctx, step, attempt, &nats.Msg{Subject: wire.Steps(s.contract.Provider.Pool), Data: data}, task.Key())
		if err != nil {
			if ctx.Err() != nil {
				return done(ctx.Err())
			}
			d.log.Warn("no turn in time; publishing again", "step", step, "attempt", attempt)
			attempt++
			return again(0)
		}
		delete(d.unsettled, attempt)
		d.chargeLost(ctx, step, key, tr.Deliveries, estimate)
		if tr.Error == nil && tr.Turn != nil {
			draw, _ := d.settle(ctx, step, key, tr.Turn, d.cost(tr.Turn))
			d.draws = append(d.draws, draw)
			turn = tr.Turn
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
			attempt++ // approved now: asked again, with the endpoint remembered
			return again(0)
		}
		perr := tr.Error
		if perr == nil {
			perr = protocol.Errorf(protocol.CodeProviderMalformed, "the worker returned neither a turn nor an error")
		}
		retries++
		wait, ok := d.c.cfg.Retry.Next(retries, perr, time.Now(), s.deadline())
		if !ok {
			return done(perr) // not retryable, retries spent, or a wait that would outlast the time budget
		}
		d.log.Info("retrying provider call", "step", step, "attempt", attempt, "wait", wait, "err", perr)
		d.c.emit(s.run, step, protocol.EventRetry, &protocol.Event{Text: fmt.Sprintf("%s; retry %d in %s", perr.Name, retries, wait)})
		d.c.metrics.Retried()
		attempt++
		return again(wait)
	})
	if err != nil {
		return nil, err
	}
	return turn, nil
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
			var t protocol.TurnResult
			if json.Unmarshal(m.Data, &t) == nil {
				tr = &t
			}
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
