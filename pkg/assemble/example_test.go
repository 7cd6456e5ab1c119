package assemble_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ioharness/harness/pkg/assemble"
	"github.com/ioharness/harness/pkg/protocol"
)

func Example() {
	call := func(id, tool, args string) protocol.Message {
		return protocol.Message{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: id, Name: tool, Arguments: json.RawMessage(args)}}}
	}
	failing := strings.Repeat("--- FAIL: TestAdd (0.00s)\n", 80)
	in := assemble.Input{
		System: "You are an agent.",
		Task:   "Task: make go test pass.",
		// The model's window, capped by half of what a token budget has left.
		Budget: assemble.Effective(assemble.Window("openai/gpt-4o"), 0.5, 3_000),
		Output: 1000,
		Steps: []assemble.Step{
			{N: 1, Turn: call("c1", "exec", `{"argv":["go","test"]}`), Results: []assemble.Result{{CallID: "c1", Content: failing}}},
			{N: 2, Turn: call("c2", "read_file", `{"path":"add.go"}`), Results: []assemble.Result{{CallID: "c2", Content: "return a - b"}}},
			{N: 3, Turn: call("c3", "edit_file", `{"path":"add.go","search":"-","replace":"+"}`), Results: []assemble.Result{{CallID: "c3", Content: "edited add.go"}}},
			{N: 4, Turn: call("c4", "exec", `{"argv":["go","test"]}`), Results: []assemble.Result{{CallID: "c4", Content: failing}}},
		},
		Step: 5,
	}
	fmt.Println("budget:", in.Budget)
	out := assemble.Assemble(in)
	for _, s := range out.Stale {
		fmt.Printf("read %s again: read at step %d, written at step %d\n", s.Path, s.Step, s.WrittenAt)
	}
	// The caller reads it again and assembles once more.
	in.Fresh = map[string]string{"c2": "return a + b"}
	out = assemble.Assemble(in)
	fmt.Printf("stale: %d, re-read: %d, stubbed: %d, within budget: %v\n", len(out.Stale), out.Stats.Reread, out.Stats.Stubbed, out.Stats.Estimate <= in.Budget)
	for _, m := range out.Messages[:5] {
		fmt.Printf("%s %q\n", m.Role, m.Content)
	}
	// Output:
	// budget: 2000
	// read add.go again: read at step 2, written at step 3
	// stale: 0, re-read: 1, stubbed: 1, within budget: true
	// user "Task: make go test pass."
	// assistant ""
	// tool "[elided: the output of `go test` at step 1]"
	// assistant ""
	// tool "return a + b"
}
