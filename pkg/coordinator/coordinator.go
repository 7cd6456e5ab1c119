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
	// queued are the decided runs waiting here for a free slot to be
	// carried on (resumeWhenRoom), first come first served.
	queued map[string]bool
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
		queued:    make(map[string]bool),
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
		settled := c.drive(rctx, dctx, run, recs, last, own)
		c.metrics.Driving(-1)
		c.mu.Lock()
		delete(c.stops, run)
		c.mu.Unlock()
		stop(nil)
		// A driver that left the run neither finished nor paused (its lease
		// lost, the run taken over under it, this coordinator stopping, a
		// read that failed) leaves it to whoever takes it next.
		unfinished = !settled
		cancel()
		<-held // the lease is ours alone again before it is given back
	}()
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
