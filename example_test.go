package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// Run a contract on the embedded default. A scripted provider stands in
// for a model here; provider.NewOpenAI drives a real one.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "harness-example-")
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	_ = os.MkdirAll(ws, 0o755)

	contract := &protocol.Contract{
		Schema:       protocol.ContractSchema,
		Task:         "write hello.txt saying hello",
		Workspace:    protocol.Workspace{Root: ws},
		Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "hello.txt", Needle: "hello"}},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "example", Rules: []protocol.Rule{
			{Act: "write", Effect: "allow", Pattern: "hello.txt"}}}}},
	}
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{
		ID: "1", Name: "write_file", Arguments: json.RawMessage(`{"path":"hello.txt","content":"hello\n"}`)}}})

	res, err := harness.Run(context.Background(), contract,
		harness.WithProvider(agent), harness.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome, "after", res.Steps, "step")
	// Output: success after 1 step
}
