package clustertest

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// The example of the README, examples/fix-a-test: a Go module whose test
// fails, the contract that asks for the fix, and the cassette recorded
// from ExampleTurns.
const (
	exampleContract  = "examples/fix-a-test/contract.json"
	exampleWorkspace = "examples/fix-a-test/workspace"
	exampleCassette  = "examples/fix-a-test/cassette.json"
)

// ExampleTurns is the scripted agent the shipped cassette was recorded
// from: look, read, fix.
func ExampleTurns() []*protocol.Turn {
	return []*protocol.Turn{
		{Text: "Let me see which Go files the module has.", Usage: protocol.Usage{InputTokens: 412, OutputTokens: 24},
			ToolCalls: []protocol.ToolCall{{ID: "call_find", Name: "find", Arguments: json.RawMessage(`{"name_glob":"*.go"}`)}}},
		{Text: "Reading the code and its test.", Usage: protocol.Usage{InputTokens: 498, OutputTokens: 41},
			ToolCalls: []protocol.ToolCall{
				{ID: "call_read_code", Name: "read_file", Arguments: json.RawMessage(`{"path":"calc.go"}`)},
				{ID: "call_read_test", Name: "read_file", Arguments: json.RawMessage(`{"path":"calc_test.go"}`)},
			}},
		{Text: "Add subtracts instead of adding. Fixing the code, not the test.", Usage: protocol.Usage{InputTokens: 702, OutputTokens: 52},
			ToolCalls: []protocol.ToolCall{{ID: "call_fix", Name: "edit_file",
				Arguments: json.RawMessage(`{"path":"calc.go","search":"return a - b","replace":"return a + b"}`)}}},
	}
}

// ExampleContract loads the example's contract with its workspace copied
// to a fresh directory of the test.
func ExampleContract(t testing.TB) *protocol.Contract {
	t.Helper()
	raw, err := os.ReadFile(Repo(exampleContract))
	if err != nil {
		t.Fatal(err)
	}
	c, err := protocol.DecodeContract(raw)
	if err != nil {
		t.Fatal(err)
	}
	c.Workspace.Root = ExampleWorkspace(t)
	return c
}

// ExampleWorkspace copies the example's workspace (calc.go, whose Add
// subtracts, and its test) to a fresh directory of the test and returns
// its path.
func ExampleWorkspace(t testing.TB) string {
	t.Helper()
	return CopyDir(t, exampleWorkspace)
}

// ExampleCassette is the path of the example's shipped cassette.
func ExampleCassette() string { return Repo(exampleCassette) }

// ExampleReplay is a provider replaying the example's shipped cassette.
func ExampleReplay(t testing.TB) *provider.Replay {
	t.Helper()
	replay, err := provider.LoadReplay(ExampleCassette())
	if err != nil {
		t.Fatal(err)
	}
	return replay
}

// Endpointed is a scripted provider that says which host it dials,
// api.example.com:443, so the policy's net rules apply to it.
type Endpointed struct{ *provider.Scripted }

// Endpoints names the provider's host.
func (Endpointed) Endpoints() []string { return []string{"api.example.com:443"} }
