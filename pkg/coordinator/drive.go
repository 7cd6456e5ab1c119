package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// A run is driven by one driver, on its own goroutine, from the state its
// trace records (state.go) to its outcome: loop.go takes it step by step,
// and stop.go says at each step boundary what comes next. turn.go gets the
// model's turn, act.go decides each tool call, approve.go pauses for a
// person and carries on with the decision, spawn.go starts sub-agents;
// sandbox.go and workspace.go speak to the sandboxer, budget.go to the
// ledger, and retry.go holds the back-off every retry uses. Around the
// drivers: coordinator.go starts them, admit.go takes submitted
// contracts, takeover.go holds leases and takes runs over, cancel.go stops
// runs, endpoints.go answers the micro service's requests, prune.go
// forgets finished runs past the retention.

// driver carries one run through its steps. It is used by one goroutine.
type driver struct {
	c     *Coordinator
	s     *runState
	w     *trace.Writer
	log   *slog.Logger
	node  string
	tools []protocol.ToolSpec
	pol   *policy.Policy // the run's policy with remembered rules on top
	base  *policy.Policy // the run's policy alone, which sub-agents are contained in
	// polWire is pol's wire form, which every step task and sandbox op
	// carries, made again only when pol is another (wirePolicy).
	polWire   *protocol.Policy
	polWireOf *policy.Policy
	// draws are the settled charges of the step in hand, not yet
	// committed; unsettled maps the attempts of that step whose
	// reservations are held without an answer yet to their keys.
	draws     []protocol.Draw
	unsettled map[int]string
	// spawning is set when the run was offered spawn_agent.
	spawning bool
	// remembering is set when the run was offered remember.
	remembering bool
	// skilling is set when the run was offered read_skill; skills are the
	// catalogue the sandboxer read when it opened the workspace.
	skilling bool
	skills   []protocol.Skill
	// hostRemember holds the provider endpoints an approver allowed during
	// the step in hand, for its record; hostAsked those asked about since
	// this driver began, so an endpoint that asks again after its approval
	// fails the run instead of asking for ever.
	hostRemember []protocol.Rule
	hostDecided  []protocol.Decided
	hostAsked    map[string]bool
	// recovering counts the steps ahead whose turns a previous driver may
	// have left: the first a driver takes, and the one after, whose task
	// went out while the record before it was written (commit.go).
	recovering int
	// live is the driver's context before a cancel, which ends only with
	// the lease: what a cancelled run is ended on.
	live context.Context
	// settled is set when the driver leaves the run paused for a person:
	// it holds nothing, and its lease may go. A driver that stops any
	// other way before the run finished (taken over, cut off, stopping)
	// leaves the lease to run out, so a coordinator looking for expired
	// leases finds the run.
	settled bool
	// asm is the step in hand's request, as assembled.
	asm *assembled
	// sent is the last step task laid out, whole (extend.go); its
	// transcript is named transcripts.laid, transcripts a name of this
	// driver's own.
	sent        atomic.Pointer[sentTask]
	transcripts string
	laid        int
	// toolNode is a sandboxer found holding the tools the contract names,
	// which the open of a snapshot workspace goes to.
	toolNode string
	// indexed is when the run index last heard of this run's progress;
	// unindexed is set while a step committed since is not in it.
	indexed   time.Time
	unindexed bool
	// commit is the step record being written while the next step's
	// request goes out; held are the events of that step meanwhile
	// (commit.go).
	commit *commit
	held   []*protocol.Event
	// workerTools are the tools of the contract the workers hold, found
	// with toolNode; their calls go to the workers.
	workerTools map[string]workerTool
	// toolchain is what the sandboxer recognised of the workspace when
	// the driver opened it.
	toolchain *protocol.Toolchain
	// slot is the run slot the driver works in, lent back while the run
	// waits on its sub-agents (see waitIdle).
	slot *slot
	// ctx is the coordinator's context the driver works on, each of its
	// segments (park.go) under a context of its own.
	ctx context.Context
	ls  *lease
	sub *nats.Subscription // the run's turns, to c.inbox
	// begun is set once the driver's first segment has begun the run, and
	// opened once it opened the workspace: a woken driver carries on the
	// step in hand.
	begun, opened bool
	// wait is the step task whose turn the step in hand waits on;
	// estimates are the reservations of its attempts, by key.
	wait      *turnWait
	estimates map[string]ledger.Usage
	// kids is the step in hand's wait on its sub-agents (kids.go).
	kids *kidsWait
	pk   parking
	// mcpLost is why an MCP server of the run died, which fails the run
	// once the step in hand is committed; mcpGone the servers whose death
	// was published.
	mcpLost *protocol.Error
	mcpGone map[string]bool
}

// newDriver makes the driver of a run from the state its trace records,
// on ctx, which ends only with the coordinator. It returns nil when there
// is nothing to drive, and whether the run is then settled (finished).
func (c *Coordinator) newDriver(ctx context.Context, run string, recs []protocol.Record, last uint64, ls *lease) (*driver, bool) {
	log := c.log.With("run", run)
	if err := c.resolve(ctx, recs); err != nil {
		log.Error("read trace content", "err", err)
		return nil, false
	}
	s, err := newRunState(run, recs)
	if err != nil {
		log.Error("rebuild run", "err", err)
		c.putSettled(ctx, &protocol.RunState{Run: run, Status: protocol.StatusFailed, Outcome: protocol.OutcomeFailed,
			Reason: err.Error(), Coordinator: c.cfg.ID})
		return nil, true // nothing a driver could do with it
	}
	if s.finished != nil {
		c.indexFinished(ctx, s)
		return nil, true
	}
	s.contract = c.secrets.restore(run, s.contract)
	d := &driver{c: c, s: s, w: c.trace.Writer(run, last), log: log, recovering: 2, ctx: ctx, ls: ls}
	if s.step == 0 {
		// A run that has not stepped has no progress for the index to
		// catch up on (admission wrote its entry; a change of state is
		// written at once): its progress is due a second from now, not
		// at its first step, so a run that ends within the second
		// writes its outcome alone.
		d.indexed = time.Now()
	}
	if err := d.compilePolicy(); err != nil {
		log.Error("compile the run's policy", "err", err)
		return nil, false
	}
	// Every run's turns come to the one inbox, to be handed to their
	// drivers, parked or not: a run waiting on a turn needs no goroutine
	// of its own to hear it.
	if d.sub, err = c.nc.ChanSubscribe(wire.Stored(run), c.inbox); err != nil {
		log.Error("subscribe to turns", "err", err)
		return nil, false
	}
	// A cancel asked before this driver began (while the run was paused,
	// or its coordinator gone) ends it before its first step; one asked
	// from now on ends the driver's context.
	if mark, err := c.cancelMark(ctx, run); err != nil {
		log.Warn("look for a cancel", "err", err)
	} else if mark != nil {
		d.finish(ctx, protocol.OutcomeCancelled, cancelReason(mark))
		_ = d.sub.Unsubscribe()
		return nil, s.finished != nil
	}
	return d, false
}

// drive carries the run on, on ctx, which a cancel ends; live is ctx
// before a cancel, which ends only with the lease, and on which a
// cancelled run is ended. It says how the driver left the run: parked
// for the message or timer it waits on, settled (finished, or paused for
// a person), or neither, for whoever takes it next.
func (d *driver) drive(live, ctx context.Context) (parked, settled bool) {
	d.live = live
	if d.loop(ctx) {
		return true, false
	}
	d.finishCancelled(live, ctx) // a cancel that stopped the loop before its workspace was open
	return false, d.settled || d.s.finished != nil
}

// compilePolicy sets the driver's policy: the run's effective one (a
// sub-agent's contained in its parent's, as its trace records it), with
// the rules people asked to remember on top.
func (d *driver) compilePolicy() (err error) {
	d.base, d.pol, err = d.s.compiled()
	return err
}

// wirePolicy is the wire form of the run's policy (pol), as the step
// tasks and sandbox ops carry it. Nothing changes what it returns: it is
// shared by every task and op until pol is replaced.
func (d *driver) wirePolicy() *protocol.Policy {
	if d.polWireOf != d.pol || d.polWire == nil {
		d.polWire, d.polWireOf = d.pol.Protocol(), d.pol
	}
	return d.polWire
}

// compiled is the run's policy alone (base) and with the rules people
// remembered on top (pol). A single-file contract's is confined to its
// file here whatever policy its trace records (a resume's included), as
// its admission confined it.
func (s *runState) compiled() (base, pol *policy.Policy, err error) {
	base, err = policy.FromProtocol(s.policy)
	if err != nil {
		return nil, nil, fmt.Errorf("compile the run's policy: %w", err)
	}
	if name := s.contract.Workspace.FileName(); name != "" {
		base = base.OneFile(name)
	}
	var rules []policy.Rule
	for _, r := range s.remembered {
		pr, err := policy.ParseRule(r)
		if err != nil {
			return nil, nil, fmt.Errorf("remembered rule: %w", err)
		}
		rules = append(rules, pr)
	}
	pol = base
	if len(rules) > 0 {
		pol = base.Remember(rules...)
	}
	return base, pol, nil
}

func (d *driver) pausedState(why string) *protocol.RunState {
	st := d.s.status(protocol.StatusPaused, d.c.cfg.ID)
	st.Outcome, st.Reason = protocol.OutcomeAwaitingApproval, why
	return st
}

func (d *driver) runningState() *protocol.RunState {
	return d.s.status(protocol.StatusRunning, d.c.cfg.ID)
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
	c.secrets.forget(s.run)
	f := s.finished
	st := s.status(protocol.StatusOf(f.Outcome), c.cfg.ID)
	st.Outcome, st.Reason = f.Outcome, f.Reason
	c.putSettled(ctx, st)
	c.emit(s.run, s.step, protocol.EventFinished, &protocol.Event{Outcome: f.Outcome, Tokens: s.tokens, Text: f.Reason})
	c.freeRunPlace(ctx, s) // after the event: whoever takes the place is never seen running beside this run
}

// resolve fills in content held by reference, in place.
func (c *Coordinator) resolve(ctx context.Context, recs []protocol.Record) error {
	return c.blobs.Resolve(ctx, recs)
}

// Resolve fills in the content that records hold by reference (turns and
// observations in the blob store), in place. Errors: a missing blob.
func Resolve(ctx context.Context, blobs *trace.Blobs, recs []protocol.Record) error {
	return blobs.Resolve(ctx, recs)
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
