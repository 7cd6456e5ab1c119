package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/retry"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 5 * time.Second

// Config configures a coordinator. The zero value means the defaults.
type Config struct {
	// ID names this coordinator in the trace, its micro service and logs;
	// default "coordinator-<random>".
	ID string
	// MaxRuns bounds the runs this coordinator drives at once; default 64.
	MaxRuns int
	// TurnTimeout bounds the wait for one turn before the step task is
	// published again as a new attempt; default 10 minutes.
	TurnTimeout time.Duration
	// RepublishInterval is how often a coordinator waiting for a turn
	// looks for it in the turns stream and publishes its step task again
	// under the same message id, which recovers a task a NATS restart lost;
	// default 5 seconds.
	RepublishInterval time.Duration
	// OpTimeout bounds a sandbox operation beyond its own wall-clock cap;
	// default 30 seconds.
	OpTimeout time.Duration
	// OpenTimeout bounds the wait for a sandboxer to take a workspace; a
	// run that finds none by then ends failed. Default 60 seconds.
	OpenTimeout time.Duration
	// Retry says when a provider failure is tried again: only retryable
	// failures, with doubling back-off from Base to Max, a server's
	// Retry-After honoured as is, at most MaxRetries times, and never a
	// wait that would outlast the run's wall clock (the run escalates at
	// once instead). The zero value is retry.Policy's defaults:
	// 500 ms, 30 s, 2 retries.
	Retry retry.Policy
	// InlineLimit is the largest observation or turn text kept inside a
	// trace record; larger content goes to the blob store; default 4 KiB.
	InlineLimit int
	// LeaseTTL is how long a run's lease lasts unrenewed; the holder
	// renews it every third of that. A run whose coordinator dies is taken
	// over within about LeaseTTL plus TakeoverInterval. Default 5 seconds.
	LeaseTTL time.Duration
	// TakeoverInterval is how often the coordinator looks for runs whose
	// lease ran out; default 1 second.
	TakeoverInterval time.Duration
	// Retention is how long a finished run is kept: its trace, index
	// entry, approvals and cancel are forgotten that long after it ended.
	// Default DefaultRetention (30 days); negative keeps runs for ever. A
	// run running or paused is never forgotten.
	Retention time.Duration
	// PruneInterval is how often the coordinator forgets the runs past
	// Retention; default 1 hour.
	PruneInterval time.Duration
	// NoTakeover stops this coordinator from taking over other
	// coordinators' runs on its own (the embedded `harness run` sets it:
	// it serves one workspace). Resume still works.
	NoTakeover bool
	// Prices is the price table each provider call's cost is computed
	// from and recorded in the trace; default none (every call unpriced,
	// and recorded as such).
	Prices ledger.Prices
	// Ledger is the budget ledger every provider call draws on: a Redis
	// ledger shared by every coordinator of a deployment, so an agent
	// tree's ceiling holds across machines. Default a Memory ledger, which
	// holds for the runs of this coordinator alone (the embedded default);
	// either way a lost ledger is rebuilt from the trace.
	Ledger ledger.Ledger
	// Approver answers what the policy asks a person; default Durable,
	// which defers every ask to a person and pauses the run.
	Approver Approver
	// Metrics is the registry the coordinator's Prometheus metrics are
	// registered on (runs by outcome, steps and their latency, ledger draws
	// and refusals; see internal/metrics); default none: they are counted
	// and not served.
	Metrics prometheus.Registerer
	// Logger receives structured logs; default discards them.
	Logger *slog.Logger
	// Streams tunes the streams and buckets New ensures (wire.Ensure):
	// their replication factor, how long turns are kept.
	Streams wire.Config
	// Assets are the streams and buckets when the caller has ensured them
	// already on this connection (wire.Ensure, as a role's main does while
	// the cluster forms); nil has New ensure them.
	Assets *wire.Assets
}

func (c *Config) setDefaults() {
	if c.ID == "" {
		c.ID = "coordinator-" + randomHex(4)
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = 64
	}
	if c.TurnTimeout == 0 {
		c.TurnTimeout = 10 * time.Minute
	}
	if c.RepublishInterval == 0 {
		c.RepublishInterval = 5 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 30 * time.Second
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = 60 * time.Second
	}
	if c.InlineLimit == 0 {
		c.InlineLimit = 4 << 10
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.TakeoverInterval == 0 {
		c.TakeoverInterval = time.Second
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = time.Hour
	}
	if c.Approver == nil {
		c.Approver = Durable{}
	}
	if c.Ledger == nil {
		c.Ledger = ledger.NewMemory()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.ID != "" && !protocol.ValidToken(c.ID) {
		return fmt.Errorf("coordinator id %q: use letters, digits, '-' and '_'", c.ID)
	}
	if c.MaxRuns < 0 {
		return errors.New("coordinator: MaxRuns must not be negative")
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	return nil
}

// Coordinator drives runs. Create it with New.
type Coordinator struct {
	cfg       Config
	nc        *nats.Conn
	js        jetstream.JetStream
	assets    *wire.Assets
	trace     *trace.Trace
	index     *trace.Index
	blobs     *trace.Blobs
	leases    *leases
	approvals *trace.Approvals
	ledger    ledger.Ledger
	metrics   *metrics.Coordinator
	log       *slog.Logger

	slots    chan struct{} // one per run in hand
	wg       sync.WaitGroup
	stopMu   sync.Mutex // guards stopping and every wg.Add; taken before mu
	stopping bool

	mu     sync.Mutex
	active map[string]bool // runs this coordinator is driving
	// stops ends the driver of each run driven here, with the cancel that
	// stopped it as the cause.
	stops map[string]context.CancelCauseFunc

	ready     chan struct{} // closed once Run serves
	readyOnce sync.Once
}

// New returns a coordinator over an established NATS connection. It
// ensures the streams and buckets of pkg/wire (cfg.Streams tunes them), so
// it may come up before any other role.
//
// Errors: an invalid Config; JetStream is not enabled; those of
// wire.Ensure (a *wire.PermissionError when these credentials may not
// create the streams).
func New(nc *nats.Conn, cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("coordinator: jetstream: %w", err)
	}
	assets := cfg.Assets
	if assets == nil {
		if assets, err = wire.Ensure(context.Background(), js, cfg.Streams); err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
	}
	traces := trace.New(js, assets.Trace)
	c := &Coordinator{
		cfg:       cfg,
		nc:        nc,
		js:        js,
		assets:    assets,
		trace:     traces,
		index:     trace.NewIndex(assets.Runs, js),
		blobs:     trace.NewBlobs(assets.Blobs),
		leases:    &leases{kv: assets.Leases, owner: cfg.ID, ttl: cfg.LeaseTTL, now: time.Now},
		approvals: trace.NewApprovals(assets.Approvals, traces),
		ledger:    cfg.Ledger,
		metrics:   metrics.NewCoordinator(cfg.Metrics),
		log:       cfg.Logger.With("coordinator", cfg.ID),
		slots:     make(chan struct{}, cfg.MaxRuns),
		active:    make(map[string]bool),
		stops:     make(map[string]context.CancelCauseFunc),
		ready:     make(chan struct{}),
	}
	metrics.RegisterCluster(cfg.Metrics, c.clusterState)
	return c, nil
}

// ID returns the coordinator's id.
func (c *Coordinator) ID() string { return c.cfg.ID }

// Run takes submitted contracts and drives their runs until ctx ends, then
// waits for the runs in hand to reach a step boundary and returns. Errors:
// the consumer or micro service could not be set up.
func (c *Coordinator) Run(ctx context.Context) error {
	svc, err := micro.AddService(c.nc, micro.Config{
		Name:        "harness-coordinator",
		Version:     version.Semver(),
		Description: "drives harness runs: loop, trace, stop conditions",
		Metadata:    map[string]string{"id": c.cfg.ID},
	})
	if err != nil {
		return fmt.Errorf("register micro service: %w", err)
	}
	defer svc.Stop()
	if err := svc.AddEndpoint("decide", micro.HandlerFunc(func(r micro.Request) { c.handleDecide(ctx, r) }),
		micro.WithEndpointSubject(wire.DecidePrefix+">")); err != nil {
		return fmt.Errorf("register decide endpoint: %w", err)
	}
	if err := svc.AddEndpoint("resume", micro.HandlerFunc(func(r micro.Request) { c.handleResume(ctx, r) }),
		micro.WithEndpointSubject(wire.ResumePrefix+">")); err != nil {
		return fmt.Errorf("register resume endpoint: %w", err)
	}
	if err := svc.AddEndpoint("cancel", micro.HandlerFunc(func(r micro.Request) { c.handleCancel(ctx, r) }),
		micro.WithEndpointSubject(wire.CancelPrefix+">")); err != nil {
		return fmt.Errorf("register cancel endpoint: %w", err)
	}
	if err := svc.AddEndpoint("status", micro.HandlerFunc(c.handleStatus),
		micro.WithEndpointSubject(wire.CoordinatorStatus(c.cfg.ID))); err != nil {
		return fmt.Errorf("register status endpoint: %w", err)
	}

	cons, err := wire.EnsureCoordinatorConsumer(ctx, c.assets)
	if err != nil {
		return err
	}
	// The callback takes a slot before it accepts a contract and blocks
	// while every slot is busy, which holds back the next pull: at most
	// MaxRuns runs are in hand, and the rest wait in the stream.
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			_ = msg.Nak()
			return
		}
		c.accept(ctx, msg)
	}, jetstream.PullMaxMessages(1))
	if err != nil {
		return fmt.Errorf("consume %s: %w", wire.StreamSubmit, err)
	}
	c.log.Info("coordinator started", "max_runs", c.cfg.MaxRuns)
	c.readyOnce.Do(func() { close(c.ready) })
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.watchCancels(ctx)
	}()
	if c.cfg.Retention > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.prune(ctx)
		}()
	}
	if !c.cfg.NoTakeover {
		c.wg.Add(2)
		go func() {
			defer c.wg.Done()
			c.takeOver(ctx)
		}()
		go func() {
			defer c.wg.Done()
			c.carryOnDecided(ctx)
		}()
	}
	<-ctx.Done()
	cc.Stop()
	c.stopMu.Lock()
	c.stopping = true
	c.stopMu.Unlock()
	c.wg.Wait()
	return nil
}

// handleDecide records a decision sent as a plain NATS request.
func (c *Coordinator) handleDecide(ctx context.Context, r micro.Request) {
	type answer struct {
		Approval *protocol.Approval `json:"approval,omitempty"`
		Error    *protocol.Error    `json:"error,omitempty"`
	}
	id := strings.TrimPrefix(r.Subject(), wire.DecidePrefix)
	if _, _, _, err := protocol.ParseApprovalID(id); err != nil {
		respondJSON(r, answer{Error: protocol.AsError(err)}, protocol.AsError(err))
		return
	}
	var d protocol.Decision
	dec := json.NewDecoder(bytes.NewReader(r.Data()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		e := protocol.FieldError(protocol.CodeMalformed, "", `send a decision such as {"approve": true} or {"approve": false, "reason": "..."}`,
			"the decision is not valid JSON: %s", err.Error())
		respondJSON(r, answer{Error: e}, e)
		return
	}
	d.By = decider(r.Headers(), d.By)
	ap, err := c.approvals.Decide(ctx, id, &d)
	if err != nil {
		respondJSON(r, answer{Error: protocol.AsError(err)}, protocol.AsError(err))
		return
	}
	c.log.Info("decision recorded", "approval", id, "approve", d.Approve, "by", d.By)
	_ = r.RespondJSON(answer{Approval: ap})
}

// handleResume carries a run on at a client's request: the package's
// Resume for a cluster rather than for the process it runs in.
func (c *Coordinator) handleResume(ctx context.Context, r micro.Request) {
	reply := func(e *protocol.Error) { respondJSON(r, protocol.ResumeReply{Coordinator: c.cfg.ID, Error: e}, e) }
	run := strings.TrimPrefix(r.Subject(), wire.ResumePrefix)
	if !protocol.ValidToken(run) {
		reply(protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", run))
		return
	}
	var req protocol.ResumeRequest
	if len(bytes.TrimSpace(r.Data())) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Data()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply(protocol.FieldError(protocol.CodeMalformed, "", `send {} to keep the stored policy, or {"policy": {...}}`,
				"the resume request is not valid JSON: %s", err.Error()))
			return
		}
	}
	since := time.Now().UTC()
	err := c.ResumeWith(ctx, run, req.Policy)
	ans := protocol.ResumeReply{Coordinator: c.cfg.ID}
	switch {
	case errors.Is(err, errNoRoom):
		ans.Error = protocol.Errorf(protocol.CodeUnavailable, "coordinator %s has no room for another run; ask again", c.cfg.ID)
	case err != nil:
		ans.Error = protocol.AsError(err)
	default:
		ans.Since = since
		c.log.Info("run resumed at a client's request", "run", run, "policy", req.Policy != nil)
	}
	respondJSON(r, ans, ans.Error)
}

// respondJSON answers a micro request with v; with e set, as a service
// error (Nats-Service-Error headers, the same JSON as the body), so `nats
// micro stats` counts it among the endpoint's errors.
func respondJSON(r micro.Request, v any, e *protocol.Error) {
	if e == nil {
		_ = r.RespondJSON(v)
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	_ = r.Error(strconv.Itoa(int(e.Code)), e.Message, data)
}

// decider names who sent a decision over NATS: the user of the connection
// when the server says it (the request info header a server adds to a
// request crossing an account's service import, which the sender cannot
// set: the server replaces it), else what the decider stated, else "nats".
// Within one account the header is the sender's own; the name is then
// only as good as the decider's word, like a stated one.
func decider(h micro.Headers, stated string) string {
	var info struct {
		Account string `json:"acc"`
		User    string `json:"user"`
	}
	if raw := h.Get(requestInfoHeader); raw != "" && json.Unmarshal([]byte(raw), &info) == nil && info.User != "" {
		if info.Account != "" {
			return "nats:" + info.User + "@" + info.Account
		}
		return "nats:" + info.User
	}
	return cmp.Or(strings.TrimSpace(stated), "nats")
}

// requestInfoHeader is the header a NATS server adds to a request that
// crosses a service import, with the requester's connection.
const requestInfoHeader = "Nats-Request-Info"

func (c *Coordinator) handleStatus(req micro.Request) {
	c.mu.Lock()
	runs := make([]string, 0, len(c.active))
	for r := range c.active {
		runs = append(runs, r)
	}
	c.mu.Unlock()
	_ = req.RespondJSON(map[string]any{"id": c.cfg.ID, "runs": runs, "max_runs": c.cfg.MaxRuns})
}

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
		c.respond(reply, &protocol.SubmitReply{Run: run})
		_ = msg.Ack()
		return
	}
	ls, err := c.leases.acquire(ctx, run)
	if err != nil {
		// Another coordinator holds the run. If it got as far as starting
		// it, the run is in hand; if not, it may have died first, so the
		// contract goes back to the stream until its lease runs out.
		if recs, _, rerr := c.trace.Read(ctx, run); rerr == nil && len(recs) > 0 {
			c.respond(reply, &protocol.SubmitReply{Run: run})
			_ = msg.Ack()
		} else {
			_ = msg.NakWithDelay(c.cfg.LeaseTTL)
		}
		return
	}
	recs, last, err := c.trace.Read(ctx, run)
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
		started := &protocol.Record{Kind: protocol.RecordStarted, Contract: contract, Coordinator: c.cfg.ID, Time: time.Now().UTC(),
			Tree: tree, Depth: depth, Policy: eff, ParentPolicy: parentEff}
		w := c.trace.Writer(run, 0)
		if err := w.Append(ctx, started); err != nil {
			c.log.Error("start run", "run", run, "err", err)
			c.leases.release(ctx, ls)
			_ = msg.Nak()
			return
		}
		recs, last = []protocol.Record{*started}, w.LastSeq()
		c.putState(ctx, &protocol.RunState{Run: run, Status: protocol.StatusRunning, Task: contract.Task,
			Coordinator: c.cfg.ID, Started: started.Time, Tree: tree, Parent: contract.Parent,
			Budgets: &protocol.Budgets{Tree: tree, Depth: depth}, Pool: contract.Provider.Pool, Tenant: wire.TenantOf(run)})
		c.emit(run, 0, protocol.EventStarted, &protocol.Event{Text: contract.Task})
		c.metrics.RunStarted()
	}
	c.respond(reply, &protocol.SubmitReply{Run: run})
	_ = msg.Ack()
	c.start(ctx, run, recs, last, ls, sl.pass())
}

// reject refuses a submitted contract so that it is seen: the answer on
// its Harness-Reply subject, an event on harness.events.rejected.<code>
// (and the tenant's copy), a count by code, and a log line naming the
// message (its id and stream sequence). run is "" when the contract did
// not decode far enough to have one.
func (c *Coordinator) reject(msg jetstream.Msg, reply, run string, err error) {
	pe := protocol.AsError(err)
	var seq uint64
	if meta, merr := msg.Metadata(); merr == nil {
		seq = meta.Sequence.Stream
	}
	msgID := msg.Headers().Get(jetstream.MsgIDHeader)
	c.log.Info("contract refused", "run", run, "msg_id", msgID, "seq", seq, "subject", msg.Subject(), "code", pe.Name, "err", pe)
	c.metrics.ContractRejected(pe.Name)
	c.respond(reply, &protocol.SubmitReply{Error: pe})
	ev := &protocol.Event{Run: run, Kind: protocol.EventRejected, Time: time.Now().UTC(), Error: pe, Text: msgID, IsError: true}
	data, jerr := json.Marshal(ev)
	if jerr != nil {
		return
	}
	_ = c.nc.Publish(wire.Rejected(pe.Name), data)
	if tenant, ok := wire.SubmitTenant(msg.Subject()); ok {
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

// start drives a run this coordinator holds the lease of, on its own
// goroutine. It owns sl, given back when the driver ends, or at once when
// no driver starts.
func (c *Coordinator) start(ctx context.Context, run string, recs []protocol.Record, last uint64, ls *lease, sl *slot) {
	defer sl.release()
	c.mu.Lock()
	if c.active[run] {
		c.mu.Unlock()
		return
	}
	c.active[run] = true
	c.mu.Unlock()
	c.stopMu.Lock()
	if c.stopping {
		c.stopMu.Unlock()
		c.mu.Lock()
		delete(c.active, run)
		c.mu.Unlock()
		return // the lease is kept, to run out, as for a run left unfinished
	}
	c.wg.Add(1)
	c.stopMu.Unlock()
	own := sl.pass()
	go func() {
		defer c.wg.Done()
		unfinished := false
		defer func() {
			c.mu.Lock()
			delete(c.active, run)
			c.mu.Unlock()
			// A run left unfinished keeps its lease: another coordinator
			// finds the run by its expired lease and takes it over.
			// Deleting it would leave the run running with no lease, which
			// no coordinator ever looks for. A coordinator stopping hands
			// the lease over (expired now), so the run is taken over at
			// once; one whose lease was lost to a NATS outage leaves it to
			// run out.
			switch {
			case !unfinished:
				c.leases.release(context.Background(), ls)
			case ctx.Err() != nil:
				hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if err := c.leases.handOver(hctx, ls); err != nil {
					c.log.Warn("hand the run over", "run", run, "err", err)
				} else {
					c.log.Info("run handed over", "run", run)
				}
				cancel()
			}
			own.release()
		}()
		rctx, cancel := context.WithCancel(ctx)
		held := make(chan struct{})
		go func() {
			defer close(held)
			c.hold(rctx, cancel, ls)
		}()
		// A cancel ends the driver's context, not the lease's: the run is
		// ended under its lease.
		dctx, stop := context.WithCancelCause(rctx)
		c.mu.Lock()
		c.stops[run] = stop
		c.mu.Unlock()
		c.metrics.Driving(1)
		c.drive(rctx, dctx, run, recs, last)
		c.metrics.Driving(-1)
		c.mu.Lock()
		delete(c.stops, run)
		c.mu.Unlock()
		stop(nil)
		// The driver stops early only when its context ends: the lease was
		// lost or this coordinator is stopping.
		unfinished = rctx.Err() != nil
		cancel()
		<-held // the lease is ours alone again before it is given back
	}()
}

// hold renews a lease until ctx ends; if the lease is lost, it cancels the
// run's driver, which stops at its next step boundary (and is fenced out
// of the trace should it try to write).
func (c *Coordinator) hold(ctx context.Context, cancel context.CancelFunc, ls *lease) {
	t := time.NewTicker(c.cfg.LeaseTTL / 3)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := c.leases.renew(ctx, ls)
			switch {
			case err == nil:
				lastOK = time.Now()
			case errors.Is(err, errHeld) || time.Since(lastOK) >= c.cfg.LeaseTTL:
				c.log.Warn("lease lost; stopping the run here", "run", ls.run, "err", err)
				cancel()
				return
			default:
				c.log.Warn("renew lease", "run", ls.run, "err", err)
			}
		}
	}
}

// driving reports whether this coordinator is driving run.
func (c *Coordinator) driving(run string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active[run]
}

// takeOver drives the runs whose lease ran out: their coordinator died or
// stopped without finishing them. It checks every TakeoverInterval.
func (c *Coordinator) takeOver(ctx context.Context) {
	t := time.NewTicker(c.cfg.TakeoverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runs, err := c.leases.expired(ctx)
		if err != nil {
			c.log.Debug("list leases", "err", err)
			continue
		}
		for _, run := range runs {
			if c.driving(run) {
				continue
			}
			switch err := c.Resume(ctx, run); {
			case err == nil:
				c.metrics.TakenOver()
			case !errors.Is(err, protocol.ErrFenced) && !errors.Is(err, errNoRoom):
				c.log.Warn("take over run", "run", run, "err", err)
			}
		}
	}
}

// carryOnDecided watches the approvals and carries on every paused run
// whose pending action has been decided, on whichever coordinator gets its
// lease first, including decisions made while no coordinator was running.
// A watch that ends (NATS lost the bucket's stream, or could not start
// one) is begun again until ctx ends: a coordinator that stopped watching
// would leave every later decision waiting. Every sweepInterval it also
// looks over every decided approval, for a decision whose carrying on
// failed (NATS restarting under it) or whose event was missed: nothing
// else would wake its run.
func (c *Coordinator) carryOnDecided(ctx context.Context) {
	swept := make(chan struct{})
	defer func() { <-swept }()
	go func() {
		defer close(swept)
		t := time.NewTicker(sweepInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			aps, err := c.approvals.List(ctx)
			if err != nil {
				continue
			}
			for i := range aps {
				c.carryOn(ctx, &aps[i], true)
			}
		}
	}()
	for {
		err := c.approvals.Watch(ctx, func(ap *protocol.Approval) { c.carryOn(ctx, ap, false) })
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("the watch of the approvals ended; watching again", "err", err)
		if sleep(ctx, rewatchWait) != nil {
			return
		}
	}
}

// sweepInterval is how often carryOnDecided looks over every approval.
const sweepInterval = 5 * time.Second

// carryOn resumes the run of a decided approval unless it is finished,
// driven here already, or held by another coordinator. A sweep leaves
// alone the approvals of steps the run has gone past: they were carried
// on.
func (c *Coordinator) carryOn(ctx context.Context, ap *protocol.Approval, sweep bool) {
	if ap.Pending == nil || ap.Decision == nil {
		return
	}
	run := ap.Pending.Run
	if c.driving(run) {
		return
	}
	st, err := c.index.Get(ctx, run)
	// Not only a run the index shows paused: the pause may be in the
	// trace while the index write was lost (NATS died in between).
	if err != nil || st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed || sweep && st.Step > ap.Pending.Step {
		return
	}
	if err := c.Resume(ctx, run); err != nil && !errors.Is(err, protocol.ErrFenced) && !errors.Is(err, errNoRoom) {
		c.log.Warn("carry on a decided run", "run", run, "err", err)
	}
}

// rewatchWait is how long carryOnDecided waits before watching again.
const rewatchWait = time.Second

// errNoRoom means every run slot is taken.
var errNoRoom = errors.New("no room for another run")

// Resume takes over a run whose coordinator is gone and drives it from the
// step after its last committed one. A finished run is left as it is.
// Errors: a *protocol.Error with CodeUnknownRun when the run has no trace;
// CodeFenced when another coordinator holds it; the trace's read errors.
func (c *Coordinator) Resume(ctx context.Context, run string) error {
	return c.ResumeWith(ctx, run, nil)
}

// ResumeWith is Resume under another policy, which is recorded in the trace
// as the run's policy from then on; nil keeps the stored one. A sub-agent's
// new policy is contained in its parent's as it was when the sub-agent
// started, like the one it started with. Errors: as Resume, and a
// *protocol.Error for a policy that does not validate or names a layer
// "remembered".
func (c *Coordinator) ResumeWith(ctx context.Context, run string, pol *protocol.Policy) error {
	if pol != nil {
		if err := cmp.Or(pol.Validate(), reservedLayers(pol)); err != nil {
			return err
		}
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return errNoRoom
	}
	ls, err := c.leases.acquire(ctx, run)
	if err != nil {
		<-c.slots
		if errors.Is(err, errHeld) {
			return protocol.Errorf(protocol.CodeFenced, "run %s is being driven by another coordinator", run)
		}
		return err
	}
	recs, last, err := c.trace.Read(ctx, run)
	if err != nil {
		// The trace did not answer (NATS electing a leader, say). The
		// lease is left to run out rather than deleted, so the run is
		// still found by the next scan for expired leases; deleting it
		// would leave the run running with no owner for good.
		<-c.slots
		return err
	}
	if len(recs) == 0 {
		c.leases.release(ctx, ls)
		<-c.slots
		return protocol.Errorf(protocol.CodeUnknownRun, "no run %s", run)
	}
	if pol != nil && recs[0].ParentPolicy != nil {
		// A sub-agent stays within its parent, whoever resumes it.
		parent, perr := policy.FromProtocol(recs[0].ParentPolicy)
		own, oerr := policy.FromProtocol(pol)
		if err := cmp.Or(perr, oerr); err != nil {
			c.leases.release(ctx, ls)
			<-c.slots
			return err
		}
		pol = policy.Contain(parent, own).Protocol()
	}
	if pol != nil && recs[len(recs)-1].Kind != protocol.RecordFinished {
		w := c.trace.Writer(run, last)
		rec := &protocol.Record{Kind: protocol.RecordPolicy, Step: len(recs), Policy: pol, Coordinator: c.cfg.ID}
		if err := w.Append(ctx, rec); err != nil {
			<-c.slots // the lease runs out, as above
			return err
		}
		recs, last = append(recs, *rec), w.LastSeq()
	}
	c.log.Info("resuming run", "run", run, "records", len(recs), "generation", ls.gen)
	c.start(ctx, run, recs, last, ls, c.heldSlot())
	return nil
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
	if tenant, ok := wire.SubmitTenant(msg.Subject()); ok {
		if strings.HasPrefix(id, wire.TenantRun(tenant, "")) {
			return id // already the tenant's: a sub-agent's id, submitted by its parent's coordinator
		}
		return wire.TenantRun(tenant, id)
	}
	return id
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

func (c *Coordinator) putState(ctx context.Context, st *protocol.RunState) {
	st.Updated = time.Now().UTC()
	if err := c.index.Put(ctx, st); err != nil {
		c.log.Warn("update run index", "run", st.Run, "err", err)
	}
}

// emit publishes a live event. Events are notifications; losing one loses
// nothing, so a failed publish is only logged.
func (c *Coordinator) emit(run string, step int, kind string, ev *protocol.Event) {
	ev.Run, ev.Step, ev.Kind = run, step, kind
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	if err := c.nc.Publish(wire.Event(run, kind), data); err != nil {
		c.log.Debug("publish event", "run", run, "kind", kind, "err", err)
	}
	// A tenant may read its own runs' events only, so they are copied
	// under its name, where its permissions let it subscribe.
	if tenant := wire.TenantOf(run); tenant != "" {
		_ = c.nc.Publish(wire.TenantEvent(tenant, run, kind), data)
	}
}

// Ready is closed once Run serves: its micro service answers and it takes
// its work.
func (c *Coordinator) Ready() <-chan struct{} { return c.ready }
