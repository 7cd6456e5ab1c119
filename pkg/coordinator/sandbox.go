package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// resendInterval is how long a sandbox operation's request waits for an
// answer before it is sent again under the same op id.
const resendInterval = 5 * time.Second

// requestBackoff is how request waits before it sends an op again to a
// sandboxer that could not be reached.
var requestBackoff = backoff{wait: 250 * time.Millisecond}

// request sends a sandbox operation and decodes the reply: the open of a
// root, which every sandboxer serving it answers, as openRoot does.
func (c *Coordinator) request(ctx context.Context, subject string, op *protocol.SandboxOp, timeout time.Duration) (*protocol.SandboxReply, error) {
	if subject == wire.SandboxOpenSubject {
		return c.openRoot(ctx, op, timeout)
	}
	return c.requestUntilGone(ctx, subject, op, timeout, 0)
}

// errNodeGone is requestUntilGone's: the node gave no sign of life for
// as long as it was given.
var errNodeGone = errors.New("the sandboxer does not answer")

// requestUntilGone is request to one node that gives up, with
// errNodeGone, once nobody has listened on its subject for gone (it died,
// or lost its connection); 0 waits for it until the op's time is up.
func (c *Coordinator) requestUntilGone(ctx context.Context, subject string, op *protocol.SandboxOp, timeout, gone time.Duration) (*protocol.SandboxReply, error) {
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
	// reply may be what was lost (NATS restarted under it). The open of
	// a snapshot goes to a queue group, and is asked again by open (a
	// root's goes to every sandboxer, by openRoot).
	direct := subject != wire.SandboxSnapshotSubject
	var m *nats.Msg
	var unheard time.Time // since when the subject has had no responders
	_ = retrying(rctx, requestBackoff, func() error {
		actx, acancel := rctx, context.CancelFunc(func() {})
		if direct {
			actx, acancel = context.WithTimeout(rctx, resendInterval)
		}
		m, err = c.nc.RequestWithContext(actx, subject, data)
		acancel()
		if err == nil || rctx.Err() != nil || !direct {
			return done(err)
		}
		if !errors.Is(err, nats.ErrNoResponders) {
			unheard = time.Time{} // the node is there, or this coordinator's own connection is not
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return again(0) // unanswered within resendInterval: ask again
		}
		if errors.Is(err, nats.ErrNoResponders) && gone > 0 {
			if unheard.IsZero() {
				unheard = time.Now()
			} else if time.Since(unheard) >= gone {
				err = errNodeGone
				return done(err)
			}
		}
		if !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
			errors.Is(err, nats.ErrDisconnected)) {
			return done(err)
		}
		return err
	})
	if err != nil {
		return nil, err // the last request's error, also when the op's time ran out in a wait
	}
	return decodeReply(m.Data)
}

// decodeReply decodes a sandboxer's answer to an op.
func decodeReply(data []byte) (*protocol.SandboxReply, error) {
	var reply protocol.SandboxReply
	if err := wirejson.Unmarshal(data, &reply); err != nil {
		return nil, fmt.Errorf("undecodable sandbox reply: %w", err)
	}
	return &reply, nil
}

// closeOp is the op that gives run's workspace, of tree, back to a
// sandboxer: the open named (its stamp), or whatever opened it for 0.
func closeOp(run, tree string, opened uint64) *protocol.SandboxOp {
	return &protocol.SandboxOp{OpID: run + ".close", Run: run, Kind: protocol.OpClose, Tree: tree, Opened: opened}
}

// nodeGone is how long the sandboxer holding a run's root may have
// nobody listening on its subject before the run goes on with another.
var nodeGone = 5 * time.Second

// nodeRequest sends op, of step, to the sandboxer holding the run's workspace. A
// root is served by every sandboxer whose roots include it, so when its
// holder has been gone for nodeGone (killed, or cut off from NATS) the
// workspace is opened on another and the op sent there under the same
// id: the ops bucket they share answers for a change the first began,
// as it does for a run taken over. A snapshot's workspace lives on its
// holder alone, which is waited for until the op's time is up.
func (d *driver) nodeRequest(ctx context.Context, step int, op *protocol.SandboxOp, timeout time.Duration) (*protocol.SandboxReply, error) {
	if d.s.contract.Workspace.Snapshot != "" {
		return d.c.request(ctx, wire.SandboxOps(d.node), op, timeout)
	}
	deadline := time.Now().Add(timeout)
	for {
		reply, err := d.c.requestUntilGone(ctx, wire.SandboxOps(d.node), op, time.Until(deadline), nodeGone)
		if !errors.Is(err, errNodeGone) {
			return reply, err
		}
		gone := d.node
		d.log.Warn("the sandboxer holding the workspace is gone; opening it on another", "sandboxer", gone, "op", op.OpID)
		if err := d.open(ctx); err != nil {
			return nil, err
		}
		if d.node != gone {
			// Should it come back, it lets go of the run's workspace and
			// its MCP servers rather than keep them until it restarts.
			go d.closeOn(gone)
			ev := &protocol.Event{Target: d.node, Text: fmt.Sprintf("sandboxer %s did not answer for %s; the workspace was opened on %s", gone, nodeGone, d.node)}
			if op.Call != nil {
				ev.Tool = op.Call.Name
			}
			d.c.emit(d.s.run, step, protocol.EventWorkspaceMoved, ev)
		}
		if !time.Now().Before(deadline) {
			return nil, errNodeGone
		}
	}
}

// opTimeout bounds a tool call's or a verification's op: the contract's
// wall-clock cap of a command, and Config.OpTimeout beyond it.
func (d *driver) opTimeout() time.Duration {
	return time.Duration(d.s.contract.Sandbox.Limits.WallSecs)*time.Second + d.c.cfg.OpTimeout
}

// dispatch sends an allowed call to the sandboxer under an op id and
// returns its observation.
func (d *driver) dispatch(ctx context.Context, step int, opID string, call *protocol.ToolCall, approval string) *protocol.Observation {
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	op := &protocol.SandboxOp{OpID: opID, Run: d.s.run, Kind: protocol.OpTool,
		Workspace: d.s.contract.Workspace.Dir(), Call: call, Sandbox: &d.s.contract.Sandbox, Policy: d.wirePolicy(), Approval: approval,
		Git: d.s.contract.Git, Tree: d.s.tree}
	if call.Name == ReadSkillTool {
		// The read of a skill of a skills snapshot: a sandboxer that no
		// longer holds the run's copy (it restarted) unpacks it again.
		op.Skills = d.s.contract.Skills
	}
	_, _, isMCP := protocol.SplitMCPTool(call.Name)
	if isMCP {
		// The servers go with the call, so a sandboxer that lost the
		// session (it restarted) opens it again.
		op.MCP = d.s.contract.MCP
		began := time.Now()
		defer func() { d.mcpCalled(step, obs, time.Since(began)) }()
	}
	if wt, ok := d.workerTools[call.Name]; ok {
		return d.workerCall(ctx, op, wt, obs)
	}
	reply, err := d.nodeRequest(ctx, step, op, d.opTimeout())
	if err == nil {
		d.mcpLostIn(step, reply.MCP)
	}
	switch {
	case err != nil:
		obs.Status, obs.IsError = protocol.CallUnanswered, true
		obs.Content = "[tool failed] the sandboxer did not answer: " + err.Error() + ". The call may or may not have taken effect; look before you repeat it."
	case reply.Error != nil:
		obs.Status, obs.IsError = protocol.CallFailed, true
		obs.Content = "[tool failed] " + reply.Error.Message
	case reply.Observation != nil:
		*obs = *reply.Observation
		obs.CallID, obs.Tool = call.ID, call.Name
		obs.Status = obs.State() // a sandboxer of an earlier build sets none
	}
	return obs
}

// check runs the contract's verification on the sandboxer.
func (d *driver) check(ctx context.Context, step int) *protocol.CheckResult {
	defer fault.During(fault.DuringVerification)()
	v := d.s.contract.Verification
	op := &protocol.SandboxOp{OpID: fmt.Sprintf("%s.%d.verify.1", d.s.run, step), Run: d.s.run, Kind: protocol.OpVerify,
		Workspace: d.s.contract.Workspace.Dir(), Verification: &v, Sandbox: &d.s.contract.Sandbox, Policy: d.wirePolicy()}
	reply, err := d.nodeRequest(ctx, step, op, d.opTimeout())
	if err == nil {
		d.mcpLostIn(step, reply.MCP)
	}
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
