package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// loop drives the run step by step until it ends, the driver's context
// does, or the run parks to wait (then it reports parked, and is called
// again when woken, to carry on with the step in hand). What it does at
// each step boundary is runState.next's to say.
func (d *driver) loop(ctx context.Context) (parked bool) {
	s := d.s
	if !d.begun {
		d.begun = true
		if ok, why := gate.Allowed(d.pol, s.contract.Verification); !ok {
			d.finish(ctx, protocol.OutcomeRefused, why)
			return false
		}
		if why := d.mcpRefusal(); why != "" {
			d.finish(ctx, protocol.OutcomeRefused, why)
			return false
		}
		// A run out of time or steps ends before it takes a workspace.
		if a, o, why := s.next(boundary{now: time.Now()}); a == finishRun {
			d.finish(ctx, o, why)
			return false
		}
		if !d.take(ctx) {
			return false
		}
		d.opened = true
		d.offerSpawn(ctx)
		d.offerRemember()
		d.offerSkills()
	}
	if !d.opened {
		return false // a driver whose first segment ended before its workspace was open
	}
	defer func() {
		if parked {
			return // the workspace stays open for the step in hand
		}
		d.committed(ctx)
		d.finishCancelled(d.live, ctx) // before the close: a snapshot's changes are collected
		d.close()
	}()

	stepCtx := ctx
	if dl := s.deadline(); !dl.IsZero() {
		var cancel context.CancelFunc
		stepCtx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	var took *stepTaken
	var pending *protocol.Pending // the step just taken waits for a person on it
	// A driver woken in the middle of a step carries that step on: its
	// turn's wait ends it, a cancel or the run's time included.
	inStep := d.wait != nil || d.kids != nil
	for {
		a, o, why := stepOn, protocol.Outcome(""), ""
		if !inStep {
			a, o, why = s.next(boundary{now: time.Now(), cancelled: ctx.Err() != nil, took: took})
		}
		inStep, took = false, nil
		if a != stepOn && !d.committed(ctx) {
			return
		}
		switch a {
		case leave:
			return // shutting down: the run stays running, to be picked up again
		case finishRun:
			d.finish(ctx, o, why)
			return
		case pauseStep:
			if !d.pause(ctx, pending) {
				return
			}
			continue
		case recordPause:
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
		case awaitDecision:
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
				d.c.putSettled(ctx, d.pausedState(s.paused.Reason))
				d.settled = true
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
		var rec *protocol.Record
		var outcome protocol.Outcome
		rec, pending, outcome, why = d.step(stepCtx, step)
		if outcome == parkRun {
			return true
		}
		if outcome == leaveRun || !d.committed(ctx) {
			return
		}
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
			took = &stepTaken{pending: true}
			continue
		}
		stall, tried := s.stall.check(s.contract.Stall, rec) // before the step is folded in
		fault.Hit(fault.BeforeCommit)
		// Written while the next step's request goes out; waited for before
		// anything acts on that step, or the run leaves the loop.
		d.begin(ctx, rec, began, pending == nil)
		d.draws = nil
		if len(rec.Remember) > 0 {
			if err := d.compilePolicy(); err != nil {
				d.finish(ctx, protocol.OutcomeFailed, err.Error())
				return
			}
		}
		if d.mcpLost != nil {
			// An MCP server died: the step that saw it is in the trace,
			// and the run cannot go on without the server.
			d.finish(ctx, protocol.OutcomeFailed, d.mcpLost.Error())
			return
		}
		took = &stepTaken{rec: rec, pending: pending != nil, stall: stall, tried: tried}
	}
}

// step runs one step up to its commit. It returns the record to commit, or
// an outcome that ends the run before anything is committed.
func (d *driver) step(ctx context.Context, step int) (rec *protocol.Record, pending *protocol.Pending, outcome protocol.Outcome, why string) {
	s := d.s
	var turn *protocol.Turn
	unrun, from := "", 0
	if h := d.kids; h != nil {
		// Woken while the step waited on sub-agents: carried on from the
		// calls after theirs once every one has finished.
		if d.awaitKids(ctx) {
			return nil, nil, parkRun, ""
		}
		turn, rec, unrun, from = h.turn, h.rec, h.unrun, h.next
		d.observeAll(step, rec, h.obs)
	} else {
		var err error
		if turn, err = d.turn(ctx, step); err != nil {
			return d.turnFailed(ctx, err)
		}
		d.c.emit(s.run, step, protocol.EventTurn, &protocol.Event{Text: clip(turn.Text, 2000), Tokens: turn.Usage.Total()})
		rec = &protocol.Record{Kind: protocol.RecordStep, Step: step, Turn: turn, Tokens: s.tokens + turn.Usage.Total(), Cost: d.cost(turn),
			Draws: d.draws, Remember: d.hostRemember, Decided: d.hostDecided}
		if a := d.asm; a != nil {
			stats := a.stats
			stats.Reported = turn.Usage.InputTokens
			rec.Assembled, rec.Rereads, rec.Tools, rec.Toolchain, rec.Skills = &stats, a.rereads, a.tools, a.toolchain, a.skills
		}
		d.hostRemember, d.hostDecided = nil, nil
		// A turn cut off at the output limit may hold a call whose
		// arguments are cut short, and a refusal's calls are no answer:
		// none of them is carried out, and the model hears why.
		switch turn.Finish() {
		case protocol.FinishMaxTokens:
			unrun = "[not run] your output was cut off at its token limit, perhaps inside this call, so its arguments may be incomplete; make the call again, shorter, or split the work."
		case protocol.FinishRefusal:
			unrun = "[not run] the turn that made this call was a refusal; no call of it is carried out."
		}
		for i := range turn.ToolCalls {
			if call := &turn.ToolCalls[i]; call.ID == "" {
				call.ID = fmt.Sprintf("call_%d_%d", step, i)
			}
		}
	}
	for i := from; i < len(turn.ToolCalls); i++ {
		call := &turn.ToolCalls[i]
		if j := d.spawns(turn.ToolCalls, i); unrun == "" && pending == nil && j > i {
			// Sub-agents asked for side by side run side by side, the step
			// parked while they do; their outcomes are composed back in the
			// order the model asked.
			obs, h := d.spawnAll(ctx, step, i, turn.ToolCalls[i:j])
			if h != nil {
				h.turn, h.rec, h.unrun = turn, rec, unrun
				return nil, nil, parkRun, ""
			}
			d.observeAll(step, rec, obs)
			i = j - 1
			continue
		}
		if unrun != "" {
			rec.Observations = append(rec.Observations, protocol.Observation{CallID: call.ID, Tool: call.Name, Status: protocol.CallNotRun, IsError: true, Content: unrun})
			continue
		}
		if pending != nil {
			// A call earlier in this step waits for a person; the rest wait
			// with it, unrun, and the model hears why.
			rec.Observations = append(rec.Observations, protocol.Observation{CallID: call.ID, Tool: call.Name, Status: protocol.CallNotRun,
				Content: "[not run] an earlier call of this step is waiting for a person's approval; ask again if it is still needed."})
			continue
		}
		d.c.emit(s.run, step, protocol.EventToolCall, &protocol.Event{Tool: call.Name, Target: target(call)})
		var obs *protocol.Observation
		obs, pending = d.act(ctx, step, i, call, rec)
		if obs.Changed {
			rec.Changed = true
		}
		d.c.emit(s.run, step, protocol.EventObserved, &protocol.Event{Tool: call.Name, Text: clip(obs.Content, 2000), IsError: obs.IsError, Status: obs.State()})
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

// observeAll adds the observations of a run of spawn_agent calls to the
// step's record, in the calls' order.
func (d *driver) observeAll(step int, rec *protocol.Record, obs []*protocol.Observation) {
	for _, o := range obs {
		rec.Changed = rec.Changed || o.Changed
		d.c.emit(d.s.run, step, protocol.EventObserved, &protocol.Event{Tool: o.Tool, Text: clip(o.Content, 2000), IsError: o.IsError, Status: o.State()})
		rec.Observations = append(rec.Observations, *o)
	}
}

// turnFailed is step's answer when no turn came: the outcome that ends
// the run, a pause before the step, or the run parked.
func (d *driver) turnFailed(ctx context.Context, err error) (rec *protocol.Record, pending *protocol.Pending, outcome protocol.Outcome, why string) {
	if errors.Is(err, errParked) {
		return nil, nil, parkRun, ""
	}
	if errors.Is(err, errCommitLost) {
		return nil, nil, leaveRun, ""
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, nil, protocol.OutcomeTimeBudgetExceeded, "the wall-clock budget ran out during a provider call"
	}
	var wait *hostPending
	if errors.As(err, &wait) {
		// The provider's endpoint waits for a person: no step to commit,
		// the run pauses before it. Its next driver looks for the turns
		// of this step's attempts so far, so none is asked for twice.
		d.recovering = max(d.recovering, 1)
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

// indexEvery is how often at most a running run's progress (its steps and
// tokens so far) is written to the run index.
const indexEvery = time.Second

// indexProgress writes the run's progress to the index if a step is not
// in it and the last write is indexEvery old. A run that waits with a
// step not in the index parks until then at the latest (park), so the
// index is never more than indexEvery behind a waiting run. It runs on
// the driver's goroutine, as every other write of the run's state does,
// and its publish is not retried later by itself: a write of a change of
// state made after it cannot be overtaken by it.
func (d *driver) indexProgress(ctx context.Context) {
	if !d.unindexed || time.Since(d.indexed) < indexEvery {
		return
	}
	st := d.s.status(protocol.StatusRunning, d.c.cfg.ID)
	st.Updated = time.Now().UTC()
	d.c.awaitAdmission(st.Run)
	if err := d.c.index.Progress(ctx, st); err != nil {
		d.log.Warn("update run index", "err", err)
	}
	d.indexed, d.unindexed = time.Now(), false
}

// take admits the run to the budget ledger and opens its workspace. It
// reports false when the run cannot go on: ended here (refused, or no
// workspace), or the coordinator shutting down.
//
// A new run whose open costs the sandboxer more than finding its root (a
// snapshot to materialise, MCP servers to start, skills to read) is
// admitted before it takes a workspace, so that one the ledger refuses
// never makes a sandboxer do that work. For any other run, the admission
// (for a run resumed with steps behind it, a rebuild of its tree, where
// the ledger lost it) and the open, each a round trip to another node, go
// at once; a workspace opened for a run the ledger then refuses is closed
// again, its changes collected with the outcome.
func (d *driver) take(ctx context.Context) bool {
	s := d.s
	held := len(s.contract.Tools) > 0 || s.contract.Verification.DocumentContains != nil
	light := s.contract.Workspace.Snapshot == "" && s.contract.MCP == nil && s.contract.Skills == nil
	var opening chan error
	if (s.step > 0 || light) && !held {
		opening = make(chan error, 1)
		d.wirePolicy() // made here: the open beside the admission only reads it
		go func() { opening <- d.open(ctx) }()
	}
	o, why, err := d.admit(ctx)
	var openErr error
	if opening != nil {
		openErr = <-opening
	}
	switch {
	case err != nil: // shutting down
		d.close() // a workspace opened meanwhile, as the loop gives one back when it stops
		return false
	case o != "":
		d.finish(ctx, o, why)
		d.close()
		return false
	}
	if opening == nil {
		if held {
			// Before any workspace is taken: a run no sandboxer can serve
			// is refused, saying which tool is missing.
			node, err := d.toolsHeld(ctx)
			if err != nil {
				d.finish(ctx, protocol.OutcomeRefused, err.Error())
				return false
			}
			d.toolNode = node
		}
		openErr = d.open(ctx)
	}
	if openErr != nil {
		d.finish(ctx, openOutcome(openErr), openErr.Error())
		return false
	}
	return true
}

// openOutcome is how a run whose workspace would not open ends: refused
// when the sandboxer refused what the contract asks of its sandbox (a
// backend it has not or its operator does not allow, a stdio MCP server
// on a backend that cannot hold one, a policy that allows everything by
// default), before its first step as docs/contract.md says; failed when
// the open itself went wrong (a server or a skills snapshot that would not
// start or unpack included).
func openOutcome(err error) protocol.Outcome {
	var pe *protocol.Error
	if errors.As(err, &pe) && (pe.Code == protocol.CodeUnsupported && pe.Field == "sandbox.backend" ||
		pe.Code == protocol.CodeInvalidField && (pe.Field == "policy" || pe.Field == "policy.defaults")) {
		return protocol.OutcomeRefused
	}
	return protocol.OutcomeFailed
}
