// Package worker runs provider turns for harness. A worker takes step tasks
// from the pools it serves (harness.steps.<pool>), calls its provider once
// per task, publishes the turn, or the typed error that stopped it, on
// harness.turns.<run>.<step>.<attempt> through JetStream, and only then acknowledges the
// task. So a turn is durable before any coordinator acts on it, and a worker
// that dies mid-call leaves its task to be redelivered to another.
//
// Workers hold provider keys and nothing else: no workspace, no run state.
//
// To embed: connect to NATS, then New (which ensures the streams of
// pkg/wire, or with Config.Bind binds to them) and Run.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/wire"
)

// Provider answers one completion request. provider.Provider implements it.
type Provider interface {
	Name() string
	Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error)
}

// Endpointer is implemented by a provider that dials the network: it names
// the host:port (or host) of every endpoint it may call.
type Endpointer interface {
	Endpoints() []string
}

// Config configures a worker. The zero value means the defaults.
// DefaultConcurrency is Config.Concurrency's default.
const DefaultConcurrency = 256

type Config struct {
	// ID names the worker in turns, its micro service and logs; default
	// "worker-<random>".
	ID string
	// Pools are the pools served; default ["default"].
	Pools []string
	// Drain is how long Run, once its context ends, lets the calls in
	// flight finish (their turns published, their tasks acknowledged)
	// before it abandons them; it takes no task meanwhile. 0 abandons them
	// at once: their tasks are delivered again, and the calls charged as
	// lost. The worker binary drains for 30 s on SIGTERM.
	Drain time.Duration
	// Concurrency bounds provider calls in flight; default
	// DefaultConcurrency. A call is a wait on the vendor, seconds long, so
	// the bound is sized for waiting, not for cores.
	Concurrency int
	// AckWait is how long a task may go unacknowledged before it is
	// redelivered; the worker signals progress every third of it during a
	// long call. Default 60 seconds.
	AckWait time.Duration
	// CallTimeout bounds one provider call; default 10 minutes.
	CallTimeout time.Duration
	// TranscriptBytes bounds what the worker keeps of the runs' last
	// requests, for the step tasks that extend them (transcripts.go);
	// default DefaultTranscriptBytes. Negative keeps none: every such task
	// is asked for whole.
	TranscriptBytes int
	// Primary names the provider expected to serve; a turn served by
	// another (a fallback) is announced with a fallback event. Default:
	// the provider's name, so a chain announces nothing unless set.
	Primary string
	// NoStream calls providers without streaming; by default a provider
	// that streams publishes its tokens as token events while it answers.
	NoStream bool
	// Metrics is the registry the worker's Prometheus metrics are
	// registered on (turns, provider latency and failures; see
	// internal/metrics); default none: they are counted and not served.
	Metrics prometheus.Registerer
	// Logger receives structured logs; default discards them.
	Logger *slog.Logger
	// Streams tunes the streams and buckets New ensures (wire.Ensure);
	// ignored with Bind.
	Streams wire.Config
	// Bind makes the worker create nothing: New waits for the
	// coordinators to create the streams and buckets (wire.Bind), and Run
	// for them to create the consumers of its pools (coordinator --pools).
	// For credentials that may only use the streams.
	Bind bool
	// BindWait bounds those waits; default wire.DefaultBindWait.
	BindWait time.Duration
	// Tools are an embedder's tools this worker offers the runs whose
	// contracts name them (see tools.go): tools that need no workspace.
	// A reserved or duplicate name, or a tool declaring a read or write of
	// a path, is refused by New.
	Tools []tools.Tool
	// Assets are the streams and buckets when the caller has ensured or
	// bound them already on this connection (as a role's main does); nil
	// has New ensure or bind them.
	Assets *wire.Assets
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.ID != "" && !protocol.ValidToken(c.ID) {
		return fmt.Errorf("worker id %q: use letters, digits, '-' and '_'", c.ID)
	}
	for _, p := range c.Pools {
		if !protocol.ValidToken(p) {
			return fmt.Errorf("worker pool %q: use letters, digits, '-' and '_'", p)
		}
	}
	if c.Concurrency < 0 {
		return errors.New("worker: Concurrency must not be negative")
	}
	if c.ID == "tool" {
		return errors.New(`worker id "tool": the name is kept for the subjects of the workers' tools; choose another`)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.ID == "" {
		c.ID = "worker-" + randomHex(4)
	}
	if len(c.Pools) == 0 {
		c.Pools = []string{protocol.DefaultPool}
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.AckWait == 0 {
		c.AckWait = 60 * time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 10 * time.Minute
	}
	if c.TranscriptBytes == 0 {
		c.TranscriptBytes = DefaultTranscriptBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Worker serves step tasks. Create it with New.
type Worker struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	assets *wire.Assets
	p      Provider
	tools  *tools.Set
	log    *slog.Logger
	m      *metrics.Worker

	inflight  atomic.Int64
	policies  policies      // the runs' policies, for the egress check
	kept      *transcripts  // the runs' last requests whole (transcripts.go)
	draining  atomic.Bool   // Run's context ended: no task is taken, the calls in flight finish
	ready     chan struct{} // closed once Run serves
	readyOnce sync.Once
	served    atomic.Int64
	failed    atomic.Int64
	// notBefore is when the provider may be called again after it rate
	// limited this worker (unix nanoseconds): the whole worker backs off,
	// rather than every goroutine hammering it.
	notBefore atomic.Int64
	// backBy is when a stopping worker stops marking the tasks it gives
	// back (giveback.go), unix nanoseconds; 0 until the first.
	backBy atomic.Int64
	// calling: the tasks called for now, so that one brought again by a
	// consumer made anew is not called for twice at once (retake.go).
	calling calling
}

// New returns a worker calling p over an established NATS connection. It
// ensures the streams and buckets of pkg/wire, or with cfg.Bind binds to
// them, waiting for the coordinators to create them.
//
// Errors: an invalid Config; JetStream is not enabled; those of
// wire.Ensure or wire.Bind.
func New(nc *nats.Conn, p Provider, cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errors.New("worker: no provider")
	}
	cfg.setDefaults()
	held, err := checkTools(cfg.Tools)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("worker: jetstream: %w", err)
	}
	assets := cfg.Assets
	switch {
	case assets != nil:
	case cfg.Bind:
		assets, err = wire.Bind(context.Background(), js, cfg.BindWait)
	default:
		assets, err = wire.Ensure(context.Background(), js, cfg.Streams)
	}
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w := &Worker{cfg: cfg, nc: nc, js: js, assets: assets, p: p, tools: held, log: cfg.Logger.With("worker", cfg.ID), ready: make(chan struct{}),
		kept: newTranscripts(max(cfg.TranscriptBytes, 0))}
	w.m = metrics.NewWorker(cfg.Metrics, func() float64 { return float64(w.inflight.Load()) })
	return w, nil
}

// Run serves tasks until ctx ends, then waits for the calls in flight.
// Errors: the consumers or the micro service could not be set up.
func (w *Worker) Run(ctx context.Context) error {
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:        "harness-worker",
		Version:     version.Semver(),
		Description: "provider turns for harness runs",
		Metadata:    map[string]string{"id": w.cfg.ID, "provider": w.p.Name(), "pools": strings.Join(w.cfg.Pools, ","), "tools": w.toolNames()},
		StatsHandler: func(*micro.Endpoint) any {
			return map[string]any{"inflight": w.inflight.Load(), "served": w.served.Load(), "failed": w.failed.Load(), "draining": w.draining.Load()}
		},
	})
	if err != nil {
		return fmt.Errorf("register micro service: %w", err)
	}
	defer svc.Stop()
	if err := svc.AddEndpoint("status", micro.HandlerFunc(func(r micro.Request) {
		_ = r.RespondJSON(map[string]any{"id": w.cfg.ID, "pools": w.cfg.Pools, "provider": w.p.Name(),
			"inflight": w.inflight.Load(), "concurrency": w.cfg.Concurrency, "draining": w.draining.Load()})
	}), micro.WithEndpointSubject(wire.WorkerStatus(w.cfg.ID))); err != nil {
		return fmt.Errorf("register status endpoint: %w", err)
	}

	slots := make(chan struct{}, w.cfg.Concurrency)
	// The calls run on a context of their own, which ends Drain after ctx
	// does, or at once without Drain.
	calls, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	var wg sync.WaitGroup
	var stopMu sync.Mutex // guards stopping and every wg.Add
	stopping := false
	// A call of one of the worker's tools runs as a provider call does:
	// on calls, counted in wg, so that a drain lets it finish; one that
	// comes once the worker is stopping is refused, and did not run.
	admit := func() bool {
		stopMu.Lock()
		defer stopMu.Unlock()
		if stopping {
			return false
		}
		wg.Add(1)
		return true
	}
	if err := w.addTools(calls, svc, admit, wg.Done); err != nil {
		return err
	}
	handle := func(msg jetstream.Msg, from *pullOf) {
		// The callback blocks while every slot is busy, which holds back
		// the next pull: at most Concurrency calls run, and at most as many
		// tasks wait in this worker's buffer. Once the worker stops, the
		// task waiting and those in the buffer (drained to here) are given
		// back uncalled.
		if ctx.Err() != nil {
			w.giveBack(msg, nil, prior{}, w.giveBackBy())
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			w.giveBack(msg, nil, prior{}, w.giveBackBy())
			return
		}
		stopMu.Lock()
		if stopping {
			stopMu.Unlock()
			<-slots
			w.giveBack(msg, nil, prior{}, w.giveBackBy())
			return
		}
		wg.Add(1)
		stopMu.Unlock()
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.serve(calls, msg, from)
		}()
	}
	// The first consumer of each pool must come up, or the worker fails.
	for _, pool := range w.cfg.Pools {
		if _, err := wire.EnsureWorkerConsumer(ctx, w.assets, pool, w.cfg.AckWait); err != nil {
			return err
		}
	}
	var consumers sync.WaitGroup
	for _, pool := range w.cfg.Pools {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			w.consume(ctx, pool, handle)
		}()
	}
	w.log.Info("worker started", "pools", w.cfg.Pools, "provider", w.p.Name())
	w.readyOnce.Do(func() { close(w.ready) })
	<-ctx.Done()
	w.draining.Store(true)
	consumers.Wait()
	stopMu.Lock()
	stopping = true
	stopMu.Unlock()
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	if n := w.inflight.Load(); n > 0 && w.cfg.Drain > 0 {
		w.log.Info("draining: finishing the calls in flight", "calls", n, "for", w.cfg.Drain)
	}
	t := time.NewTimer(w.cfg.Drain)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		if n := w.inflight.Load(); n > 0 {
			w.log.Warn("drain time is up; abandoning the calls in flight", "calls", n)
		}
		abandon()
		<-drained
	}
	return nil
}

// consume takes a pool's tasks until ctx ends. When the consumer goes away
// under it (a NATS restart loses the in-memory steps stream with its
// consumers), it creates the stream and the consumer again and carries on.
func (w *Worker) consume(ctx context.Context, pool string, handle func(jetstream.Msg, *pullOf)) {
	failing := false
	var last *pullOf // the consumer taken last (retake.go)
	for ctx.Err() == nil {
		lost := make(chan error, 1)
		cons, err := wire.EnsureWorkerConsumer(ctx, w.assets, pool, w.cfg.AckWait)
		if err != nil {
			if !failing && ctx.Err() == nil {
				w.log.Warn("the consumer of pool is not there yet; trying again every second", "pool", pool, "err", err)
			}
			failing = true
			if _, eerr := wire.Ensure(ctx, w.js, wire.Config{}); eerr != nil {
				w.log.Debug("ensure streams", "err", eerr)
			}
			_ = sleepCtx(ctx, time.Second)
			continue
		}
		from := &pullOf{made: cons.CachedInfo().Created}
		if last != nil {
			from.since = last.since
			if !from.made.Equal(last.made) {
				// Deleted since it was taken (by hand, or with the stream;
				// a pull that hears nothing more says no more than that):
				// what the old one delivered may come again. By the
				// server's clock, as the tasks' times are.
				last.gone.Store(true)
				from.since = from.made
			}
		}
		last = from
		cc, err := cons.Consume(func(msg jetstream.Msg) { handle(msg, from) }, jetstream.PullMaxMessages(w.cfg.Concurrency),
			jetstream.PullExpiry(wire.PullExpiry), jetstream.PullHeartbeat(wire.PullHeartbeat),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
					errors.Is(err, jetstream.ErrNoHeartbeat) {
					select {
					case lost <- err:
					default:
					}
				}
			}))
		if err != nil {
			w.log.Warn("consume the pool's tasks; trying again", "pool", pool, "err", err)
			_ = sleepCtx(ctx, time.Second)
			continue
		}
		if failing {
			w.log.Info("taking the pool's tasks again", "pool", pool)
			failing = false
		}
		select {
		case <-ctx.Done():
			// The tasks in the buffer come to handle, which gives them
			// back at once, rather than being left to come back when
			// their ack wait runs out; a bus that does not answer the
			// drain holds the stop no longer than the marks' time.
			cc.Drain()
			t := time.NewTimer(giveBackTime)
			select {
			case <-cc.Closed():
			case <-t.C:
				// What is left of the buffer is given back as it comes,
				// unmarked once the marks' time is up.
			}
			t.Stop()
			return
		case err := <-lost:
			w.log.Warn("lost the consumer of pool; taking it up again", "pool", pool, "err", err)
			// The tasks already in the buffer are still handled (a pull
			// thought lost may have been only slow), not left to come
			// back when their ack wait runs out; after a deletion, each is
			// looked up in the turns stream first (retake.go).
			cc.Drain()
			continue
		case <-cc.Closed():
		}
		cc.Stop()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// serve handles one step task.
func (w *Worker) serve(ctx context.Context, msg jetstream.Msg, from *pullOf) {
	var task protocol.StepTask // sharing the message's bytes: see decodeTask
	rawPolicy, err := decodeTask(msg.Data(), &task)
	if err != nil || !protocol.ValidToken(task.Run) {
		w.log.Warn("undecodable step task; dropping it", "err", err)
		_ = msg.TermWithReason("undecodable step task")
		return
	}
	w.inflight.Add(1)
	defer w.inflight.Add(-1)
	log := w.log.With("run", task.Run, "step", task.Step, "attempt", task.Attempt)
	if !task.Expires.IsZero() && time.Now().After(task.Expires) {
		// The coordinator gave up on this attempt and asked again: a call
		// now would be one nobody reserved or waits for.
		log.Info("the step task expired before a worker took it; dropping it")
		_ = msg.TermWithReason("expired")
		return
	}
	var pr prior // what the turns stream holds of the attempt: read on a redelivery
	md, err := msg.Metadata()
	if err != nil {
		md = nil
	}
	key := task.Key()
	if !w.calling.take(key) {
		// Marked as given back without a call, so that its next delivery
		// does not count this one as a call.
		log.Info("this task is being called for here already; putting it off")
		w.giveBackAfter(msg, &task, prior{}, time.Now().Add(giveBackTime), callingAgain)
		return
	}
	defer w.calling.done(key)
	if from.maybeAgain(md) {
		// An earlier delivery (of this consumer, or of one deleted since)
		// may have got as far as publishing the turn before its worker
		// died: then the answer stands, and calling the provider again
		// would pay for it twice.
		if pr = w.priorOf(ctx, &task, md); pr.answered {
			log.Info("the turn of this redelivered task is already published")
			_ = msg.Ack()
			return
		}
	}
	if task.Base != nil {
		found, err := w.whole(ctx, &task, msg)
		switch {
		case ctx.Err() != nil:
			// Abandoned at the end of the drain, and no call made: let
			// another worker take it.
			w.giveBack(msg, &task, pr, time.Now().Add(giveBackTime))
			return
		case err != nil:
			w.m.Base("lost")
			log.Info("no request whole for this task; dropping it", "err", err)
			_ = msg.TermWithReason(err.Error())
			return
		}
		w.m.Base(found)
	}
	w.kept.keep(task.Run, task.Transcript, &task.Request)

	// Tell the server the task is alive while the provider thinks.
	stopBeat := make(chan struct{})
	go func() {
		t := time.NewTicker(w.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	res := w.call(ctx, &task, rawPolicy)
	close(stopBeat)
	if ctx.Err() != nil {
		_ = msg.Nak() // shutting down: let another worker take it
		return
	}
	res.Worker = w.cfg.ID
	if n := deliveriesOf(md, pr); n > 1 {
		res.Deliveries = n
	}
	data, err := json.Marshal(res)
	if err != nil {
		log.Error("encode turn", "err", err)
		_ = msg.Nak()
		return
	}
	subject := wire.Turn(task.Run, task.Step, task.Attempt)
	if limit := w.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit-turnHeadroom {
		// Known too large before it is sent: published, it would fail the
		// same way on every redelivery, each one paying the provider again.
		res, data = tooLarge(res, len(data), limit)
	}
	_, err = w.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(key))
	if isTooLarge(err) && res.Turn != nil {
		res, data = tooLarge(res, len(data), w.nc.MaxPayload())
		_, err = w.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(key))
	}
	if err != nil {
		log.Warn("publish turn; the task will be redelivered", "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	fault.Hit(fault.AfterTurnPublished)
	if err := msg.Ack(); err != nil {
		log.Debug("ack step task", "err", err)
	}
	w.m.Turn(res.Error)
	if res.Error != nil {
		w.failed.Add(1)
		log.Info("provider call failed", "err", res.Error, "retryable", res.Error.Retryable())
	} else {
		w.served.Add(1)
	}
}

// turnHeadroom is what a turn's publish needs beyond its JSON: the
// subject, the message id and the other headers.
const turnHeadroom = 4 << 10

// tooLarge replaces a turn that cannot cross the bus (its encoding is size
// bytes, over the server's limit) with a small typed failure that
// keeps the call's usage: the provider was paid, and the coordinator
// charges what it reports. Publishing the turn again would fail again,
// and a redelivered task would call the provider again, uncharged.
func tooLarge(res *protocol.TurnResult, size int, limit int64) (*protocol.TurnResult, []byte) {
	small := &protocol.TurnResult{Run: res.Run, Step: res.Step, Attempt: res.Attempt, Worker: res.Worker,
		LatencyMS: res.LatencyMS, Deliveries: res.Deliveries,
		Error: protocol.FieldError(protocol.CodeTooLarge, "turn", "ask the model for less at a time (smaller files, shorter answers), or raise the NATS server's max_payload",
			"the provider's answer is %d bytes encoded, over the %d-byte message limit of the bus, so it cannot be delivered; the call was made and is charged", size, limit)}
	if res.Turn != nil {
		u := res.Turn.Usage
		small.Usage, small.Model = &u, res.Turn.Model
	}
	data, _ := json.Marshal(small) // a few hundred bytes of plain fields
	return small, data
}

// isTooLarge reports whether a publish failed for the message's size: the
// client's check of the server's limit, or a stream's own.
func isTooLarge(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}

// call runs the provider for a task, bounded by the call timeout and the
// run's deadline; rawPolicy is the task's policy as written.
func (w *Worker) call(ctx context.Context, task *protocol.StepTask, rawPolicy []byte) *protocol.TurnResult {
	res := &protocol.TurnResult{Run: task.Run, Step: task.Step, Attempt: task.Attempt}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	if !task.Deadline.IsZero() {
		if !time.Now().Before(task.Deadline) {
			res.Error = protocol.Errorf(protocol.CodeProviderTimeout, "the run's wall clock ran out before the call")
			return res
		}
		var c2 context.CancelFunc
		cctx, c2 = context.WithDeadline(cctx, task.Deadline)
		defer c2()
	}
	if err := w.egress(rawPolicy, res); err != nil {
		res.Error = err
		return res
	}
	if task.Request.HasImages() {
		if a, ok := w.p.(interface{ AcceptsImages() bool }); !ok || !a.AcceptsImages() {
			// Refused before any spend: the call could only fail or ignore them.
			res.Error = protocol.FieldError(protocol.CodeProviderRequest, "messages.images", "use a model that takes images, or do without view_image",
				"provider %s does not accept images", w.p.Name())
			return res
		}
	}
	if err := w.backOff(cctx); err != nil {
		res.Error = protocol.Errorf(protocol.CodeProviderTimeout, "the provider is rate limiting this worker past the run's time: %s", err.Error())
		return res
	}
	fault.Hit(fault.BeforeProviderCall)
	start := time.Now()
	var turn *protocol.Turn
	var err error
	if s, ok := w.p.(streamer); ok && !w.cfg.NoStream {
		turn, err = s.CompleteStream(cctx, &task.Request, func(text string) {
			w.event(task, protocol.EventToken, &protocol.Event{Text: text})
		})
	} else {
		turn, err = w.p.Complete(cctx, &task.Request)
	}
	res.LatencyMS = time.Since(start).Milliseconds()
	w.observe(turn, err, time.Since(start))
	if err != nil {
		res.Error = protocol.AsError(err)
		if res.Error.Code == protocol.CodeRateLimited {
			wait := time.Duration(max(res.Error.RetryAfterMS, 1000)) * time.Millisecond
			w.notBefore.Store(time.Now().Add(wait).UnixNano())
		}
		return res
	}
	if turn.Served == "" {
		turn.Served = w.p.Name()
	}
	primary := w.cfg.Primary
	if primary == "" {
		primary = w.p.Name()
	}
	if turn.Served != primary {
		w.event(task, protocol.EventFallback, &protocol.Event{Text: turn.Served + " served instead of " + primary})
	}
	res.Turn = turn
	return res
}

// streamer is a provider that streams its answer; provider.OpenAI and
// provider.Anthropic are.
type streamer interface {
	CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error)
}

// backOff waits out a rate limit the provider set on this worker.
func (w *Worker) backOff(ctx context.Context) error {
	until := time.Unix(0, w.notBefore.Load())
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// event publishes a live event of the task's run.
func (w *Worker) event(task *protocol.StepTask, kind string, ev *protocol.Event) {
	ev.Run, ev.Step, ev.Kind, ev.Time = task.Run, task.Step, kind, time.Now().UTC()
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_ = w.nc.Publish(wire.Event(task.Run, kind), data)
}

// egress checks net on each of the provider's endpoints against the run's
// policy, as io-harness does: the provider's own hosts are allowed by a
// layer of their own, so the net default does not refuse them, but an
// explicit deny in the policy does (deny beats any allow), and an ask rule
// asks (ask is tried before allow). An ask is not this worker's to answer:
// it makes no call and reports the verdict in res.Refused, and the
// coordinator puts it to the run's approver; a person's approval comes
// back as a remembered allow of the endpoint, which answers the ask.
func (w *Worker) egress(rawPolicy []byte, res *protocol.TurnResult) *protocol.Error {
	ep, ok := w.p.(Endpointer)
	if !ok || len(rawPolicy) == 0 || string(rawPolicy) == "null" {
		return nil
	}
	cached := w.policies.of(rawPolicy, ep.Endpoints())
	if cached.err != nil {
		return protocol.Errorf(protocol.CodeRefused, "the run's policy does not compile: %s", cached.err.Error())
	}
	pol := cached.pol
	for _, e := range ep.Endpoints() {
		host, port := splitEndpoint(e)
		v := pol.CheckNet(host, port)
		switch v.Effect {
		case policy.Allow:
			continue
		case policy.Ask:
			res.Refused = refusalOf(v, e)
			return protocol.Errorf(protocol.CodeRefused, "the policy asks a person before the provider's endpoint %s is called (%s)", e, v.DecidedBy())
		default:
			res.Refused = refusalOf(v, e)
			return protocol.Errorf(protocol.CodeRefused, "the policy refuses the provider's endpoint %s (%s)", e, v.DecidedBy())
		}
	}
	return nil
}

// splitEndpoint splits host:port, [v6]:port, a bare host or a bare IPv6
// address; a missing port is 443, as the providers dial.
func splitEndpoint(e string) (host, port string) {
	if h, p, err := net.SplitHostPort(e); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"), "443"
}

func refusalOf(v policy.Verdict, endpoint string) *protocol.Refusal {
	return &protocol.Refusal{Act: v.Act.String(), Target: endpoint, Effect: v.Effect.String(), Rule: v.Rule, Layer: v.Layer}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Ready is closed once Run serves: its micro service answers and it takes
// its work.
func (w *Worker) Ready() <-chan struct{} { return w.ready }
