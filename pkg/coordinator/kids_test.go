package coordinator_test

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestParentFindsAnUnheardFinish has a sub-agent's finish never reach the
// parent waiting on it, as when the finish is published just before the
// parent subscribes and stored just after its first look. The parent
// finds it at a later look of its own and carries on, rather than waiting
// out its wall-clock budget.
func TestParentFindsAnUnheardFinish(t *testing.T) {
	var lost, looks atomic.Int32
	firstLook, finished := make(chan struct{}), make(chan struct{})
	var onceLooked, onceLost sync.Once
	t.Cleanup(coordinator.SetKidsLost(func(string) bool {
		lost.Add(1)
		onceLost.Do(func() { close(finished) })
		return true
	}, func() {
		if looks.Add(1) == 1 {
			// The first look found the sub-agent running; it finishes, and
			// its finish is lost, before the parent can look again.
			onceLooked.Do(func() { close(firstLook) })
			select {
			case <-finished:
			case <-t.Context().Done():
			}
		}
	}))
	root, _ := readingContract(t, "the root", func(c *protocol.Contract) {
		c.Budget.MaxSteps = 2
		c.Budget.MaxWall = protocol.Duration(time.Minute) // the bug's outcome: time_budget_exceeded
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10}
		c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "note.go", Needle: "hello"}}
	})
	var rootCalls atomic.Int32
	agent := concurrentAgent(func(req *protocol.CompletionRequest) (*protocol.Turn, error) {
		if strings.Contains(req.Messages[0].Content, "write the note") {
			// The sub-agent finishes only after its parent looked once.
			select {
			case <-firstLook:
			case <-t.Context().Done():
				return nil, t.Context().Err()
			}
			return &protocol.Turn{Usage: protocol.Usage{InputTokens: 50, OutputTokens: 5},
				ToolCalls: []protocol.ToolCall{writeCall("w", "note.go", "package calc\n\n// hello\n")}}, nil
		}
		if rootCalls.Add(1) == 1 {
			return &protocol.Turn{Usage: protocol.Usage{InputTokens: 80, OutputTokens: 9}, ToolCalls: []protocol.ToolCall{
				spawnCall("kid", map[string]any{"goal": "write the note", "verify_file": "note.go", "verify_contains": "hello", "max_steps": 1}),
			}}, nil
		}
		return readTurn(int(rootCalls.Load())), nil
	})
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{root.Workspace.Root}, Provider: agent})
	raw, _ := json.Marshal(root)
	res, err := clustertest.RunJSON(t.Context(), cl, raw, "waiting")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 1 {
		t.Fatalf("root = %s after %d (%s), want success after 1", res.Outcome, res.Steps, res.Reason)
	}
	if lost.Load() == 0 {
		t.Fatal("no finish was kept from the parent: the test did not test the look")
	}
	if n := looks.Load(); n < 2 {
		t.Errorf("the parent looked at its sub-agent %d times, want a look after the first", n)
	}
	recs, err := cl.Run("waiting").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if obs := recs[1].Observations; len(obs) != 1 || !strings.HasPrefix(obs[0].Content, `[child "write the note" -> success after 1 steps]`) {
		t.Errorf("the spawn's observation = %+v, want the child's success", obs)
	}
}
