package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// accept takes one submitted contract: it refuses it with a typed error,
// or starts (or picks up) its run and replies with the run id. It owns the
// slot Run's callback took for it: given back when it returns, unless it
// passed it on to the run's driver, which gives it back when it ends.
func (c *Coordinator) accept(ctx context.Context, msg jetstream.Msg) {
	sl := c.heldSlot()
	defer sl.release()
	reply := msg.Headers().Get(wire.HeaderReply)
	if tenant, _ := wire.SubmitTenant(msg.Subject()); reply != "" && !wire.ReplyAllowed(tenant, reply) {
		// Answering anywhere else would let a submitter make this
		// coordinator, whose permissions are wide, publish where the
		// submitter may not.
		c.log.Warn("a submitter asked for its answer where it may not be sent; no answer is sent", "reply", reply, "tenant", tenant,
			"msg_id", msg.Headers().Get(jetstream.MsgIDHeader))
		reply = ""
	}
	contract, err := protocol.DecodeContract(msg.Data())
	if err == nil {
		err = reservedLayers(contract.Policy)
	}
	if err != nil {
		c.reject(msg, reply, "", err)
		_ = msg.Term()
		return
	}
	run := c.runIDOf(msg)
	if c.driving(run) {
		// Submitted again (a replayed spawn past the duplicate window):
		// the run is in hand here, and taking its lease again would stop
		// its driver.
		c.answer(msg, reply, &protocol.SubmitReply{Run: run})
		_ = msg.Ack()
		return
	}
	// The workspace's notes are read while the lease is taken and the
	// trace read: they do not depend on either, and a burst of contracts
	// waits on each of those reads in turn.
	notes := make(chan []protocol.Note, 1)
	go func() { notes <- c.admissionNotes(ctx, run, contract) }()
	ls, r, err := c.leaseBesideRead(ctx, run, false)
	if err != nil {
		// Another coordinator holds the run. If it got as far as starting
		// it, the run is in hand; if not, it may have died first, so the
		// contract goes back to the stream until its lease runs out.
		if recs, _, rerr := c.trace.Read(ctx, run); rerr == nil && len(recs) > 0 {
			c.answer(msg, reply, &protocol.SubmitReply{Run: run})
			if c.cfg.NoTakeover {
				// Nobody here takes over a dead coordinator's runs (the
				// embedded default, resuming a tree whose sub-agent was
				// driven by the process that died): the contract comes
				// back until the lease is dead, and then this coordinator
				// drives the run.
				_ = msg.NakWithDelay(c.cfg.LeaseTTL)
				return
			}
			_ = msg.Ack()
		} else {
			_ = msg.NakWithDelay(c.cfg.LeaseTTL)
		}
		return
	}
	recs, last, err := r.recs, r.last, r.err
	if err != nil {
		c.log.Error("read trace", "run", run, "err", err)
		c.leases.release(ctx, ls)
		_ = msg.Nak()
		return
	}
	if len(recs) == 0 {
		tree, depth, err := c.treeOf(ctx, run, contract)
		if err != nil {
			c.reject(msg, reply, run, err)
			c.leases.release(ctx, ls)
			_ = msg.Term()
			return
		}
		eff, parentEff, err := c.containIn(ctx, contract)
		if err != nil {
			pe := protocol.AsError(err)
			if pe.Code == protocol.CodeUnavailable {
				// The parent's trace did not answer: the contract goes
				// back to the stream, to be taken again.
				c.log.Warn("read the parent's policy", "run", run, "err", err)
				c.leases.release(ctx, ls)
				_ = msg.NakWithDelay(time.Second)
				return
			}
			c.reject(msg, reply, run, pe)
			c.leases.release(ctx, ls)
			_ = msg.Term()
			return
		}
		if eff, err = oneFile(contract, eff); err != nil {
			c.reject(msg, reply, run, err)
			c.leases.release(ctx, ls)
			_ = msg.Term()
			return
		}
		// The trace keeps the contract without the values of its MCP
		// servers' env, which are secrets; this coordinator keeps them
		// in memory (secrets), to start the servers and to pass them to
		// the run's sub-agents.
		started := &protocol.Record{Kind: protocol.RecordStarted, Contract: contract.Redacted(), Coordinator: c.cfg.ID, Time: time.Now().UTC(),
			Tree: tree, Depth: depth, Policy: eff, ParentPolicy: parentEff}
		started.Memory = <-notes
		w := c.trace.Writer(run, 0)
		if err := w.Append(ctx, started); err != nil {
			if errors.Is(err, protocol.ErrFenced) {
				// A record came while the trace was read (its last
				// holder's, the lease then running out): the contract is
				// taken again, and the run picked up from its trace.
				c.log.Info("the run's trace moved while it was admitted; taking the contract again", "run", run)
			} else {
				c.log.Error("start run", "run", run, "err", err)
			}
			c.leases.release(ctx, ls)
			_ = msg.Nak()
			return
		}
		c.secrets.keep(run, contract)
		// The run is in the trace, and its driver starts now: it takes
		// its workspace and its place in the ledger while the run's index
		// entry is written. Its own entries and events wait for that
		// entry and the started event (awaitAdmission), and the submitter
		// is answered once the entry is there, so a status asked after
		// the answer finds the run.
		told := make(chan struct{})
		c.admitting.Store(run, told)
		c.start(ctx, run, []protocol.Record{*started}, w.LastSeq(), ls, sl.pass())
		c.writeState(ctx, &protocol.RunState{Run: run, Status: protocol.StatusRunning, Task: contract.Task,
			Coordinator: c.cfg.ID, Started: started.Time, Tree: tree, Parent: contract.Parent,
			Budgets: &protocol.Budgets{Tree: tree, Depth: depth}, Pool: contract.Provider.Pool, Tenant: wire.TenantOf(run)})
		c.publishEvent(run, 0, protocol.EventStarted, &protocol.Event{Text: contract.Task})
		c.metrics.RunStarted()
		c.admitting.Delete(run)
		close(told)
		c.answer(msg, reply, &protocol.SubmitReply{Run: run})
		_ = msg.Ack()
		return
	}
	c.answer(msg, reply, &protocol.SubmitReply{Run: run})
	_ = msg.Ack()
	c.start(ctx, run, recs, last, ls, sl.pass())
}

// reject refuses a submitted contract so that it is seen: the answer on
// its Harness-Reply subject and to a request for it, an event on
// harness.events.rejected.<code> (and the tenant's copy), a count by code,
// and a log line naming the message (its id and stream sequence). run is
// "" when the contract did not decode far enough to have one.
func (c *Coordinator) reject(msg jetstream.Msg, reply, run string, err error) {
	pe := protocol.AsError(err)
	var seq uint64
	if meta, merr := msg.Metadata(); merr == nil {
		seq = meta.Sequence.Stream
	}
	c.refused(msg.Subject(), msg.Headers(), seq, run, pe)
	c.answer(msg, reply, &protocol.SubmitReply{Error: pe})
}

// refused makes a refusal seen: the event, the count and the log line.
func (c *Coordinator) refused(subject string, h nats.Header, seq uint64, run string, pe *protocol.Error) {
	msgID := h.Get(jetstream.MsgIDHeader)
	c.log.Info("contract refused", "run", run, "msg_id", msgID, "seq", seq, "subject", subject, "code", pe.Name, "err", pe)
	c.metrics.ContractRejected(pe.Name)
	ev := &protocol.Event{Run: run, Kind: protocol.EventRejected, Time: time.Now().UTC(), Error: pe, Text: msgID, IsError: true}
	data, jerr := json.Marshal(ev)
	if jerr != nil {
		return
	}
	_ = c.nc.Publish(wire.Rejected(pe.Name), data)
	if tenant, ok := wire.SubmitTenant(subject); ok {
		_ = c.nc.Publish(wire.TenantEvent(tenant, "rejected", pe.Name), data)
	}
}

// treeOf places a new run in its agent tree: a run without a parent is
// the root of its own; a sub-agent joins its parent's tree one level down.
// Errors: the parent is unknown or has finished.
func (c *Coordinator) treeOf(ctx context.Context, run string, contract *protocol.Contract) (string, int, error) {
	if contract.Parent == "" {
		return run, 0, nil
	}
	if contract.Parent == run {
		return "", 0, protocol.FieldError(protocol.CodeInvalidField, "parent", "name another run", "a run cannot be its own parent")
	}
	if wire.TenantOf(contract.Parent) != wire.TenantOf(run) {
		// Another tenant's run is as unknown to this one as a missing run.
		return "", 0, protocol.FieldError(protocol.CodeUnknownRun, "parent", "name a run of your own",
			"no run %s to be a sub-agent of", contract.Parent)
	}
	st, err := c.index.Get(ctx, contract.Parent)
	if err != nil {
		return "", 0, protocol.FieldError(protocol.CodeUnknownRun, "parent", "name a run that is running, or leave parent out to start a tree of its own",
			"no run %s to be a sub-agent of", contract.Parent)
	}
	if st.Status != protocol.StatusRunning && st.Status != protocol.StatusPaused {
		return "", 0, protocol.FieldError(protocol.CodeRunFinished, "parent", "a finished run takes no sub-agents",
			"the parent run %s has finished (%s)", contract.Parent, st.Outcome)
	}
	depth := 1
	if st.Budgets != nil {
		depth = st.Budgets.Depth + 1
	}
	return cmp.Or(st.Tree, st.Run), depth, nil
}

// reservedLayers refuses a contract's layer named as the one that holds
// what a person approved during the run: its allows answer asks (see
// policy.Policy.Remember), which no contract may grant itself.
func reservedLayers(p *protocol.Policy) error {
	if p == nil {
		return nil
	}
	for i, l := range p.Layers {
		if l.Name == policy.RememberedLayer {
			return protocol.FieldError(protocol.CodeInvalidField, fmt.Sprintf("policy.layers[%d].name", i),
				"give the layer another name", "the layer name %q is reserved for what a person approves during a run", l.Name)
		}
	}
	return nil
}

// oneFile returns the effective policy of a single-file contract: eff (a
// sub-agent's), else the contract's own, confined to the one file
// (policy.Policy.OneFile), so that the started record says what the run
// runs under and every sandbox op carries it. Any other contract's eff is
// returned as it is. Errors: the policy does not compile.
func oneFile(contract *protocol.Contract, eff *protocol.Policy) (*protocol.Policy, error) {
	name := contract.Workspace.FileName()
	if name == "" {
		return eff, nil
	}
	own := eff
	if own == nil {
		own = contract.Policy
	}
	p, err := policy.FromProtocol(own)
	if err != nil {
		return nil, err
	}
	return p.OneFile(name).Protocol(), nil
}

// containIn returns a sub-agent's effective policy, its parent's contained
// with its own contract's (allows intersect, denies union, asks kept:
// policy.Contain), and the parent's effective policy it was contained in,
// read from the parent's trace as it stands now: the parent's own
// effective policy, or the last it was resumed under. A person's
// remembered approvals are the parent run's alone and are not passed on.
// A root has neither (nil, nil). Errors: CodeUnknownRun when the parent has
// no trace; CodeUnavailable when it could not be read.
func (c *Coordinator) containIn(ctx context.Context, contract *protocol.Contract) (eff, parentEff *protocol.Policy, err error) {
	if contract.Parent == "" {
		return nil, nil, nil
	}
	parentEff, err = c.policyOf(ctx, contract.Parent)
	if err != nil {
		return nil, nil, err
	}
	parent, err := policy.FromProtocol(parentEff)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeInternal, "the parent run's policy does not compile: %s", err.Error())
	}
	own, err := policy.FromProtocol(contract.Policy)
	if err != nil {
		return nil, nil, err
	}
	return policy.Contain(parent, own).Protocol(), parentEff, nil
}

// policyOf reads a run's effective policy from its trace. Errors: as
// containIn's.
func (c *Coordinator) policyOf(ctx context.Context, run string) (*protocol.Policy, error) {
	var pol *protocol.Policy
	started := false
	rctx, cancel := jsCall(ctx)
	defer cancel()
	_, err := c.trace.Each(rctx, run, func(r *protocol.Record) error {
		switch r.Kind {
		case protocol.RecordStarted:
			if r.Contract == nil {
				return protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: its started record has no contract", run)
			}
			started, pol = true, cmp.Or(r.Policy, r.Contract.Policy)
		case protocol.RecordPolicy:
			pol = r.Policy
		}
		return nil
	})
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, protocol.Errorf(protocol.CodeUnavailable, "read the trace of run %s: %s", run, err.Error())
	}
	if !started {
		return nil, protocol.FieldError(protocol.CodeUnknownRun, "parent", "name a run that is running, or leave parent out to start a tree of its own",
			"no run %s to be a sub-agent of", run)
	}
	if pol == nil {
		return policy.Default().Protocol(), nil
	}
	return pol, nil
}

// runIDOf names the run of a submitted message: from its idempotency key
// when it has one, else from the time and sequence it was stored at.
// A tenant's contract (on harness.submit.<tenant>) gets t-<tenant>- in front,
// so its events are copied to the tenant's subjects.
func (c *Coordinator) runIDOf(msg jetstream.Msg) string {
	id := ""
	if key := msg.Headers().Get(jetstream.MsgIDHeader); key != "" {
		id = protocol.RunIDFor(key)
	} else if meta, err := msg.Metadata(); err != nil {
		id = "r" + randomHex(8)
	} else {
		id = meta.Timestamp.UTC().Format("20060102-150405") + "-s" + strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	return runIDFor(msg.Subject(), id)
}

// runIDFor is the id of the run of a contract submitted on subject whose
// own id is id: a tenant's has t-<tenant>- in front.
func runIDFor(subject, id string) string {
	if tenant, ok := wire.SubmitTenant(subject); ok {
		if strings.HasPrefix(id, wire.TenantRun(tenant, "")) {
			return id // already the tenant's: a sub-agent's id, submitted by its parent's coordinator
		}
		return wire.TenantRun(tenant, id)
	}
	return id
}

// answer says what became of a submitted message: on its Harness-Reply
// subject, if it asked there, and to the coordinator that heard it asked
// for as a request.
func (c *Coordinator) answer(msg jetstream.Msg, reply string, r *protocol.SubmitReply) {
	c.respond(reply, r)
	c.tellAnswer(msg, r)
}

func (c *Coordinator) respond(subject string, r *protocol.SubmitReply) {
	if subject == "" {
		return
	}
	data, _ := json.Marshal(r)
	if err := c.nc.Publish(subject, data); err != nil {
		c.log.Warn("reply to submitter", "err", err)
	}
}
