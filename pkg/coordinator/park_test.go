package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/bench"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestWaitingRunsHoldNothing submits 100 runs to a coordinator with four
// run slots, against a model that answers none of them until every one
// has asked. They all get as far as asking only because a run waiting on
// its turn holds no slot; while they wait, the coordinator has no
// goroutine per run and counts them waiting; let go, every run finishes.
func TestWaitingRunsHoldNothing(t *testing.T) {
	const runs = 100
	ws := t.TempDir()
	agent := &heldProvider{all: make(chan struct{}), answer: make(chan struct{}), n: runs}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, MaxRuns: 4, Concurrency: runs})
	var handles []*harness.RunHandle
	for i := range runs {
		h, err := cl.Submit(t.Context(), contract(ws), harness.WithRunID(fmt.Sprintf("waits-%03d", i)))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	select {
	case <-agent.all:
	case <-time.After(2 * time.Minute):
		agent.mu.Lock()
		t.Fatalf("%d of %d runs asked the model: runs waiting on it hold the slots the rest need", agent.asked, runs)
	}
	// Every run has asked; each parks once its step task is out.
	testkit.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if w := gauge(t, cl, "harness_coordinator_runs_waiting"); w != runs {
			return fmt.Errorf("runs waiting = %v, want %d", w, runs)
		}
		return nil
	})
	if g := bench.CoordinatorGoroutines(); g >= runs/4 {
		t.Errorf("%d goroutines of the coordinator while %d runs wait on the model, want a few whatever the runs", g, runs)
	}
	if a := gauge(t, cl, "harness_coordinator_runs_active"); a != 0 {
		t.Errorf("runs active while all wait = %v, want 0", a)
	}
	close(agent.answer)
	for i, h := range handles {
		res, err := h.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeFinished {
			t.Errorf("run %d = %s (%s), want finished", i, res.Outcome, res.Reason)
		}
	}
	if w := gauge(t, cl, "harness_coordinator_runs_waiting"); w != 0 {
		t.Errorf("runs waiting after all finished = %v, want 0", w)
	}
}

// heldProvider answers no call until n have been made, then all of them
// once answer is closed; calls are not taken one at a time.
type heldProvider struct {
	mu          sync.Mutex
	asked, n    int
	all, answer chan struct{}
}

func (*heldProvider) Name() string { return "held" }

func (p *heldProvider) Complete(ctx context.Context, _ *protocol.CompletionRequest) (*protocol.Turn, error) {
	p.mu.Lock()
	if p.asked++; p.asked == p.n {
		close(p.all)
	}
	p.mu.Unlock()
	select {
	case <-p.answer:
		return &protocol.Turn{Text: "done", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// gauge reads one unlabelled gauge of the cluster's metrics.
func gauge(t *testing.T, cl *harness.Cluster, name string) float64 {
	t.Helper()
	mfs, err := cl.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
