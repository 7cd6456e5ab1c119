package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/streams"
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
	pol   *policy.Policy
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
	pol, err := policy.FromProtocol(s.contract.Policy)
	if err != nil {
		log.Error("compile the run's policy", "err", err)
		return
	}
	d := &driver{c: c, s: s, w: c.trace.Writer(run, last), log: log, turns: make(chan *nats.Msg, 16), pol: pol}
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
	if ok, why := gateAllowed(d.pol, s.contract.Verification); !ok {
		d.finish(ctx, protocol.OutcomeRefused, why)
		return
	}
	if err := d.open(ctx); err != nil {
		d.finish(ctx, protocol.OutcomeFailed, err.Error())
		return
	}
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
		step := s.step + 1
		rec, outcome, why := d.step(stepCtx, step)
		if ctx.Err() != nil {
			return
		}
		if outcome != "" {
			d.finish(ctx, outcome, why)
			return
		}
		if err := d.w.Append(ctx, d.c.slim(ctx, rec)); err != nil {
			if errors.Is(err, protocol.ErrFenced) {
				d.log.Warn("run taken over; stopping", "step", step)
				return
			}
			d.log.Error("commit step", "step", step, "err", err)
			d.finish(ctx, protocol.OutcomeFailed, "the trace could not be written: "+err.Error())
			return
		}
		_ = s.apply(rec)
		if err := d.c.index.Progress(ctx, &protocol.RunState{Run: s.run, Status: protocol.StatusRunning, Step: s.step, Tokens: s.tokens,
			Task: s.contract.Task, Coordinator: d.c.cfg.ID, Started: s.started, Updated: time.Now().UTC()}); err != nil {
			d.log.Warn("update run index", "err", err)
		}
		d.c.emit(s.run, step, protocol.EventStep, &protocol.Event{Tokens: rec.Tokens, Text: stepSummary(rec)})
		if o, why := s.afterStep(rec); o != "" {
			d.finish(ctx, o, why)
			return
		}
	}
}

// step runs one step up to its commit. It returns the record to commit, or
// an outcome that ends the run before anything is committed.
func (d *driver) step(ctx context.Context, step int) (*protocol.Record, protocol.Outcome, string) {
	s := d.s
	turn, err := d.turn(ctx, step)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, protocol.OutcomeTimeBudgetExceeded, "the wall-clock budget ran out during a provider call"
		}
		pe := protocol.AsError(err)
		if pe.Retryable() {
			return nil, protocol.OutcomeEscalatedRetryable, "provider failed: " + pe.Error()
		}
		return nil, protocol.OutcomeEscalatedTerminal, "provider failed: " + pe.Error()
	}
	d.c.emit(s.run, step, protocol.EventTurn, &protocol.Event{Text: clip(turn.Text, 2000), Tokens: turn.Usage.Total()})
	rec := &protocol.Record{Kind: protocol.RecordStep, Step: step, Turn: turn, Tokens: s.tokens + turn.Usage.Total()}
	for i := range turn.ToolCalls {
		call := &turn.ToolCalls[i]
		if call.ID == "" {
			call.ID = fmt.Sprintf("call_%d_%d", step, i)
		}
		d.c.emit(s.run, step, protocol.EventToolCall, &protocol.Event{Tool: call.Name, Target: target(call)})
		obs := d.act(ctx, step, i, call)
		if obs.Changed {
			rec.Changed = true
		}
		d.c.emit(s.run, step, protocol.EventObserved, &protocol.Event{Tool: call.Name, Text: clip(obs.Content, 2000), IsError: obs.IsError})
		rec.Observations = append(rec.Observations, *obs)
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, protocol.OutcomeTimeBudgetExceeded, "the wall-clock budget ran out during a tool call"
		}
		return nil, "", ""
	}
	if s.needsCheck(turn, rec.Tokens) {
		rec.Check = d.check(ctx, step)
		passed := rec.Check.Passed
		d.c.emit(s.run, step, protocol.EventCheck, &protocol.Event{Passed: &passed, Text: rec.Check.Detail})
	}
	rec.Note = s.note(turn, rec.Check)
	return rec, "", ""
}

// turn gets the provider's answer for a step: the one already durable in
// the turns stream if a previous driver of this run got that far, or a new
// one from a worker. Retryable failures are tried again with back-off, up to
// MaxRetries, unless the wait would outlast the run's deadline.
func (d *driver) turn(ctx context.Context, step int) (*protocol.Turn, error) {
	s := d.s
	attempt := 1
	if tr := d.lastTurn(ctx); tr != nil && tr.Step == step {
		if tr.Turn != nil {
			d.log.Info("reusing durable turn", "step", step, "attempt", tr.Attempt)
			return tr.Turn, nil
		}
		attempt = tr.Attempt + 1
	}
	retries := 0
	for {
		task := &protocol.StepTask{Run: s.run, Step: step, Attempt: attempt, Request: *s.request(d.tools), Deadline: s.deadline()}
		data, err := json.Marshal(task)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "encode step task: %s", err.Error())
		}
		if _, err := d.c.js.PublishMsg(ctx, &nats.Msg{Subject: streams.Steps(s.contract.Provider.Pool), Data: data},
			jetstream.WithMsgID(task.Key())); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d.log.Warn("publish step task", "step", step, "err", err)
			if err := sleep(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		}
		tr, err := d.await(ctx, step, attempt)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d.log.Warn("no turn in time; publishing again", "step", step, "attempt", attempt)
			attempt++
			continue
		}
		if tr.Error == nil && tr.Turn != nil {
			return tr.Turn, nil
		}
		perr := tr.Error
		if perr == nil {
			perr = protocol.Errorf(protocol.CodeProviderMalformed, "the worker returned neither a turn nor an error")
		}
		if !perr.Retryable() || retries >= d.c.cfg.MaxRetries {
			return nil, perr
		}
		wait := d.c.cfg.RetryBase << retries
		if perr.RetryAfterMS > 0 {
			wait = time.Duration(perr.RetryAfterMS) * time.Millisecond
		}
		if dl := s.deadline(); !dl.IsZero() && time.Now().Add(wait).After(dl) {
			return nil, perr // a wait is not a way to escape the time budget
		}
		d.log.Info("retrying provider call", "step", step, "attempt", attempt, "wait", wait, "err", perr)
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		retries++
		attempt++
	}
}

// await waits for the turn of one attempt on the run's turns subject.
func (d *driver) await(ctx context.Context, step, attempt int) (*protocol.TurnResult, error) {
	timer := time.NewTimer(d.c.cfg.TurnTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, errors.New("turn timeout")
		case m := <-d.turns:
			var tr protocol.TurnResult
			if err := json.Unmarshal(m.Data, &tr); err != nil {
				d.log.Warn("undecodable turn", "err", err)
				continue
			}
			if tr.Step == step && tr.Attempt == attempt {
				return &tr, nil
			}
		}
	}
}

// lastTurn returns the run's last durable turn, or nil.
func (d *driver) lastTurn(ctx context.Context) *protocol.TurnResult {
	m, err := d.c.assets.Turns.GetLastMsgForSubject(ctx, streams.Turns(d.s.run))
	if err != nil {
		return nil
	}
	var tr protocol.TurnResult
	if json.Unmarshal(m.Data, &tr) != nil {
		return nil
	}
	return &tr
}

// open finds a sandboxer that serves the run's workspace, asking again
// until OpenTimeout passes, so a run submitted while the sandboxers are
// still coming up waits for them.
func (d *driver) open(ctx context.Context) error {
	op := &protocol.SandboxOp{OpID: d.s.run + ".open", Run: d.s.run, Kind: protocol.OpOpen,
		Workspace: d.s.contract.Workspace.Root, Sandbox: &d.s.contract.Sandbox}
	deadline := time.Now().Add(d.c.cfg.OpenTimeout)
	for {
		reply, err := d.c.request(ctx, streams.SandboxOpenSubject, op, time.Until(deadline))
		switch {
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
			return fmt.Errorf("no sandboxer serves the workspace %s: start one whose roots include it", d.s.contract.Workspace.Root)
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

// act sends one tool call to the sandboxer and returns its observation.
// Nothing here fails the run: every failure is an observation the model can
// act on.
func (d *driver) act(ctx context.Context, step, i int, call *protocol.ToolCall) *protocol.Observation {
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	if !d.offers(call.Name) {
		obs.IsError = true
		obs.Content = fmt.Sprintf("[unknown tool] %q is not a tool here; the tools are: %s", call.Name, d.toolNames())
		return obs
	}
	v, bad := verdict(d.pol, call)
	if bad != "" {
		obs.IsError, obs.Content = true, bad
		return obs
	}
	if v.Effect != policy.Allow {
		obs.IsError, obs.Content = true, v.Refusal()
		obs.Refused = &protocol.Refusal{Act: v.Act.String(), Target: v.Target, Effect: v.Effect.String(), Rule: v.Rule, Layer: v.Layer}
		d.c.emit(d.s.run, step, protocol.EventRefused, &protocol.Event{Tool: call.Name, Target: v.Target, Refused: obs.Refused})
		return obs
	}
	op := &protocol.SandboxOp{OpID: fmt.Sprintf("%s.%d.%d.1", d.s.run, step, i), Run: d.s.run, Kind: protocol.OpTool,
		Workspace: d.s.contract.Workspace.Root, Call: call, Sandbox: &d.s.contract.Sandbox, Policy: d.pol.Protocol()}
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

// check runs the contract's verification on the sandboxer.
func (d *driver) check(ctx context.Context, step int) *protocol.CheckResult {
	v := d.s.contract.Verification
	op := &protocol.SandboxOp{OpID: fmt.Sprintf("%s.%d.verify.1", d.s.run, step), Run: d.s.run, Kind: protocol.OpVerify,
		Workspace: d.s.contract.Workspace.Root, Verification: &v, Sandbox: &d.s.contract.Sandbox}
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

// finish records the run's outcome: the finished record, the index, the
// event. A run is never left showing running once it has an outcome.
func (d *driver) finish(ctx context.Context, o protocol.Outcome, why string) {
	s := d.s
	rec := &protocol.Record{Kind: protocol.RecordFinished, Step: s.step, Outcome: o, Reason: why, Tokens: s.tokens}
	if err := d.w.Append(ctx, rec); err != nil {
		d.log.Error("record outcome", "outcome", o, "err", err)
		return
	}
	_ = s.apply(rec)
	d.c.indexFinished(ctx, s)
	d.log.Info("run finished", "outcome", o, "steps", s.step, "tokens", s.tokens, "reason", why)
}

func (c *Coordinator) indexFinished(ctx context.Context, s *runState) {
	f := s.finished
	c.putState(ctx, &protocol.RunState{Run: s.run, Status: protocol.StatusOf(f.Outcome), Outcome: f.Outcome, Step: s.step,
		Tokens: s.tokens, Task: s.contract.Task, Coordinator: c.cfg.ID, Reason: f.Reason, Started: s.started})
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
	m, err := c.nc.RequestWithContext(rctx, subject, data)
	if err != nil {
		return nil, err
	}
	var reply protocol.SandboxReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return nil, fmt.Errorf("undecodable sandbox reply: %w", err)
	}
	return &reply, nil
}

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
