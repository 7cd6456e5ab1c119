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

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
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
	Description: "Start a sub-agent on a part of the task and wait for its outcome. It works in the same workspace under your " +
		"permissions (never more; deny_write and deny_net take some away) and draws from the same budget. Its work is done " +
		"when verify_file contains verify_contains.",
	Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["goal","verify_file","verify_contains"],` +
		`"properties":{"goal":{"type":"string","description":"what the sub-agent should do"},` +
		`"verify_file":{"type":"string","description":"the file, relative to the workspace, that shows the sub-agent is done"},` +
		`"verify_contains":{"type":"string","description":"the text verify_file must contain"},` +
		`"max_steps":{"type":"integer","minimum":1,"description":"at most this many steps (default and cap: this run's own)"},` +
		`"deny_write":{"type":"array","items":{"type":"string"},"description":"glob patterns of paths the sub-agent may not write, on top of what you may not"},` +
		`"deny_net":{"type":"array","items":{"type":"string"},"description":"glob patterns of hosts the sub-agent may not connect to, on top of what you may not"}}}`),
}

type spawnArgs struct {
	Goal           string   `json:"goal"`
	VerifyFile     string   `json:"verify_file"`
	VerifyContains string   `json:"verify_contains"`
	MaxSteps       int      `json:"max_steps"`
	DenyWrite      []string `json:"deny_write"`
	DenyNet        []string `json:"deny_net"`
}

// SpawnLayer names the layer of a sub-agent's policy that holds the deny
// rules its parent gave it (spawn_agent's deny_write and deny_net).
const SpawnLayer = "spawn"

// maxSpawnDenies bounds the patterns of one spawn_agent call.
const maxSpawnDenies = 64

// narrowing returns the deny rules a spawn_agent call asks for, or what is
// wrong with them. There is nothing to widen with: the arguments only take
// away.
func (a *spawnArgs) narrowing() ([]policy.Rule, string) {
	if n := len(a.DenyWrite) + len(a.DenyNet); n > maxSpawnDenies {
		return nil, fmt.Sprintf("give at most %d deny_write and deny_net patterns in all, not %d", maxSpawnDenies, n)
	}
	var rules []policy.Rule
	for _, g := range []struct {
		name     string
		act      policy.Act
		patterns []string
	}{{"deny_write", policy.Write, a.DenyWrite}, {"deny_net", policy.Net, a.DenyNet}} {
		for _, p := range g.patterns {
			if strings.TrimSpace(p) == "" || len(p) > 1024 {
				return nil, fmt.Sprintf("every %s pattern is a non-empty glob of at most 1024 bytes, such as \"docs/*\"", g.name)
			}
			rules = append(rules, policy.Rule{Act: g.act, Effect: policy.Deny, Pattern: p})
		}
	}
	return rules, ""
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
	if s.contract.Workspace.Root == "" {
		return
	}
	if d.offers(SpawnTool) {
		d.log.Warn("the sandboxer offers a tool named " + SpawnTool + "; not offering sub-agents")
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
	// max_concurrent 1 is the root's own place: a sub-agent would wait
	// for it for ever.
	if c.Agents > 1 && s.depth < c.Depth && root.Contract.Budget.Tree.MaxConcurrent != 1 {
		d.tools = append(d.tools, spawnSpec)
		d.spawning = true
	}
}

// spawnFailed is the observation of a spawn_agent call whose tree could
// not be read: nothing was started.
func spawnFailed(call *protocol.ToolCall, err error) *protocol.Observation {
	return &protocol.Observation{CallID: call.ID, Tool: call.Name, IsError: true, Status: protocol.CallFailed,
		Content: "[spawn error] the sub-agent could not be started: the tree's root could not be read: " + err.Error()}
}

// startChild starts the sub-agent of a spawn_agent call and waits until a
// coordinator has taken it. Where the tree caps how many of its agents
// run at once (pl), the sub-agent is given a place first, waiting for one
// as long as the run may. It returns the sub-agent's run id and goal, or
// no id and the call's observation when it was refused or not taken.
func (d *driver) startChild(ctx context.Context, step, i int, call *protocol.ToolCall, pl places) (*protocol.Observation, string, string) {
	s := d.s
	// Until the sub-agent has run, the call is refused (nothing started)
	// or failed.
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name, IsError: true, Status: protocol.CallRefused}
	// Every refusal below comes before the sub-agent is submitted, so a
	// refused spawn takes no agent slot of the tree.
	var a spawnArgs
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || strings.TrimSpace(a.Goal) == "" || strings.TrimSpace(a.VerifyFile) == "" || strings.TrimSpace(a.VerifyContains) == "" {
		obs.Content = "[spawn refused] give a goal, a verify_file and the verify_contains text it must hold, none of them empty (and optionally max_steps, deny_write, deny_net)"
		if err != nil {
			obs.Content += ": " + err.Error()
		}
		return obs, "", ""
	}
	denies, bad := a.narrowing()
	if bad != "" {
		obs.Content = "[spawn refused] " + bad
		return obs, "", ""
	}
	child := *s.contract
	child.Task = a.Goal
	child.Parent = s.run
	child.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: a.VerifyFile, Needle: a.VerifyContains}}
	// The check reads the file for the sub-agent: it is judged as a read by
	// this run's own policy (the one the sub-agent is contained in), under
	// an explicit allow, before anything is started.
	if ok, why := gate.Allowed(d.base, child.Verification); !ok {
		obs.Content = "[spawn refused] " + why + " Name a verify_file you may read."
		return obs, "", ""
	}
	// The sub-agent's contract carries this run's effective policy with
	// the denies on top; the coordinator that takes it contains it in this
	// run's policy again, as for any contract naming a parent.
	pol := d.base
	if len(denies) > 0 {
		pol = pol.WithLayer(SpawnLayer, denies...)
	}
	child.Policy = pol.Protocol()
	// The budget is set again after a wait for a place: what the parent
	// has left of its time is less.
	var data []byte
	encode := func() error {
		child.Budget = d.childBudget(a.MaxSteps)
		var err error
		if data, err = json.Marshal(&child); err == nil {
			_, err = protocol.DecodeContract(data) // refused here, not after a submission a replay would take for a start
		}
		return err
	}
	if err := encode(); err != nil {
		obs.Content = "[spawn refused] " + err.Error()
		return obs, "", ""
	}
	// The sub-agent's id, and its submission's message id, is the whole
	// id of the spawning call, tenant prefix included, so two tenants'
	// runs never share one.
	run := protocol.RunIDFor(fmt.Sprintf("%s-s%dc%d", s.run, step, i))
	tenant := wire.TenantOf(s.run)
	if tenant != "" && !strings.HasPrefix(run, wire.TenantRun(tenant, "")) {
		run = wire.TenantRun(tenant, run) // a long id hashed: keep it the tenant's
	}
	if r := d.roomForChild(ctx, run, &child); r != nil {
		obs.Content = "[spawn refused] " + r.Error()
		return obs, "", ""
	}
	if pl.limit > 0 {
		queued, refusal := d.placeForChild(ctx, run, pl)
		if refusal != "" {
			obs.Content = "[spawn refused] " + refusal
			return obs, "", ""
		}
		if queued {
			// The tree went on drawing while the spawn waited.
			refused := encode()
			if refused == nil {
				if r := d.roomForChild(ctx, run, &child); r != nil {
					refused = r
				}
			}
			if refused != nil {
				d.freePlace(ctx, run)
				obs.Content = "[spawn refused] " + refused.Error()
				return obs, "", ""
			}
		}
	}
	if err := d.submitChild(tenant, run, data); err != nil {
		if pl.limit > 0 {
			d.freePlace(ctx, run)
		}
		obs.Status, obs.Content = protocol.CallFailed, "[spawn error] the sub-agent could not be started: "+err.Error()
		return obs, "", ""
	}
	// Checked here, the contract cannot be refused by the coordinator
	// that takes it, so nobody waits for its answer: the sub-agent shows
	// up in the run index.
	// The wait holds no run slot: with every slot taken by parents
	// waiting on their sub-agents, none of the sub-agents could start.
	var err error
	var st *protocol.RunState
	_ = d.waitIdle(ctx, func() {
		wctx, cancel := context.WithTimeout(ctx, d.c.cfg.OpenTimeout)
		defer cancel()
		st, err = d.c.index.Wait(wctx, run, func(*protocol.RunState) bool { return true })
	})
	if err != nil {
		// Withdrawn, so that it never runs unseen after its parent was
		// told it did not start: a coordinator that takes it later ends
		// it cancelled before its first step.
		obs.Status = protocol.CallUnanswered
		obs.Content = fmt.Sprintf("[spawn error] no coordinator took the sub-agent within %s; it was withdrawn", d.c.cfg.OpenTimeout.Round(time.Second))
		if werr := d.withdraw(ctx, run); werr != nil {
			d.log.Warn("withdraw a sub-agent no coordinator took", "child", run, "err", werr)
			obs.Content = fmt.Sprintf("[spawn error] no coordinator took the sub-agent within %s; it stays queued and may yet start", d.c.cfg.OpenTimeout.Round(time.Second))
		} else if pl.limit > 0 {
			d.freePlace(ctx, run) // it will not run (one that may yet start keeps its place until the place lapses)
		}
		return obs, "", ""
	}
	if pl.limit > 0 && !runFinished(st) {
		d.claimPlace(ctx, run, pl)
	}
	d.c.emit(s.run, step, protocol.EventSpawned, &protocol.Event{Tool: SpawnTool, Target: run, Text: clip(a.Goal, 200)})
	d.log.Info("sub-agent started", "child", run, "step", step)
	return obs, run, a.Goal
}

// childOutcome is the observation of a spawn_agent call whose sub-agent
// finished in st, and gives back the sub-agent's place among the tree's
// running agents, if the tree caps them (pl): whoever frees it first, this
// or the sub-agent's finish, frees it once.
func (d *driver) childOutcome(ctx context.Context, obs *protocol.Observation, run, goal string, pl places, st *protocol.RunState) *protocol.Observation {
	if pl.limit > 0 {
		d.freePlace(ctx, run)
	}
	// The child's id stays out of what the model reads, as the run's own
	// does: a transcript must not depend on which run it is.
	// A sub-agent the tree had no room for is a refused spawn, whether
	// the ledger refused it at its admission or at its first draw (the
	// room checked before the spawn was taken by siblings meanwhile).
	if (st.Outcome == protocol.OutcomeRefused || st.Outcome == protocol.OutcomeBudgetCeilingReached) && st.Step == 0 && strings.HasPrefix(st.Reason, "ledger:") {
		obs.Content = fmt.Sprintf("[spawn refused] %s", st.Reason)
		return obs
	}
	obs.IsError = st.Outcome != protocol.OutcomeSuccess
	obs.Status = protocol.CallOK
	if obs.IsError {
		obs.Status = protocol.CallFailed
	}
	obs.Changed = st.Step > 0 // it may have changed the workspace
	obs.Content = fmt.Sprintf("[child %q -> %s after %d steps] %s", clip(goal, 200), st.Outcome, st.Step, clip(st.Reason, 1000))
	return obs
}

// spawns is the end of the run of spawn_agent calls that begins at i
// (i itself when calls[i] is none).
func (d *driver) spawns(calls []protocol.ToolCall, i int) int {
	j := i
	for j < len(calls) && calls[j].Name == SpawnTool && d.spawning && d.offers(SpawnTool) {
		j++
	}
	return j
}

// spawnAll carries out consecutive spawn_agent calls (one or more, the
// first the step's call first): their sub-agents are started one after
// the other, in the calls' order, so the tree's caps refuse the same calls
// whatever the timing, and then run side by side while the step waits on
// them parked (kids.go); the observations are in the calls' order. It
// returns the step's wait when it parked on sub-agents, or nil with every
// observation made.
//
// Where the tree caps how many of its agents run at once, a call over the
// cap is not refused: its sub-agent waits for a place (startChild), and
// those after it wait behind it, while the sub-agents started run.
func (d *driver) spawnAll(ctx context.Context, step, first int, calls []protocol.ToolCall) ([]*protocol.Observation, *kidsWait) {
	obs := make([]*protocol.Observation, len(calls))
	pl, plErr := d.treePlaces(ctx)
	var kids []kid
	_ = d.waitIdle(ctx, func() {
		d.asideBegin(ctx, pl)
		for k := range calls {
			d.c.emit(d.s.run, step, protocol.EventToolCall, &protocol.Event{Tool: calls[k].Name, Target: target(&calls[k])})
			if plErr != nil {
				obs[k] = spawnFailed(&calls[k], plErr)
				continue
			}
			o, run, goal := d.startChild(ctx, step, first+k, &calls[k], pl)
			if obs[k] = o; run != "" {
				kids = append(kids, kid{k: k, run: run, goal: goal})
			}
		}
	})
	h := &kidsWait{step: step, next: first + len(calls), obs: obs, kids: kids, pl: pl}
	if len(kids) == 0 {
		d.asideEnd(ctx, pl)
		return obs, nil
	}
	if d.waitKids(ctx, h) {
		return nil, h
	}
	return h.obs, nil
}

// waitIdle runs wait, a wait on other runs (sub-agents), with the run's
// slot lent back to the coordinator, so that the runs waited on can take
// it; a sub-agent paused for a person holds no slot of its parent's
// either. The slot is taken again before waitIdle returns, which may wait
// for one to be free; it returns ctx's error if ctx ended first.
func (d *driver) waitIdle(ctx context.Context, wait func()) error {
	if d.slot == nil || !d.slot.lend() {
		wait()
		return nil
	}
	wait()
	return d.slot.reclaim(ctx)
}

// withdraw records a cancel of a sub-agent that has not started, which
// whoever takes it finds before its first step.
func (d *driver) withdraw(ctx context.Context, run string) error {
	mark := &protocol.Cancel{Run: run, By: d.s.run, Reason: "its parent stopped waiting for it to start", Time: time.Now().UTC()}
	data, err := json.Marshal(mark)
	if err != nil {
		return err
	}
	cctx, cancel := jsCall(ctx)
	defer cancel()
	if _, err := d.c.assets.Cancels.Create(cctx, run, data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return err
	}
	return nil
}

// childBudget is a sub-agent's own budget: no more steps than asked or
// than its parent's, what is left of its parent's own token and cost caps
// (the tree's ceiling holds for both anyway), and its parent's deadline.
// What is left counts the step in hand's draws, not committed yet: the
// turn that asks for the sub-agent was paid for.
func (d *driver) childBudget(steps int) protocol.Budget {
	p := d.s.contract.Budget
	b := protocol.Budget{MaxSteps: p.MaxSteps}
	if steps > 0 && steps < b.MaxSteps {
		b.MaxSteps = steps
	}
	spent := d.s.spent
	for _, dr := range d.draws {
		spent = spent.Add(dr.Spend)
	}
	if p.MaxTokens > 0 {
		b.MaxTokens = max(p.MaxTokens-spent.Tokens(), 1)
	}
	if p.MaxCostMicros > 0 {
		b.MaxCostMicros = max(p.MaxCostMicros-spent.CostMicros, 1)
	}
	if dl := d.s.deadline(); !dl.IsZero() {
		b.MaxWall = protocol.Duration(max(time.Until(dl), time.Millisecond))
	}
	return b
}

// roomForChild returns the refusal a sub-agent's registration or first
// provider call would meet, judged before it is submitted: a sub-agent
// refused after it registers would hold one of the tree's agent slots for
// nothing. The tree is read from the ledger; a ledger that does not answer
// refuses nothing here (the sub-agent's own admission still decides). The
// first call's estimate is that of a request holding the task alone. A
// sub-agent already there (a step replayed after a crash) is found again,
// never refused.
func (d *driver) roomForChild(ctx context.Context, run string, child *protocol.Contract) *ledger.Refusal {
	s := d.s
	if _, err := d.c.index.Get(ctx, run); err == nil {
		return nil
	}
	// Its first call is estimated as it will be reserved: on the whole
	// step task, the policy that goes with it included.
	task := protocol.StepTask{Run: run, Step: 1, Attempt: 1, Policy: child.Policy, Deadline: s.deadline(), Expires: time.Now(),
		Transcript: transcriptName(randomHex(8), 1),
		Request: protocol.CompletionRequest{Model: child.Provider.Model, System: systemPrompt, Tools: d.tools, MaxOutputTokens: child.Provider.MaxOutputTokens,
			Messages: []protocol.Message{{Role: protocol.RoleUser, Content: taskMessage(child)}}}}
	data, _ := json.Marshal(&task)
	est := d.estimate(len(data))
	own := ledger.Limits{Tokens: child.Budget.MaxTokens, CostMicros: child.Budget.MaxCostMicros}
	if r := exceeds(own, ledger.Usage{}, est); r != nil {
		r.Tree, r.Agent, r.Scope = s.tree, s.run, ledger.ScopeRun
		return r
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := d.c.ledger.Totals(tctx, s.tree)
	if _, ok := t.Agents[run]; err != nil || ok {
		return nil
	}
	if c := t.Ceiling; c.Agents > 0 && len(t.Agents) >= c.Agents {
		return &ledger.Refusal{Tree: s.tree, Agent: s.run, Scope: ledger.ScopeTree, Dimension: ledger.DimAgents, Asked: 1, Limit: int64(c.Agents)}
	}
	if dl, ok := t.Ceiling.Deadline(); ok && !time.Now().Before(dl) {
		return &ledger.Refusal{Tree: s.tree, Agent: s.run, Scope: ledger.ScopeTree, Dimension: ledger.DimWall, Limit: t.Ceiling.Wall.Microseconds(), Deadline: dl}
	}
	if r := exceeds(t.Ceiling.Limits, t.Spent.Add(t.Reserved), est); r != nil {
		r.Tree, r.Agent, r.Scope = s.tree, s.run, ledger.ScopeTree
		return r
	}
	return nil
}

// exceeds returns the refusal of drawing est where used is drawn of the
// caps c (zero for none), as the ledger words it, or nil when it fits.
func exceeds(c ledger.Limits, used, est ledger.Usage) *ledger.Refusal {
	for _, x := range []struct {
		dim        ledger.Dimension
		cap, u, at int64
	}{
		{ledger.DimInputTokens, c.InputTokens, used.InputTokens, est.InputTokens},
		{ledger.DimOutputTokens, c.OutputTokens, used.OutputTokens, est.OutputTokens},
		{ledger.DimTokens, c.Tokens, used.Tokens(), est.Tokens()},
		{ledger.DimCost, c.CostMicros, used.CostMicros, est.CostMicros},
		{ledger.DimSteps, c.Steps, used.Steps, est.Steps},
	} {
		if x.cap > 0 && x.u+x.at > x.cap {
			return &ledger.Refusal{Dimension: x.dim, Asked: x.at, Remaining: max(0, x.cap-x.u), Limit: x.cap}
		}
	}
	return nil
}

// submitChild submits a sub-agent's contract under id, on its tenant's
// subject, with id as the message id: a step replayed within the submit
// stream's duplicate window submits nothing new, and one replayed later is
// answered by the coordinator that holds the sub-agent. The stream does
// not acknowledge it: the parent waits to see the sub-agent in the run
// index instead, and withdraws it when it does not show.
func (d *driver) submitChild(tenant, id string, data []byte) error {
	subject := wire.SubjectSubmit
	if tenant != "" {
		subject = wire.SubmitTenantPrefix + tenant
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, id)
	return d.c.nc.PublishMsg(msg)
}
