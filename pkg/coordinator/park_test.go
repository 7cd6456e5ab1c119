package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/bench"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
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

// TestParentsWaitingOnSubAgentsHoldNothing has 50 parents each spawn a
// sub-agent whose model call is held until all 50 have asked. Meanwhile
// every agent of every tree waits parked, the parents on their
// sub-agents and the sub-agents on the model: no slot, no goroutine per
// run. Let go, each sub-agent's finish wakes its parent, which hears its
// own child's outcome.
func TestParentsWaitingOnSubAgentsHoldNothing(t *testing.T) {
	const parents = 50
	ws := t.TempDir()
	parts, script := newParentsAndParts()
	agent := &heldChildren{next: script, n: parents, all: make(chan struct{}), answer: make(chan struct{})}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, MaxRuns: 4, Concurrency: 2 * parents})
	var handles []*harness.RunHandle
	for i := range parents {
		c := contract(ws)
		c.Task = fmt.Sprintf("parent p%02d", i)
		c.Budget.MaxSteps = 3
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10}
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(fmt.Sprintf("holds-%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	select {
	case <-agent.all:
	case <-time.After(2 * time.Minute):
		t.Fatalf("not every sub-agent asked the model: parents waiting on sub-agents hold what the sub-agents need")
	}
	testkit.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		// A parent looks its sub-agent up a few times in its first
		// seconds of waiting (kids.go), so both hold together only once
		// those looks are over.
		if w := gauge(t, cl, "harness_coordinator_runs_waiting"); w != 2*parents {
			return fmt.Errorf("runs waiting = %v, want %d (every parent and every sub-agent)", w, 2*parents)
		}
		if a := gauge(t, cl, "harness_coordinator_runs_active"); a != 0 {
			return fmt.Errorf("runs active while all wait = %v, want 0", a)
		}
		return nil
	})
	if g := bench.CoordinatorGoroutines(); g >= parents/4 {
		t.Errorf("%d goroutines of the coordinator while %d parents wait on their sub-agents, want a few whatever the runs", g, parents)
	}
	close(agent.answer)
	for i, h := range handles {
		res, err := h.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeFinished {
			t.Errorf("parent %d = %s (%s), want finished", i, res.Outcome, res.Reason)
		}
	}
	for i := range parents {
		if got := parts.heardBy(fmt.Sprintf("Task: parent p%02d", i)); !strings.Contains(got, fmt.Sprintf("part of p%02d", i)) || !strings.Contains(got, "-> success") {
			t.Errorf("parent p%02d heard %q, want its own child's success", i, got)
		}
	}
}

// heldChildren holds every sub-agent's first call until n have been made,
// then passes them, and every other call, to next.
type heldChildren struct {
	next        provider.Provider
	n           int
	all, answer chan struct{}
	mu          sync.Mutex
	asked       map[string]bool
}

func (*heldChildren) Name() string { return "held-children" }

func (p *heldChildren) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	task := req.Messages[0].Content
	if strings.Contains(task, "Task: part of ") {
		p.mu.Lock()
		if p.asked == nil {
			p.asked = map[string]bool{}
		}
		if !p.asked[task] {
			if p.asked[task] = true; len(p.asked) == p.n {
				close(p.all)
			}
		}
		p.mu.Unlock()
		select {
		case <-p.answer:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.next.Complete(ctx, req)
}
