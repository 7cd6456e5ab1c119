package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestRunOneFileRelative is harness.Run on a single-file contract naming
// its file relative to the working directory, as io-harness's
// TaskContract::new takes one: the run serves the file's directory, the
// write passes file_equals, and a sibling stays unread.
func TestRunOneFileRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for name, body := range map[string]string{"todo.txt": "old\n", "diary.txt": "private\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{
		{ID: "peek", Name: "read_file", Arguments: json.RawMessage(`{"path":"diary.txt"}`)},
		{ID: "w", Name: "write_file", Arguments: json.RawMessage(`{"path":"todo.txt","content":"new\n"}`)},
	}})
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Rewrite the list.", Workspace: protocol.Workspace{File: "todo.txt"},
		Verification: protocol.Verification{FileEquals: &protocol.EqualsCheck{Content: "new\n"}}, Budget: protocol.Budget{MaxSteps: 2}}
	var mu sync.Mutex
	var refused []string
	observe := func(e *protocol.Event) {
		if e.Kind == protocol.EventRefused {
			mu.Lock()
			refused = append(refused, e.Target)
			mu.Unlock()
		}
	}
	res, err := harness.Run(t.Context(), c, harness.WithProvider(agent), harness.WithDataDir(t.TempDir()), harness.WithRunID("todo"), harness.WithObserver(observe))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("outcome = %s (%s), want success", res.Outcome, res.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "todo.txt")); string(b) != "new\n" {
		t.Errorf("todo.txt = %q, want the write", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 1 || refused[0] != "diary.txt" {
		t.Errorf("refused %v, want the read of diary.txt", refused)
	}
}
