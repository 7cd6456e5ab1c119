package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/retry"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// admitBatch is how many submitted contracts a coordinator's pull asks
// for at once.
const admitBatch = 64

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 5 * time.Second

// Config configures a coordinator. The zero value means the defaults.
type Config struct {
	// ID names this coordinator in the trace, its micro service and logs;
	// default "coordinator-<random>".
	ID string
	// MaxRuns bounds the runs this coordinator works on at once (folding
	// their state, assembling a request, running their tools and checks);
	// default 64. A run waiting on a model, a person, a sub-agent or a
	// timer takes no slot: any number of runs may be in hand.
	MaxRuns int
	// TurnTimeout bounds the wait for one turn before the step task is
	// published again as a new attempt; default 10 minutes.
	TurnTimeout time.Duration
	// RepublishInterval is how often the coordinator looks for what the
	// runs waiting on a turn may have lost: its NATS connection came back,
	// the steps stream was made anew (a NATS restart loses its step tasks,
	// kept in memory), or a run's turns subscription dropped a message.
	// Those runs then look their turn up in the turns stream, or publish
	// their step task again under its message id; nothing is published
	// while nothing was lost. Default 5 seconds.
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
	// LeaseTTL bounds how long the runs of a coordinator that died wait
	// for another to take them over: its heartbeat keeps its leases alive
	// for LeaseTTL less a twentieth after each renewal (the rest is the
	// survivors' time to see it end and take the runs), and it renews
	// every third of LeaseTTL. Default 5 seconds.
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
	// secrets keeps the env values of the MCP servers of the runs this
	// coordinator admitted, which the trace does not (mcp.go).
	secrets mcpSecrets

	slots    chan struct{} // one per run in hand
	wg       sync.WaitGroup
	stopMu   sync.Mutex // guards stopping and every wg.Add; taken before mu
	stopping bool

	mu sync.Mutex
	// active are the runs in hand here, working or parked (nil while a
	// driver is being started).
	active map[string]*driver
	// parents maps each sub-agent a parked step waits on to its parent's
	// driver (kids.go).
	parents map[string]*driver
	// orphans are the runs this coordinator left without handing their
	// lease over (NATS did not answer): their lease may be live and ours,
	// so takeOver takes them back.
	orphans map[string]bool
	// asks pairs the requests heard on harness.submit with their answers.
	asks asks
	// queued are the decided runs waiting here for a free slot to be
	// carried on (resumeWhenRoom), first come first served.
	queued map[string]bool
	// stops ends the driver of each run driven here, with the cancel that
	// stopped it as the cause.
	stops map[string]context.CancelCauseFunc
	// drops ends the driver of each run working here, when the lease it
	// works under may be lost (park.go's lapse).
	drops map[string]context.CancelFunc
	// early holds a cancel asked while a run's driver was being made.
	early map[string]*protocol.Cancel
	// admitting holds, for each run being admitted here, a channel
	// closed once its admission is told: its index entry written and its
	// started event out. Its driver starts beside that, and every other
	// index entry and event of the run waits for it (awaitAdmission).
	admitting sync.Map // run -> chan struct{}
	// opens are the opens of roots whose answers are still heard
	// (opens.go).
	opens rootOpens
	// workers are the workers heard answering each pool's tasks, for
	// whether a step task extends its base (extend.go).
	workers workersHeard
	// inbox receives the turns of every run in hand, for dispatch to its
	// driver (park.go).
	inbox chan *nats.Msg

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
		index:     trace.NewIndex(assets.Runs, js, trace.ListDirect()), // its user may make direct gets
		blobs:     trace.NewBlobs(assets.Blobs),
		leases:    &leases{kv: assets.Leases, owner: cfg.ID, ttl: cfg.LeaseTTL, now: leaseClock},
		approvals: trace.NewApprovals(assets.Approvals, traces),
		ledger:    cfg.Ledger,
		metrics:   metrics.NewCoordinator(cfg.Metrics),
		log:       cfg.Logger.With("coordinator", cfg.ID),
		slots:     make(chan struct{}, cfg.MaxRuns),
		active:    make(map[string]*driver),
		parents:   make(map[string]*driver),
		orphans:   make(map[string]bool),
		asks:      asks{waiting: map[string][]asked{}, heard: map[string]heard{}},
		drops:     make(map[string]context.CancelFunc),
		early:     make(map[string]*protocol.Cancel),
		opens:     rootOpens{prefix: nc.NewInbox() + ".", open: make(map[string]*rootOpen)},
		inbox:     make(chan *nats.Msg, inboxSize),
		queued:    make(map[string]bool),
		stops:     make(map[string]context.CancelCauseFunc),
		ready:     make(chan struct{}),
	}
	c.leases.onLapse = c.lapsed
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
	opens, err := c.nc.Subscribe(c.opens.prefix+"*", c.heardOpen)
	if err != nil {
		return fmt.Errorf("subscribe to the answers of opens: %w", err)
	}
	defer func() { _ = opens.Unsubscribe() }()
	wholeTasks, err := c.nc.Subscribe(wire.WholeTaskPrefix+">", c.handleWholeTask)
	if err != nil {
		return fmt.Errorf("subscribe to the asks for step tasks whole: %w", err)
	}
	defer func() { _ = wholeTasks.Unsubscribe() }()
	// Contracts are heard as they are published, besides being stored:
	// a request is answered with what became of its contract (answer.go).
	answers, err := c.nc.Subscribe(wire.AnswersPrefix+"*", c.handleAnswer)
	if err != nil {
		return fmt.Errorf("subscribe to submission answers: %w", err)
	}
	defer func() { _ = answers.Unsubscribe() }()
	if err := svc.AddEndpoint("submit", micro.HandlerFunc(func(r micro.Request) { c.handleSubmit(ctx, r) }),
		micro.WithEndpointSubject(wire.SubjectSubmit)); err != nil {
		return fmt.Errorf("register submit endpoint: %w", err)
	}
	if err := svc.AddEndpoint("submit-tenant", micro.HandlerFunc(func(r micro.Request) { c.handleSubmit(ctx, r) }),
		micro.WithEndpointSubject(wire.SubmitTenantPrefix+"*")); err != nil {
		return fmt.Errorf("register submit-tenant endpoint: %w", err)
	}
	if err := svc.AddEndpoint("status", micro.HandlerFunc(c.handleStatus),
		micro.WithEndpointSubject(wire.CoordinatorStatus(c.cfg.ID))); err != nil {
		return fmt.Errorf("register status endpoint: %w", err)
	}

	cons, err := wire.EnsureCoordinatorConsumer(ctx, c.assets)
	if err != nil {
		return err
	}
	// The callback takes a slot for each contract and accepts it on a
	// goroutine of its own, so contracts are taken as fast as they come,
	// their synced writes in flight together rather than one after the
	// other. It blocks while every slot is busy, which holds back the
	// next pull: the rest wait in the stream. A run admitted parks at its
	// first wait and gives its slot back, so slots bound only the runs at
	// work, not the runs in hand.
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			_ = msg.Nak()
			return
		}
		if !c.working() {
			<-c.slots
			_ = msg.Nak()
			return
		}
		go func() {
			defer c.wg.Done()
			c.accept(ctx, msg)
		}()
	}, jetstream.PullMaxMessages(admitBatch), jetstream.PullExpiry(wire.PullExpiry), jetstream.PullHeartbeat(wire.PullHeartbeat))
	if err != nil {
		return fmt.Errorf("consume %s: %w", wire.StreamSubmit, err)
	}
	c.log.Info("coordinator started", "max_runs", c.cfg.MaxRuns)
	c.readyOnce.Do(func() { close(c.ready) })
	c.wg.Add(5)
	go func() {
		defer c.wg.Done()
		c.watchCancels(ctx)
	}()
	go func() {
		defer c.wg.Done()
		c.sweepAsks(ctx)
	}()
	go func() {
		defer c.wg.Done()
		c.dispatch(ctx)
	}()
	go func() {
		defer c.wg.Done()
		c.keepAlive(ctx)
	}()
	go func() {
		defer c.wg.Done()
		c.watchLoss(ctx)
	}()
	if c.cfg.Retention > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.prune(ctx)
		}()
	}
	if !c.cfg.NoTakeover {
		c.wg.Add(3)
		go func() {
			defer c.wg.Done()
			c.leases.watch(ctx, func(err error) { c.log.Warn("the watch of the leases ended; watching again", "err", err) })
		}()
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
	c.leaveParked()
	return nil
}

// leaveParked lets go of the runs parked here when the coordinator stops:
// their workspaces are closed, and the end of the heartbeat hands every
// lease over at once, for another coordinator to take the runs.
func (c *Coordinator) leaveParked() {
	c.mu.Lock()
	var left []*driver
	for run, d := range c.active {
		if d != nil {
			left = append(left, d)
		}
		delete(c.active, run)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	gate := make(chan struct{}, 16)
	for _, d := range left {
		_ = d.sub.Unsubscribe()
		d.pk.mu.Lock()
		if d.pk.timer != nil {
			d.pk.timer.Stop()
		}
		if d.pk.state == parked {
			c.metrics.Waiting(-1)
			d.dropKids()
		}
		d.pk.mu.Unlock()
		gate <- struct{}{}
		wg.Go(func() {
			defer func() { <-gate }()
			d.close()
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.leases.stop(ctx); err != nil {
		c.log.Warn("end the heartbeat", "err", err)
	} else if len(left) > 0 {
		c.log.Info("runs handed over", "runs", len(left))
	}
}

// start drives a run this coordinator holds the lease of. It owns sl,
// passed on to the run's driver, or given back at once when none starts.
func (c *Coordinator) start(ctx context.Context, run string, recs []protocol.Record, last uint64, ls *lease, sl *slot) {
	defer sl.release()
	c.mu.Lock()
	if _, ok := c.active[run]; ok {
		c.mu.Unlock()
		return
	}
	c.active[run] = nil // being started
	c.mu.Unlock()
	if !c.working() {
		c.mu.Lock()
		delete(c.active, run)
		c.mu.Unlock()
		return // the lease is kept, to run out, as for a run left unfinished
	}
	own := sl.pass()
	go func() {
		defer c.wg.Done()
		d, settled := c.newDriver(ctx, run, recs, last, ls)
		if d == nil {
			c.mu.Lock()
			delete(c.early, run)
			c.mu.Unlock()
			c.ended(ctx, run, ls, settled)
			own.release()
			return
		}
		c.mu.Lock()
		c.active[run] = d
		if mark := c.early[run]; mark != nil {
			d.pk.cancel = mark
		}
		delete(c.early, run)
		c.mu.Unlock()
		c.work(d, own)
	}()
}

// working counts one more goroutine of the coordinator's work in c.wg,
// unless the coordinator is stopping, and reports whether it did.
func (c *Coordinator) working() bool {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopping {
		return false
	}
	c.wg.Add(1)
	return true
}

// ended is the end of a run's driving here: the run is no longer in hand,
// and its lease is given back if the run is settled (finished, or paused
// for a person). A run left unfinished keeps its lease: deleting it would
// leave the run running with no lease, which no coordinator ever looks
// for. It is handed over (dead at once), so that another coordinator, or
// this one, takes it over at its next look; a coordinator stopping ends
// every lease it holds with its heartbeat.
func (c *Coordinator) ended(ctx context.Context, run string, ls *lease, settled bool) {
	c.mu.Lock()
	delete(c.active, run)
	c.mu.Unlock()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if settled {
		c.leases.release(hctx, ls)
		return
	}
	if err := c.leases.handOver(hctx, ls); err != nil {
		// The lease may still be ours and live, with the heartbeat: no
		// other coordinator would take the run, so this one does, at its
		// next look for runs to take over.
		c.log.Debug("hand the run over", "run", run, "err", err)
		c.orphan(run)
	} else {
		c.log.Info("run handed over", "run", run)
	}
}

// orphan marks run as left with a lease that may be live and ours, for
// takeOver to take it back.
func (c *Coordinator) orphan(run string) {
	c.mu.Lock()
	c.orphans[run] = true
	c.mu.Unlock()
}

// putState writes st to the run index, once the run's admission is told
// (awaitAdmission); a write that fails is only logged.
func (c *Coordinator) putState(ctx context.Context, st *protocol.RunState) {
	c.awaitAdmission(st.Run)
	c.writeState(ctx, st)
}

// writeState is putState without the wait, for the admission itself.
func (c *Coordinator) writeState(ctx context.Context, st *protocol.RunState) {
	st.Updated = time.Now().UTC()
	if err := c.writeIndex(ctx, st); err != nil {
		c.log.Warn("update run index", "run", st.Run, "err", err)
	}
}

// putSettled is putState for a state a run stays in with no driver at
// work (finished, or paused for a person), after which its lease is given
// up: nothing else would write the run's entry, so one that NATS did not
// take (a node down, a leader being elected) is written again, with
// back-off, until it lands or ctx ends. The lease is held meanwhile, so a
// coordinator that dies first leaves the run to be taken over, and whoever
// takes it finds it settled in the trace and writes its entry again.
func (c *Coordinator) putSettled(ctx context.Context, st *protocol.RunState) {
	warned := false
	_ = retrying(ctx, indexBackoff, func() error {
		st.Updated = time.Now().UTC()
		err := c.putIndex(ctx, st)
		if err != nil && !warned {
			warned = true
			c.log.Warn("update run index; writing it again until it lands", "run", st.Run, "status", st.Status, "err", err)
		}
		return err
	})
}

// indexBackoff is how putSettled waits between its writes.
var indexBackoff = backoff{wait: 250 * time.Millisecond, max: 5 * time.Second}

// putIndex writes st to the run index, once the run's admission is told
// (awaitAdmission), or fails as indexPutHook (set by tests) says.
func (c *Coordinator) putIndex(ctx context.Context, st *protocol.RunState) error {
	c.awaitAdmission(st.Run)
	return c.writeIndex(ctx, st)
}

// writeIndex is putIndex without the wait, for the admission itself.
func (c *Coordinator) writeIndex(ctx context.Context, st *protocol.RunState) error {
	if indexPutHook != nil {
		if err := indexPutHook(st); err != nil {
			return err
		}
	}
	return c.index.Put(ctx, st)
}

// indexPutHook, when set (by tests), is asked before every write of the
// run index that putState and putSettled make, and fails it with its
// error.
var indexPutHook func(*protocol.RunState) error

// emit publishes a live event, once the run's admission is told
// (awaitAdmission). Events are notifications; losing one loses nothing,
// so a failed publish is only logged.
func (c *Coordinator) emit(run string, step int, kind string, ev *protocol.Event) {
	c.awaitAdmission(run)
	c.publishEvent(run, step, kind, ev)
}

// awaitAdmission waits, while run is being admitted here, until its
// admission is told: so no index entry or event of its driver comes
// before the run's own entry and started event. It returns at once for
// any other run.
func (c *Coordinator) awaitAdmission(run string) {
	if told, ok := c.admitting.Load(run); ok {
		if admissionWaitHook != nil {
			admissionWaitHook(run)
		}
		<-told.(chan struct{})
	}
}

// admissionWaitHook, set by tests alone, is called when an index entry or
// event of run begins to wait for the run's admission to be told.
var admissionWaitHook func(run string)

// publishEvent is emit without the wait, for the admission itself.
func (c *Coordinator) publishEvent(run string, step int, kind string, ev *protocol.Event) {
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
