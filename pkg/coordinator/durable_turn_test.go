package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestTurnNeverStoredIsNeverActedOn has the turns stream refuse a turn
// (over the stream's own size limit, under the bus's): the coordinator
// must not act on it, since it is not durable, whatever the bus carried.
// The worker reports the call too_large instead, the run ends on that,
// and the turn's write is never made.
func TestTurnNeverStoredIsNeverActedOn(t *testing.T) {
	ws := t.TempDir()
	big := strings.Repeat("a thought that goes on. ", 2000) // ~48 KB
	agent := provider.NewScriptedFunc(func(_ *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if call == 1 {
			args, _ := json.Marshal(map[string]string{"path": "acted.txt", "content": "x"})
			return &protocol.Turn{Text: big, ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file", Arguments: args}}}, nil
		}
		return &protocol.Turn{Text: "done"}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	ctx := t.Context()
	js, assets := streamsOf(t, cl)
	cfg := assets.Turns.CachedInfo().Config
	cfg.MaxMsgSize = 16 << 10
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	// What an operator watching the stored turns sees (docs/operations.md
	// gives this subject to nats sub): the stream's own word alone.
	stored := watchAsOperator(t, cl, "harness.stored.turns.>")

	h, err := cl.Submit(ctx, contract(ws), harness.WithRunID("unstored"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "acted.txt")); err == nil {
		t.Error("acted.txt was written: the coordinator acted on a turn the turns stream never stored")
	}
	if res.Outcome != protocol.OutcomeEscalatedTerminal || !strings.Contains(res.Reason, "too_large") {
		t.Errorf("run = %s after %d steps (%s), want escalated_terminal for the turn that could not be stored", res.Outcome, res.Steps, res.Reason)
	}
	m, err := stored.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("nothing heard on harness.stored.turns.>: %v", err)
	}
	var tr protocol.TurnResult
	if err := json.Unmarshal(m.Data, &tr); err != nil || m.Subject != "harness.stored.turns.unstored.1.1" || tr.Turn != nil || tr.Error == nil {
		t.Errorf("heard on %s: %.200s; want the worker's too_large report of the run's first call and no turn", m.Subject, m.Data)
	}
	if m, err := stored.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("heard a second stored turn on %s: %.200s", m.Subject, m.Data)
	}
}
