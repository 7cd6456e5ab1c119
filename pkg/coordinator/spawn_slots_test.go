package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestParentsWaitingHoldNoSlot drives 20 parents on a coordinator with two
// run slots, each spawning one sub-agent: a parent waiting on its
// sub-agent lends its slot back, so the sub-agents start, none is refused
// or left to run after its parent gave up on it, and every parent hears
// its own child's outcome.
func TestParentsWaitingHoldNoSlot(t *testing.T) {
	const parents = 20
	ws := t.TempDir()
	parts, agent := newParentsAndParts()
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, MaxRuns: 2})
	var handles []*harness.RunHandle
	for i := range parents {
		c := contract(ws)
		c.Task = fmt.Sprintf("parent p%02d", i)
		c.Budget.MaxSteps = 3
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10}
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(fmt.Sprintf("parent-%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	for i, h := range handles {
		res, err := h.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeFinished {
			t.Errorf("parent %d = %s (%s), want finished", i, res.Outcome, res.Reason)
		}
	}
	runs, err := cl.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	children := 0
	for _, st := range runs {
		if st.Parent == "" {
			continue
		}
		children++
		if st.Outcome != protocol.OutcomeSuccess {
			t.Errorf("child %s of %s = %s (%s), want success", st.Run, st.Parent, st.Outcome, st.Reason)
		}
	}
	if children != parents {
		t.Errorf("%d children ran, want %d", children, parents)
	}
	for i := range parents {
		task := fmt.Sprintf("parent p%02d", i)
		if got := parts.heardBy("Task: " + task); !strings.Contains(got, "-> success") {
			t.Errorf("parent %s heard %q, want its child's success", task, got)
		}
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("p%02d.txt", i))); err != nil {
			t.Errorf("child of %s wrote nothing: %v", task, err)
		}
	}
}

// parentsAndParts scripts parents named "parent NAME" that each spawn one
// sub-agent, "part of NAME", which writes NAME.txt; heard keeps what each
// parent's spawn came back with, by its task's first line.
type parentsAndParts struct {
	mu    sync.Mutex
	heard map[string]string
}

func newParentsAndParts() (*parentsAndParts, provider.Provider) {
	p := &parentsAndParts{heard: map[string]string{}}
	return p, provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		task := req.Messages[0].Content
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.Contains(task, "Task: part of "):
			name := strings.Fields(strings.SplitN(task, "part of ", 2)[1])[0]
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file",
				Arguments: json.RawMessage(`{"path":"` + name + `.txt","content":"ok"}`)}}}, nil
		case last.Role == protocol.RoleTool:
			p.mu.Lock()
			p.heard[strings.SplitN(task, "\n", 2)[0]] = last.Content
			p.mu.Unlock()
			return &protocol.Turn{Text: "done"}, nil
		default:
			name := strings.TrimPrefix(strings.SplitN(task, "\n", 2)[0], "Task: parent ")
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "s", Name: "spawn_agent",
				Arguments: json.RawMessage(`{"goal":"part of ` + name + `","verify_file":"` + name + `.txt","verify_contains":"ok","max_steps":2}`)}}}, nil
		}
	})
}

// heardBy is what the parent whose task begins with first heard of its
// spawn.
func (p *parentsAndParts) heardBy(first string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heard[first]
}

// TestSpawnsOfOneTurnRunSideBySide has a parent ask for four sub-agents in
// one turn: each sub-agent's first provider call waits until all four are
// in flight, so they finish only if they run side by side (one after the
// other, the first would wait alone and give up); each does its part, and
// the parent hears the four outcomes in the order it asked.
func TestSpawnsOfOneTurnRunSideBySide(t *testing.T) {
	const children = 4
	ws := t.TempDir()
	var mu sync.Mutex
	inFlight, most := 0, 0
	all := make(chan struct{})
	var heard []string
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		task := req.Messages[0].Content
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.Contains(task, "Task: part "):
			name := strings.Fields(strings.SplitN(task, "part ", 2)[1])[0]
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file",
				Arguments: json.RawMessage(`{"path":"` + name + `.txt","content":"ok"}`)}}}, nil
		case last.Role == protocol.RoleTool:
			mu.Lock()
			defer mu.Unlock()
			for _, m := range req.Messages {
				if m.Role == protocol.RoleTool {
					heard = append(heard, m.Content)
				}
			}
			return &protocol.Turn{Text: "done"}, nil
		}
		var calls []protocol.ToolCall
		for k := range children {
			calls = append(calls, protocol.ToolCall{ID: fmt.Sprintf("s%d", k), Name: "spawn_agent",
				Arguments: json.RawMessage(fmt.Sprintf(`{"goal":"part c%d","verify_file":"c%d.txt","verify_contains":"ok","max_steps":2}`, k, k))})
		}
		return &protocol.Turn{ToolCalls: calls}, nil
	})
	// The scripted provider answers one call at a time; the children's
	// barrier is a provider of its own in front of it.
	barrier := &barrierProvider{next: agent, n: children, all: all, enter: func() {
		mu.Lock()
		defer mu.Unlock()
		inFlight++
		most = max(most, inFlight)
	}, leave: func() {
		mu.Lock()
		defer mu.Unlock()
		inFlight--
	}}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: barrier, NoTakeover: true})
	c := contract(ws)
	c.Task = "parent"
	c.Budget.MaxSteps = 3
	c.Budget.Tree = &protocol.TreeBudget{MaxAgents: children + 1, MaxSteps: 20}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("fans-out"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("parent = %s (%s), want finished", res.Outcome, res.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != children {
		t.Errorf("at most %d sub-agents' calls were in flight at once, want %d", most, children)
	}
	if len(heard) != children {
		t.Fatalf("the parent heard %d outcomes, want %d: %q", len(heard), children, heard)
	}
	for k, h := range heard {
		if !strings.Contains(h, fmt.Sprintf("part c%d", k)) || !strings.Contains(h, "-> success") {
			t.Errorf("outcome %d = %q, want part c%d's success, in the order asked", k, h, k)
		}
	}
}

// barrierProvider holds each sub-agent's first call until n of them are
// in flight (or gives up after a while, answering with nothing to do),
// then passes every call to next.
type barrierProvider struct {
	next         provider.Provider
	n            int
	all          chan struct{}
	enter, leave func()
	mu           sync.Mutex
	arrived      int
}

func (b *barrierProvider) Name() string { return "barrier" }

func (b *barrierProvider) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	if strings.Contains(req.Messages[0].Content, "Task: part ") && len(req.Messages) == 1 {
		b.enter()
		b.mu.Lock()
		if b.arrived++; b.arrived == b.n {
			close(b.all)
		}
		b.mu.Unlock()
		select {
		case <-b.all:
		case <-time.After(30 * time.Second):
			b.leave()
			return &protocol.Turn{Text: "alone"}, nil // no sibling came: the part is not done
		case <-ctx.Done():
			b.leave()
			return nil, ctx.Err()
		}
		b.leave()
	}
	return b.next.Complete(ctx, req)
}

// TestDecisionsDrainAtTheRateOfSlots pauses 20 runs for approval on a
// coordinator with two slots, then decides them all at once, with the
// sweep of decided approvals pushed out of reach: every run is carried on
// to its end, those beyond the free slots queued for the next one. (On
// this machine the 20 drain in about 0.3 s; carried on only by the
// coordinator's slower fallbacks, in about 12 s. No figure is asserted.)
func TestDecisionsDrainAtTheRateOfSlots(t *testing.T) {
	const runs = 20
	t.Cleanup(coordinator.SetSweepInterval(time.Hour))
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if answered(req) {
			return &protocol.Turn{Text: "done"}, nil
		}
		name := strings.Fields(strings.TrimPrefix(req.Messages[0].Content, "Task: "))[0]
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{write("w", name+".txt")}}, nil
	})
	// Decided runs are carried on by the coordinators that take runs over.
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, MaxRuns: 2})
	var handles []*harness.RunHandle
	for i := range runs {
		c := contract(ws)
		c.Task = fmt.Sprintf("r%02d writes its file", i)
		c.Policy.Defaults.Write = "ask"
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(fmt.Sprintf("asks-%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, h := range handles {
		if res, err := h.Wait(ctx); err != nil || res.Outcome != protocol.OutcomeAwaitingApproval {
			t.Fatalf("run %s = %+v, %v; want awaiting_approval", h.ID(), res, err)
		}
	}
	pending, err := cl.Pending(ctx)
	if err != nil || len(pending) != runs {
		t.Fatalf("%d pending approvals, %v; want %d", len(pending), err, runs)
	}
	for _, ap := range pending {
		if _, err := cl.Decide(ctx, ap.ID, &protocol.Decision{Approve: true, By: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range handles {
		testkit.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
			st, err := h.Status(ctx)
			switch {
			case err != nil:
				return err
			case st.Status != protocol.StatusCompleted:
				return fmt.Errorf("run %s is %s (%s) after its decision, want it carried on to its end", h.ID(), st.Status, st.Reason)
			case st.Outcome != protocol.OutcomeFinished:
				t.Errorf("run %s ended %s (%s), want finished", h.ID(), st.Outcome, st.Reason)
			}
			return nil
		})
	}
}
