package clustertest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// settleWait is how long WaitPaused and WaitSettled wait for a run.
const settleWait = 30 * time.Second

// AskContract is a contract on the example's workspace at root with no
// rule for writes or commands, so every write and every command asks a
// person; it verifies nothing.
func AskContract(t testing.TB, root string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "Fix Add in calc.go.",
		"workspace":    map[string]string{"root": root},
		"verification": map[string]any{"none": map[string]any{}},
		"policy":       map[string]any{"defaults": map[string]string{"read": "allow", "write": "ask", "exec": "ask", "net": "deny"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// EditCall is an edit_file call on calc.go replacing search with replace.
func EditCall(id, search, replace string) protocol.ToolCall {
	args, _ := json.Marshal(map[string]string{"path": "calc.go", "search": search, "replace": replace})
	return protocol.ToolCall{ID: id, Name: "edit_file", Arguments: args}
}

// AskingAgent fixes Add (a write AskContract asks about), then, when twice
// is set, edits the same file again, then stops.
func AskingAgent(twice bool) *provider.Scripted {
	return AskingAgentWith(EditCall("fix", "return a - b", "return a + b"), twice)
}

// AskingAgentWith makes first call (which the policy asks about), then,
// when twice is set, edits calc.go's comment, then stops.
func AskingAgentWith(first protocol.ToolCall, twice bool) *provider.Scripted {
	turns := []*protocol.Turn{{Text: "Fixing Add.", ToolCalls: []protocol.ToolCall{first}}}
	if twice {
		turns = append(turns, &protocol.Turn{Text: "Documenting it.", ToolCalls: []protocol.ToolCall{EditCall("doc", "// Add returns", "// Add returns, fixed,")}})
	}
	turns = append(turns, &protocol.Turn{Text: "Done."})
	return provider.NewScripted(turns...)
}

// WaitPaused polls until the run is paused for a person, and returns its
// state; it fails t after thirty seconds.
func WaitPaused(t testing.TB, c *harness.Client, run string) *protocol.RunState {
	t.Helper()
	return WaitState(t, c, run, func(st *protocol.RunState) bool { return st.Status == protocol.StatusPaused })
}

// WaitSettled polls until the run is completed or failed, and returns its
// state; it fails t after thirty seconds.
func WaitSettled(t testing.TB, c *harness.Client, run string) *protocol.RunState {
	t.Helper()
	return WaitState(t, c, run, func(st *protocol.RunState) bool {
		return st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed
	})
}

// WaitStep polls until the run has committed at least n steps, and
// returns its state; it fails t after thirty seconds.
func WaitStep(t testing.TB, c *harness.Client, run string, n int) *protocol.RunState {
	t.Helper()
	return WaitState(t, c, run, func(st *protocol.RunState) bool { return st.Step >= n })
}

// WaitState polls the run's state until ok holds of it, and returns that
// state; it fails t with the last state seen after thirty seconds.
func WaitState(t testing.TB, c *harness.Client, run string, ok func(*protocol.RunState) bool) *protocol.RunState {
	t.Helper()
	var st *protocol.RunState
	testkit.CheckFor(t, settleWait, 20*time.Millisecond, func() error {
		var err error
		if st, err = c.Run(run).Status(t.Context()); err != nil {
			return err
		}
		if !ok(st) {
			return fmt.Errorf("run %s is %s at step %d (%s)", run, st.Status, st.Step, st.Reason)
		}
		return nil
	})
	return st
}
