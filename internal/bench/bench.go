// Package bench measures the harness's own overhead per step on the
// embedded default, beside a bare JetStream publish-with-ack on the same
// server in the same run, so the figures can be read as ratios on any
// machine. `harness bench` and the root package's benchmarks use it.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// Config sets the size of a measurement. Zero fields take the defaults.
type Config struct {
	// Dir holds the data directory and the workspace; default a fresh
	// temporary directory, removed afterwards.
	Dir string
	// Steps is the length of each run; default 100.
	Steps int
	// Runs is how many runs go at once for the throughput figure; default 16.
	Runs int
	// Publishes is how many bare publishes make the baseline; default 2000.
	Publishes int
	// LatencyOnly skips the throughput measurement.
	LatencyOnly bool
}

// Report is what one measurement found. Durations are medians and 99th
// percentiles over the samples named.
type Report struct {
	PublishP50, PublishP99 time.Duration // bare JetStream publish with ack, synced
	StepP50, StepP99       time.Duration // one step of one run, commit to commit
	// PathP50 and PathP99 are the bare path of a step (path.go): the
	// messages of a step with none of the harness's work between them.
	PathP50, PathP99 time.Duration
	StepsPerSecond   float64 // across Runs concurrent runs
	// FloorPerSecond is the throughput's floor: synced publishes a second
	// from Runs publishers at once over two file streams, as a step's
	// turn and trace record are two synced writes to two streams.
	FloorPerSecond float64
	// PathPerSecond is the bare path's steps a second with Runs of them
	// at once (path.go): the design's own floor for the throughput.
	PathPerSecond  float64
	PathCPUPerStep time.Duration // the process's CPU time a step meanwhile
	CPUPerStep     time.Duration // this process's CPU time (user and system) per step meanwhile
	Cores          float64       // the cores that CPU time kept busy, on average
	Steps, Runs    int
	// Phases is where a step's time goes, by the run's own events: the
	// median of each phase over the steps of the latency run.
	Phases []Phase
	// LoadPhases are the same phases over the steps of one of the
	// throughput's runs, with the others at work beside it.
	LoadPhases []Phase
}

// Phase is one part of a step, between two of the run's events.
type Phase struct {
	Name string
	P50  time.Duration
}

// Ratio is the median step's cost in bare publishes.
func (r *Report) Ratio() float64 { return float64(r.StepP50) / float64(r.PublishP50) }

// String renders the report for a person.
func (r *Report) String() string {
	return fmt.Sprintf(`bare JetStream publish+ack (synced): p50 %v  p99 %v
bare step path (task queued, turn synced and heard stored, a request and reply, the record synced beside): p50 %v  p99 %v  (%.1f× a bare publish)
harness step (scripted provider, read_file, durable trace): p50 %v  p99 %v  (%.1f× a bare publish, %.1f× the bare path)
throughput: %.0f steps/s from one coordinator across %d concurrent runs of %d steps (%v of CPU a step, %.2f of %d cores busy)`,
		round(r.PublishP50), round(r.PublishP99), round(r.PathP50), round(r.PathP99), float64(r.PathP50)/float64(r.PublishP50),
		round(r.StepP50), round(r.StepP99), r.Ratio(), float64(r.StepP50)/float64(r.PathP50), r.StepsPerSecond, r.Runs, r.Steps,
		round(r.CPUPerStep), r.Cores, runtime.NumCPU()) + r.floor() + r.phases()
}

// floor renders the throughput beside its floor, when it was measured.
func (r *Report) floor() string {
	if r.FloorPerSecond == 0 {
		return ""
	}
	out := fmt.Sprintf("\nthroughput floor: %.0f synced publishes/s from %d publishers over two streams, %.0f steps/s at two a step (the throughput is %.2f of it)",
		r.FloorPerSecond, r.Runs, r.FloorPerSecond/2, r.StepsPerSecond/(r.FloorPerSecond/2))
	if r.PathPerSecond > 0 {
		out += fmt.Sprintf("\nbare step path, %d at once: %.0f steps/s at %v of CPU a step (the throughput is %.2f of it)",
			r.Runs, r.PathPerSecond, round(r.PathCPUPerStep), r.StepsPerSecond/r.PathPerSecond)
	}
	return out
}

// phases renders the breakdown of a step, each phase as a share of a bare
// publish.
func (r *Report) phases() string {
	if len(r.Phases) == 0 {
		return ""
	}
	out := "\nwhere a step goes (medians, by the run's events):"
	for _, p := range r.Phases {
		out += fmt.Sprintf("\n  %-72s %8v  (%.1f× a bare publish)", p.Name, round(p.P50), float64(p.P50)/float64(r.PublishP50))
	}
	if len(r.LoadPhases) == len(r.Phases) {
		out += fmt.Sprintf("\nthe same, in one of the %d runs at once (medians):", r.Runs)
		for i, p := range r.LoadPhases {
			out += fmt.Sprintf("\n  %-72s %8v  (%.1f× alone)", p.Name, round(p.P50), float64(p.P50)/float64(r.Phases[i].P50))
		}
	}
	return out
}

func round(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// Run measures. Errors: the cluster or a run failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Steps == 0 {
		cfg.Steps = 100
	}
	if cfg.Runs == 0 {
		cfg.Runs = 16
	}
	if cfg.Publishes == 0 {
		cfg.Publishes = 2000
	}
	dir, cleanup, err := scratch(cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cfg.Dir = dir
	ws := filepath.Join(cfg.Dir, "ws")
	if err := writeNotes(ws, cfg.Steps); err != nil {
		return nil, err
	}
	cl, err := harness.Start(ctx, harness.Config{DataDir: filepath.Join(cfg.Dir, "data"), Provider: agent(cfg.Steps), Roots: []string{ws}})
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	rep := &Report{Steps: cfg.Steps, Runs: cfg.Runs}
	if rep.PublishP50, rep.PublishP99, err = publishes(ctx, cl.Conn(), cfg.Publishes); err != nil {
		return nil, err
	}
	lat, _, _, err := path(ctx, cl.Conn(), 1, max(cfg.Publishes/4, 100))
	if err != nil {
		return nil, fmt.Errorf("bare step path: %w", err)
	}
	rep.PathP50, rep.PathP99 = percentiles(lat)
	contract := &protocol.Contract{Schema: protocol.ContractSchema, Task: "read the notes until told to stop",
		Workspace: protocol.Workspace{Root: ws}, Verification: protocol.Verification{None: &struct{}{}},
		Budget: protocol.Budget{MaxSteps: cfg.Steps + 1}}

	// Latency: one run alone, step to step, its events heard on the way.
	run := harness.NewRunID()
	heard, stop, err := listen(cl.Conn(), protocol.RunIDFor(run))
	if err != nil {
		return nil, err
	}
	if err := finish(ctx, cl, contract, run, cfg.Steps); err != nil {
		stop()
		return nil, err
	}
	rep.Phases = breakdown(stop(), heard)
	recs, err := cl.Run(protocol.RunIDFor(run)).Trace(ctx)
	if err != nil {
		return nil, err
	}
	var gaps []time.Duration
	for i := 2; i < len(recs); i++ {
		if recs[i].Kind == protocol.RecordStep && recs[i-1].Kind == protocol.RecordStep {
			gaps = append(gaps, recs[i].Time.Sub(recs[i-1].Time))
		}
	}
	rep.StepP50, rep.StepP99 = percentiles(gaps)

	if cfg.LatencyOnly {
		return rep, nil
	}
	// Throughput: many runs at once on the one coordinator.
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Runs)
	// One of the runs is heard on the way, for its phases under load.
	watched := harness.NewRunID()
	loadHeard, stopLoad, err := listen(cl.Conn(), protocol.RunIDFor(watched))
	if err != nil {
		return nil, err
	}
	for i := range cfg.Runs {
		id := harness.NewRunID() + "-" + fmt.Sprint(time.Now().UnixNano())
		if i == 0 {
			id = watched
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- finish(ctx, cl, contract, id, cfg.Steps)
		}()
	}
	wg.Wait()
	close(errs)
	rep.LoadPhases = breakdown(stopLoad(), loadHeard)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	took, cpu := time.Since(start), cpuTime()-cpu0
	rep.StepsPerSecond = float64(cfg.Runs*cfg.Steps) / took.Seconds()
	rep.CPUPerStep = cpu / time.Duration(cfg.Runs*cfg.Steps)
	rep.Cores = cpu.Seconds() / took.Seconds()
	if rep.FloorPerSecond, err = publishRate(ctx, cl.Conn(), cfg.Runs, 2*cfg.Runs*min(cfg.Steps, 100)); err != nil {
		return nil, err
	}
	if _, rep.PathPerSecond, rep.PathCPUPerStep, err = path(ctx, cl.Conn(), cfg.Runs, min(cfg.Steps, 100)); err != nil {
		return nil, fmt.Errorf("bare step path, %d at once: %w", cfg.Runs, err)
	}
	return rep, nil
}

// finish runs one contract and checks it finished after every step, so
// that no figure comes from a run cut short.
func finish(ctx context.Context, cl *harness.Cluster, contract *protocol.Contract, id string, steps int) error {
	h, err := cl.Submit(ctx, contract, harness.WithRunID(id))
	if err != nil {
		return err
	}
	res, err := h.Wait(ctx)
	if err != nil {
		return err
	}
	if res.Outcome != protocol.OutcomeFinished {
		return fmt.Errorf("bench run %s ended %s: %s", res.Run, res.Outcome, res.Reason)
	}
	if res.Steps != steps {
		return fmt.Errorf("bench run %s finished after %d steps, not %d", res.Run, res.Steps, steps)
	}
	return nil
}

// scratch is dir, or a fresh temporary directory that cleanup removes.
func scratch(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", "harness-bench-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// notePath is the small file the agent reads at its i-th step.
func notePath(i int) string { return fmt.Sprintf("notes/%d.txt", i) }

// writeNotes lays out the workspace: one small file for each step of a
// run, so that no step repeats another (see agent).
func writeNotes(ws string, steps int) error {
	if err := os.MkdirAll(filepath.Join(ws, "notes"), 0o755); err != nil {
		return err
	}
	for i := range steps {
		if err := os.WriteFile(filepath.Join(ws, notePath(i)), []byte("a small file to read\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// agent answers at once: for steps-1 turns it reads the next of the
// notes, then stops. Each turn reads a file no earlier turn read, as an
// agent finding its way around a workspace does: a run that reads the same
// file over and over changes nothing and is stalled by the coordinator's
// stall detection (a window of 3 by default), which the measurement keeps
// on, since its check is part of every step.
func agent(steps int) *provider.Scripted {
	return provider.NewScriptedFunc(func(req *protocol.CompletionRequest, _ int) (*protocol.Turn, error) {
		done := 0
		for _, m := range req.Messages {
			if m.Role == protocol.RoleAssistant {
				done++
			}
		}
		if done+1 >= steps {
			return &protocol.Turn{Text: "done", Usage: protocol.Usage{InputTokens: 1, OutputTokens: 1}}, nil
		}
		read, err := json.Marshal(map[string]string{"path": notePath(done)})
		if err != nil {
			return nil, err
		}
		return &protocol.Turn{Usage: protocol.Usage{InputTokens: 1, OutputTokens: 1},
			ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("c%d", done), Name: "read_file", Arguments: read}}}, nil
	})
}

// publishes measures n bare publish-with-ack round trips to a scratch
// file stream on the same server, with the same sync setting as the trace.
func publishes(ctx context.Context, nc *nats.Conn, n int) (p50, p99 time.Duration, err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, err
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "BENCH_BASELINE", Subjects: []string{"bench.baseline"},
		Storage: jetstream.FileStorage}); err != nil {
		return 0, 0, err
	}
	defer func() { _ = js.DeleteStream(context.Background(), "BENCH_BASELINE") }()
	payload := make([]byte, 512)
	lat := make([]time.Duration, 0, n)
	for i := range n + 100 {
		t0 := time.Now()
		if _, err := js.Publish(ctx, "bench.baseline", payload); err != nil {
			return 0, 0, err
		}
		if i >= 100 {
			lat = append(lat, time.Since(t0))
		}
	}
	p50, p99 = percentiles(lat)
	return p50, p99, nil
}

// publishRate measures how many synced publishes a second publishers
// make at once, each waiting for its ack before the next, alternating
// between two scratch file streams, total in all.
func publishRate(ctx context.Context, nc *nats.Conn, publishers, total int) (float64, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	var subjects [2]string
	for i, name := range []string{"BENCH_FLOOR_A", "BENCH_FLOOR_B"} {
		subjects[i] = "bench.floor." + name
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subjects[i]},
			Storage: jetstream.FileStorage}); err != nil {
			return 0, err
		}
		defer func() { _ = js.DeleteStream(context.Background(), name) }()
	}
	payload := make([]byte, 512)
	each := max(total/publishers, 2)
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	start := time.Now()
	for range publishers {
		wg.Go(func() {
			for i := range each {
				if _, err := js.Publish(ctx, subjects[i%2], payload); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(publishers*each) / took.Seconds(), nil
}

func percentiles(xs []time.Duration) (p50, p99 time.Duration) {
	if len(xs) == 0 {
		return 0, 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2], xs[min(len(xs)-1, len(xs)*99/100)]
}

// listen gathers the times of a run's events, by step and kind, until
// stop, which returns how many it heard.
func listen(nc *nats.Conn, run string) (map[int]map[string]time.Time, func() int, error) {
	var mu sync.Mutex
	heard := map[int]map[string]time.Time{}
	n := 0
	sub, err := nc.Subscribe("harness.events."+run+".>", func(m *nats.Msg) {
		var ev protocol.Event
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if heard[ev.Step] == nil {
			heard[ev.Step] = map[string]time.Time{}
		}
		if _, ok := heard[ev.Step][ev.Kind]; !ok {
			heard[ev.Step][ev.Kind] = ev.Time
		}
		n++
	})
	if err != nil {
		return nil, nil, err
	}
	return heard, func() int {
		_ = nc.Flush()
		_ = sub.Unsubscribe()
		mu.Lock()
		defer mu.Unlock()
		return n
	}, nil
}

// breakdown turns the events of a run into the medians of a step's
// phases: from the previous step's observation to the next request being
// assembled (the previous record sent meanwhile), on to its turn coming
// back, and the tool call; and, beside the first two, the previous
// record's write, which they overlap.
func breakdown(_ int, heard map[int]map[string]time.Time) []Phase {
	phases := []struct {
		name       string
		from, to   string
		fromBefore bool // from is the previous step's
	}{
		{"observation -> next request assembled (record sent, assembly, ledger)", protocol.EventObserved, protocol.EventAssembled, true},
		{"assembled -> turn back (task publish, worker, provider, turn publish)", protocol.EventAssembled, protocol.EventTurn, false},
		{"turn -> observation (policy, sandboxer round trip, read_file)", protocol.EventTurn, protocol.EventObserved, false},
		{"observation -> commit done, beside the first two (trace append synced)", protocol.EventObserved, protocol.EventStep, false},
	}
	var out []Phase
	for _, ph := range phases {
		var gaps []time.Duration
		for step, kinds := range heard {
			from := kinds
			if ph.fromBefore {
				from = heard[step-1]
			}
			a, ok1 := from[ph.from]
			b, ok2 := kinds[ph.to]
			if ok1 && ok2 && b.After(a) {
				gaps = append(gaps, b.Sub(a))
			}
		}
		if len(gaps) > 0 {
			p50, _ := percentiles(gaps)
			out = append(out, Phase{Name: ph.name, P50: p50})
		}
	}
	return out
}
