package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// WaitConfig sets the size of a waiting measurement: what runs in flight
// cost while they wait on a slow model, and how fast many runs of a few
// slow turns finish when submitted at once. Zero fields take the defaults.
type WaitConfig struct {
	// Dir holds the data directory and the workspace; default a fresh
	// temporary directory, removed afterwards.
	Dir string
	// Waiting is how many runs are held on their first turn while their
	// cost is measured; default 1000.
	Waiting int
	// Runs is how many runs of Turns turns go at once for the elapsed
	// figure; default 1000.
	Runs int
	// Turns is each such run's turns, and Think how long the model takes
	// over each; default 3 and 2 s.
	Turns int
	Think time.Duration
	// Quiet is how long the CPU is watched while the runs wait; default
	// 10 s.
	Quiet time.Duration
	// HeapProfile, when set, is where a heap profile is written while the
	// runs wait (go tool pprof -focus pkg/coordinator shows the
	// coordinator's share).
	HeapProfile string
}

// WaitReport is what a waiting measurement found.
type WaitReport struct {
	Waiting int
	// Admit is how long the Waiting runs took from the first submission
	// to all of them waiting on the model.
	Admit time.Duration
	// HeapPerRun and RSSPerRun are the growth of the Go heap in use and of
	// the process's resident memory while the runs wait, per run, over
	// the same measured before they were submitted. The process holds every
	// role and the NATS server: the coordinator's share is less.
	HeapPerRun, RSSPerRun float64
	// PeakRSS is the process's peak resident memory, in bytes.
	PeakRSS int64
	// Goroutines counts the goroutines with a frame of the coordinator's
	// package while the runs wait, and GoroutinesBefore before they came.
	Goroutines, GoroutinesBefore int
	// CPU is the share of one core the whole process used while the runs
	// waited, over Quiet.
	CPU   float64
	Quiet time.Duration

	Runs, Turns int
	Think       time.Duration
	// Elapsed is how long Runs runs of Turns turns took from the first
	// submission to the last outcome; Ideal is Turns × Think.
	Elapsed, Ideal time.Duration
}

// String renders the report for a person.
func (r *WaitReport) String() string {
	return fmt.Sprintf(`waiting: %d runs held on a model that has not answered, admitted in %v
  per waiting run: %.1f KB of Go heap, %.1f KB resident (whole process: every role and NATS)
  coordinator goroutines: %d waiting, %d before the runs came
  CPU while they wait: %.1f%% of one core (whole process, over %v); peak RSS %.0f MB
fan: %d runs of %d turns, %v each, submitted at once: %v (ideal %v, %.2f×)`,
		r.Waiting, round(r.Admit), r.HeapPerRun/1024, r.RSSPerRun/1024, r.Goroutines, r.GoroutinesBefore,
		100*r.CPU, r.Quiet, float64(r.PeakRSS)/(1<<20),
		r.Runs, r.Turns, r.Think, round(r.Elapsed), r.Ideal, float64(r.Elapsed)/float64(r.Ideal))
}

// RunWaiting measures. Errors: the cluster or a run failed.
func RunWaiting(ctx context.Context, cfg WaitConfig) (*WaitReport, error) {
	if cfg.Waiting == 0 {
		cfg.Waiting = 1000
	}
	if cfg.Runs == 0 {
		cfg.Runs = 1000
	}
	if cfg.Turns == 0 {
		cfg.Turns = 3
	}
	if cfg.Think == 0 {
		cfg.Think = 2 * time.Second
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = 10 * time.Second
	}
	dir, cleanup, err := scratch(cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cfg.Dir = dir
	ws := filepath.Join(cfg.Dir, "ws")
	if err := writeNotes(ws, cfg.Turns); err != nil {
		return nil, err
	}
	model := &slowModel{release: make(chan struct{}), think: cfg.Think, turns: cfg.Turns}
	cl, err := harness.Start(ctx, harness.Config{DataDir: filepath.Join(cfg.Dir, "data"), Provider: model, Roots: []string{ws},
		Concurrency: max(cfg.Waiting, cfg.Runs)})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rep := &WaitReport{Waiting: cfg.Waiting, Runs: cfg.Runs, Turns: cfg.Turns, Think: cfg.Think, Ideal: time.Duration(cfg.Turns) * cfg.Think, Quiet: cfg.Quiet}
	contract := func(task string, turns int) *protocol.Contract {
		return &protocol.Contract{Schema: protocol.ContractSchema, Task: task,
			Workspace: protocol.Workspace{Root: ws}, Verification: protocol.Verification{None: &struct{}{}},
			Budget: protocol.Budget{MaxSteps: turns + 1}}
	}

	// Waiting: runs held on their first turn, and what they cost.
	heap0, rss0 := memory()
	rep.GoroutinesBefore = CoordinatorGoroutines()
	begin := time.Now()
	held, err := submitAll(ctx, cl, contract(holdTask, 1), "wait", cfg.Waiting)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, stuckAfter)
	err = model.waitAsked(actx, cfg.Waiting)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%d of %d runs asked the model within %v (%s): %w", model.count(), cfg.Waiting, stuckAfter, where(ctx, cl), err)
	}
	if err := waitGauge(ctx, cl, "harness_coordinator_runs_waiting", cfg.Waiting); err != nil {
		return nil, err
	}
	rep.Admit = time.Since(begin)
	runtime.GC()
	heap1, rss1 := memory()
	rep.HeapPerRun = float64(heap1-heap0) / float64(cfg.Waiting)
	rep.RSSPerRun = float64(rss1-rss0) / float64(cfg.Waiting)
	rep.Goroutines = CoordinatorGoroutines()
	if cfg.HeapProfile != "" {
		if err := writeHeap(cfg.HeapProfile); err != nil {
			return nil, err
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	select {
	case <-time.After(cfg.Quiet):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rep.CPU = (cpuTime() - cpu0).Seconds() / time.Since(wall0).Seconds()
	close(model.release)
	if err := waitAll(ctx, held, 1); err != nil {
		return nil, err
	}

	// Fan: many runs of slow turns at once.
	begin = time.Now()
	fan, err := submitAll(ctx, cl, contract("read the notes, slowly", cfg.Turns), "fan", cfg.Runs)
	if err != nil {
		return nil, err
	}
	if err := waitAll(ctx, fan, cfg.Turns); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(begin)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		rep.PeakRSS = ru.Maxrss << 10
	}
	return rep, nil
}

// slowModel holds every first turn until release is closed, then takes
// think over every turn; a run's last turn says it is done.
type slowModel struct {
	release chan struct{}
	think   time.Duration
	turns   int
	mu      sync.Mutex
	asked   int
	cond    chan struct{} // closed and replaced at each call
}

func (*slowModel) Name() string { return "slow" }

func (m *slowModel) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	m.mu.Lock()
	m.asked++
	if m.cond != nil {
		close(m.cond)
		m.cond = nil
	}
	m.mu.Unlock()
	held := strings.Contains(req.Messages[0].Content, holdTask)
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !held {
		t := time.NewTimer(m.think)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	done := 0
	for _, msg := range req.Messages {
		if msg.Role == protocol.RoleAssistant {
			done++
		}
	}
	usage := protocol.Usage{InputTokens: 100, OutputTokens: 10}
	if held || done+1 >= m.turns {
		return &protocol.Turn{Text: "done", Usage: usage}, nil
	}
	read, err := json.Marshal(map[string]string{"path": notePath(done)})
	if err != nil {
		return nil, err
	}
	return &protocol.Turn{Usage: usage, ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("c%d", done), Name: "read_file", Arguments: read}}}, nil
}

// holdTask is the task of the runs held on their first turn.
const holdTask = "wait for the model to answer"

// stuckAfter is how long the runs held may take to all ask the model.
const stuckAfter = 3 * time.Minute

func (m *slowModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked
}

// where says where the runs are: the gauges, the steps stream and its
// workers' consumer.
func where(ctx context.Context, cl *harness.Cluster) string {
	var b strings.Builder
	if mfs, err := cl.Metrics().Gather(); err == nil {
		for _, mf := range mfs {
			switch mf.GetName() {
			case "harness_coordinator_runs_waiting", "harness_coordinator_runs_active":
				fmt.Fprintf(&b, "%s %v; ", mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
	}
	if runs, err := cl.Runs(ctx); err == nil {
		by := map[string]int{}
		var odd []string
		for _, st := range runs {
			by[string(st.Status)+"/"+string(st.Outcome)+fmt.Sprintf("@%d", st.Step)]++
			if st.Status != protocol.StatusRunning && len(odd) < 3 {
				odd = append(odd, st.Run+": "+st.Reason)
			}
		}
		fmt.Fprintf(&b, "runs %v %q; ", by, odd)
	}
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		return b.String()
	}
	if s, err := js.Stream(ctx, wire.StreamSteps); err == nil {
		if info, err := s.Info(ctx); err == nil {
			fmt.Fprintf(&b, "steps stream: %d messages; ", info.State.Msgs)
		}
		if c, err := s.Consumer(ctx, wire.WorkerConsumer(protocol.DefaultPool)); err == nil {
			if info, err := c.Info(ctx); err == nil {
				fmt.Fprintf(&b, "workers' consumer: %d pending, %d in workers' hands, %d waiting pulls", info.NumPending, info.NumAckPending, info.NumWaiting)
			}
		}
	}
	return b.String()
}

// waitAsked returns once n calls have been made.
func (m *slowModel) waitAsked(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		if m.asked >= n {
			m.mu.Unlock()
			return nil
		}
		if m.cond == nil {
			m.cond = make(chan struct{})
		}
		c := m.cond
		m.mu.Unlock()
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// submitAll submits n runs of contract, 64 at a time.
func submitAll(ctx context.Context, cl *harness.Cluster, contract *protocol.Contract, prefix string, n int) ([]*harness.RunHandle, error) {
	handles := make([]*harness.RunHandle, n)
	errs := make(chan error, n)
	gate := make(chan struct{}, 64)
	var wg sync.WaitGroup
	stamp := time.Now().UnixNano()
	for i := range n {
		gate <- struct{}{}
		wg.Go(func() {
			defer func() { <-gate }()
			h, err := cl.Submit(ctx, contract, harness.WithRunID(fmt.Sprintf("%s-%d-%d", prefix, stamp, i)))
			if err != nil {
				errs <- err
				return
			}
			handles[i] = h
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return handles, nil
}

// waitAll waits for every run's outcome and checks each finished after
// its turns.
func waitAll(ctx context.Context, handles []*harness.RunHandle, turns int) error {
	errs := make(chan error, len(handles))
	gate := make(chan struct{}, 256)
	var wg sync.WaitGroup
	for _, h := range handles {
		gate <- struct{}{}
		wg.Go(func() {
			defer func() { <-gate }()
			res, err := h.Wait(ctx)
			switch {
			case err != nil:
				errs <- err
			case res.Outcome != protocol.OutcomeFinished || res.Steps != turns:
				errs <- fmt.Errorf("bench run %s ended %s after %d steps, want finished after %d: %s", res.Run, res.Outcome, res.Steps, turns, res.Reason)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitGauge waits for a gauge of the cluster's metrics to read want.
func waitGauge(ctx context.Context, cl *harness.Cluster, name string, want int) error {
	for {
		mfs, err := cl.Metrics().Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.GetMetric()) > 0 && int(mf.GetMetric()[0].GetGauge().GetValue()) >= want {
				return nil
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// memory is the Go heap in use and the process's resident memory, in
// bytes.
func memory() (heap, rss int64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = int64(ms.HeapInuse)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, res int64
		if _, err := fmt.Sscan(string(b), &size, &res); err == nil {
			rss = res * int64(os.Getpagesize())
		}
	}
	return heap, rss
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CoordinatorGoroutines counts the goroutines with a frame of the
// coordinator's package.
func CoordinatorGoroutines() int {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "harness/pkg/coordinator.") {
			n++
		}
	}
	return n
}
