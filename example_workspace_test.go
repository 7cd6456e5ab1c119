package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/snapshot"
)

// Carry a workspace to the cluster as a snapshot: the run works on a copy
// the sandboxer makes, and its changes come back as a patch to apply
// where you like. A scripted provider stands in for a model.
func ExampleClient_UploadWorkspace() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "harness-example-")
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	_ = os.MkdirAll(ws, 0o755)
	_ = os.WriteFile(filepath.Join(ws, "greeting.txt"), []byte("Hello, world\n"), 0o644)

	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "1", Name: "edit_file",
		Arguments: json.RawMessage(`{"path":"greeting.txt","search":"world","replace":"friend"}`)}}})
	cl, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: filepath.Join(dir, "data"), Provider: agent})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()

	ref, err := cl.UploadWorkspace(ctx, ws, snapshot.PackOptions{Exclude: []string{".git"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	contract, _ := json.Marshal(&protocol.Contract{
		Schema:       protocol.ContractSchema,
		Task:         "greet a friend",
		Workspace:    protocol.Workspace{Snapshot: ref},
		Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "greeting.txt", Needle: "friend"}},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "example", Rules: []protocol.Rule{
			{Act: "write", Effect: "allow", Pattern: "greeting.txt"}}}}},
	})
	res, err := clustertest.RunJSON(ctx, cl, contract, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, diff, err := cl.Run(res.Run).Patch(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := snapshot.Apply(diff, ws); err != nil {
		fmt.Println(err)
		return
	}
	text, _ := os.ReadFile(filepath.Join(ws, "greeting.txt"))
	fmt.Println(res.Outcome, res.Patch.Files[0].Path, res.Patch.Files[0].Change)
	fmt.Print(string(text))
	// Output:
	// success greeting.txt modified
	// Hello, friend
}
