package coordinator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
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
	var mu sync.Mutex
	heard := map[string]string{} // parent task -> the spawn's observation
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		task := req.Messages[0].Content
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.Contains(task, "Task: part of "):
			// A sub-agent writes the file its check reads.
			name := strings.Fields(strings.SplitN(task, "part of ", 2)[1])[0]
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file",
				Arguments: json.RawMessage(`{"path":"` + name + `.txt","content":"ok"}`)}}}, nil
		case last.Role == protocol.RoleTool:
			mu.Lock()
			heard[task] = last.Content
			mu.Unlock()
			return &protocol.Turn{Text: "done"}, nil
		default:
			name := strings.TrimPrefix(strings.SplitN(task, "\n", 2)[0], "Task: parent ")
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "s", Name: "spawn_agent",
				Arguments: json.RawMessage(`{"goal":"part of ` + name + `","verify_file":"` + name + `.txt","verify_contains":"ok","max_steps":2}`)}}}, nil
		}
	})
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
	mu.Lock()
	defer mu.Unlock()
	for i := range parents {
		task := fmt.Sprintf("parent p%02d", i)
		var got string
		for k, v := range heard {
			if strings.HasPrefix(k, "Task: "+task+"\n") {
				got = v
			}
		}
		if !strings.Contains(got, "-> success") {
			t.Errorf("parent %s heard %q, want its child's success", task, got)
		}
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("p%02d.txt", i))); err != nil {
			t.Errorf("child of %s wrote nothing: %v", task, err)
		}
	}
}
