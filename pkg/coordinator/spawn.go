package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
)

// SpawnTool is the tool an agent of a tree starts a sub-agent with. It is
// offered only to runs whose root's contract sets a tree budget, and only
// above the tree's depth cap. It is answered by the coordinator, not a
// sandboxer: the sub-agent is a run of its own, submitted like any other
// with the spawning run as its parent, under the parent's policy, on the
// same workspace, drawing from the same tree ceiling.
const SpawnTool = "spawn_agent"

var spawnSpec = protocol.ToolSpec{
	Name: SpawnTool,
	Description: "Start a sub-agent on a part of the task and wait for its outcome. It works in the same workspace under the same " +
		"permissions and draws from the same budget. Its work is done when verify_file contains verify_contains.",
	Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["goal","verify_file","verify_contains"],` +
		`"properties":{"goal":{"type":"string","description":"what the sub-agent should do"},` +
		`"verify_file":{"type":"string","description":"the file, relative to the workspace, that shows the sub-agent is done"},` +
		`"verify_contains":{"type":"string","description":"the text verify_file must contain"},` +
		`"max_steps":{"type":"integer","minimum":1,"description":"at most this many steps (default and cap: this run's own)"}}}`),
}

type spawnArgs struct {
	Goal           string `json:"goal"`
	VerifyFile     string `json:"verify_file"`
	VerifyContains string `json:"verify_contains"`
	MaxSteps       int    `json:"max_steps"`
}

// rootOf returns the started record of s's tree's root.
func (c *Coordinator) rootOf(ctx context.Context, s *runState) (*protocol.Record, error) {
	var root *protocol.Record
	_, err := c.trace.Each(ctx, s.tree, func(r *protocol.Record) error {
		root = r
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	if root == nil || root.Contract == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "the root run %s of the tree has no trace", s.tree)
	}
	return root, nil
}

// offerSpawn adds spawn_agent to the run's tools when its tree takes
// sub-agents: the root asked for a tree budget, this run is above the
// depth cap, and its workspace is a directory every agent can open (a
// snapshot is one run's own copy).
func (d *driver) offerSpawn(ctx context.Context) {
	s := d.s
	if s.contract.Workspace.Root == "" || d.offers(SpawnTool) {
		return
	}
	root := &protocol.Record{Contract: s.contract, Time: s.started}
	if s.tree != s.run {
		r, err := d.c.rootOf(ctx, s)
		if err != nil {
			d.log.Warn("read the tree's root; not offering sub-agents", "err", err)
			return
		}
		root = r
	}
	if root.Contract.Budget.Tree == nil {
		return
	}
	c := ceilingOf(root.Contract, root.Time)
	if c.Agents > 1 && s.depth < c.Depth {
		d.tools = append(d.tools, spawnSpec)
	}
}

// spawn starts a sub-agent for a spawn_agent call and waits for its
// outcome, which is the call's observation. The sub-agent's run id is the
// spawning call's (run, step, call), and its submission carries that id as
// its message id, so a step replayed after a crash finds the sub-agent it
// started instead of starting another.
func (d *driver) spawn(ctx context.Context, step, i int, call *protocol.ToolCall) *protocol.Observation {
	s := d.s
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name, IsError: true}
	var a spawnArgs
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || strings.TrimSpace(a.Goal) == "" || a.VerifyFile == "" || a.VerifyContains == "" {
		obs.Content = "[spawn error] give goal, verify_file and verify_contains (and optionally max_steps)"
		if err != nil {
			obs.Content += ": " + err.Error()
		}
		return obs
	}
	child := *s.contract
	child.Task = a.Goal
	child.Parent = s.run
	child.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: a.VerifyFile, Needle: a.VerifyContains}}
	child.Budget = protocol.Budget{MaxSteps: s.contract.Budget.MaxSteps, MaxWall: s.contract.Budget.MaxWall,
		MaxTokens: s.contract.Budget.MaxTokens, MaxCostMicros: s.contract.Budget.MaxCostMicros}
	if a.MaxSteps > 0 && a.MaxSteps < child.Budget.MaxSteps {
		child.Budget.MaxSteps = a.MaxSteps
	}
	tenant := streams.TenantOf(s.run)
	local := strings.TrimPrefix(s.run, "t-"+tenant+"-")
	id := fmt.Sprintf("%s-s%dc%d", local, step, i)
	run := protocol.RunIDFor(id)
	if tenant != "" {
		run = streams.TenantRun(tenant, run)
	}
	if err := d.submitChild(ctx, tenant, id, &child); err != nil {
		obs.Content = "[spawn error] the sub-agent could not be started: " + err.Error()
		return obs
	}
	d.c.emit(s.run, step, protocol.EventSpawned, &protocol.Event{Tool: SpawnTool, Target: run, Text: clip(a.Goal, 200)})
	d.log.Info("sub-agent started", "child", run, "step", step)
	st, err := d.c.index.Wait(ctx, run, func(st *protocol.RunState) bool {
		return st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed
	})
	if err != nil {
		obs.Content = "[spawn error] the sub-agent's outcome is unknown: " + err.Error()
		return obs
	}
	// The child's id stays out of what the model reads, as the run's own
	// does: a transcript must not depend on which run it is.
	if st.Outcome == protocol.OutcomeRefused && st.Step == 0 && strings.HasPrefix(st.Reason, "ledger:") {
		obs.Content = fmt.Sprintf("[spawn refused] %s", st.Reason)
		return obs
	}
	obs.IsError = st.Outcome != protocol.OutcomeSuccess
	obs.Changed = st.Step > 0 // it may have changed the workspace
	obs.Content = fmt.Sprintf("[child %q -> %s after %d steps] %s", clip(a.Goal, 200), st.Outcome, st.Step, clip(st.Reason, 1000))
	return obs
}

// submitChild submits a sub-agent's contract under id and waits for a
// coordinator to take it. A duplicate submission (the spawning step
// replayed) is the same sub-agent.
func (d *driver) submitChild(ctx context.Context, tenant, id string, c *protocol.Contract) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	inbox := streams.InboxPrefix + nats.NewInbox()[len(streams.InboxPrefix):]
	subject := streams.SubjectSubmit
	if tenant != "" {
		inbox = streams.InboxPrefix + tenant + "." + nats.NewInbox()[len(streams.InboxPrefix):]
		subject = streams.SubmitTenantPrefix + tenant
	}
	sub, err := d.c.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(streams.HeaderReply, inbox)
	ack, err := d.c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
	if err != nil {
		return err
	}
	if ack.Duplicate {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, d.c.cfg.OpenTimeout)
	defer cancel()
	m, err := sub.NextMsgWithContext(wctx)
	if err != nil {
		return fmt.Errorf("no coordinator took it within %s", d.c.cfg.OpenTimeout.Round(time.Second))
	}
	var reply protocol.SubmitReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return err
	}
	if reply.Error != nil {
		return reply.Error
	}
	return nil
}
