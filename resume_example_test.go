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

// pausedExample runs, in a data directory under dir, a contract whose one
// write asks a person, so the run pauses; it returns the run's id.
func pausedExample(dir string) (string, error) {
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	contract := &protocol.Contract{
		Schema:       protocol.ContractSchema,
		Task:         "write hello.txt saying hello",
		Workspace:    protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}},
		Policy:       &protocol.Policy{Defaults: &protocol.Defaults{Write: "ask"}},
	}
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{
		ID: "1", Name: "write_file", Arguments: json.RawMessage(`{"path":"hello.txt","content":"hello\n"}`)}}})
	res, err := harness.Run(context.Background(), contract, harness.WithProvider(agent),
		harness.WithDataDir(filepath.Join(dir, "data")), harness.WithRunID("hello"))
	if err != nil {
		return "", err
	}
	fmt.Println(res.Outcome)
	return res.Run, nil
}

// Approve the action a paused run waits for and carry the run on, in one
// call.
func ExampleResumeWithDecision() {
	dir, _ := os.MkdirTemp("", "harness-example-")
	defer os.RemoveAll(dir)
	run, err := pausedExample(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	done := provider.NewScripted(&protocol.Turn{Text: "Written."})
	res, err := harness.ResumeWithDecision(context.Background(), run, protocol.ApprovalID(run, 1, 0), &protocol.Decision{Approve: true},
		harness.WithProvider(done), harness.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome, "after", res.Steps, "steps")
	// Output:
	// awaiting_approval
	// finished after 2 steps
}

// Carry a run on under the policy stored with it: this one still waits for
// a person, since nobody decided.
func ExampleResumeFromStoredPolicy() {
	dir, _ := os.MkdirTemp("", "harness-example-")
	defer os.RemoveAll(dir)
	run, err := pausedExample(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := harness.ResumeFromStoredPolicy(context.Background(), run,
		harness.WithProvider(provider.NewScripted()), harness.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome)
	// Output:
	// awaiting_approval
	// awaiting_approval
}
