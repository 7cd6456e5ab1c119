package assemble

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// op is one tool call of a test step and its result.
type op struct {
	call protocol.ToolCall
	res  Result
}

func args(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mkop(id, tool string, a any, out string) op {
	return op{call: protocol.ToolCall{ID: id, Name: tool, Arguments: args(a)}, res: Result{CallID: id, Content: out}}
}

func rd(id, path, out string) op { return mkop(id, "read_file", map[string]string{"path": path}, out) }
func wr(id, path string) op {
	return mkop(id, "write_file", map[string]string{"path": path, "content": "x"}, "wrote "+path)
}
func ex(id string, argv []string, out string) op {
	return mkop(id, "exec", map[string][]string{"argv": argv}, out)
}
func gr(id, pattern, out string) op {
	return mkop(id, "grep", map[string]string{"pattern": pattern}, out)
}

func failed(o op) op { o.res.IsError = true; return o }

// st is step n: a turn with text and the ops' calls, and their results.
func st(n int, text string, ops ...op) Step {
	s := Step{N: n, Turn: protocol.Message{Role: protocol.RoleAssistant, Content: text}}
	for _, o := range ops {
		s.Turn.ToolCalls = append(s.Turn.ToolCalls, o.call)
		s.Results = append(s.Results, o.res)
	}
	return s
}

// request marshals what Assemble's messages make a request of.
func request(t testing.TB, in Input, msgs []protocol.Message) []byte {
	t.Helper()
	b, err := json.Marshal(protocol.CompletionRequest{System: in.System, Messages: msgs, Tools: in.Tools})
	if err != nil {
		t.Fatalf("marshal the request: %v", err)
	}
	return b
}

// checkPairs checks that every tool call has exactly one tool message
// answering it, after it and before the next assistant turn, and that
// every tool message answers a call of the turn before it.
func checkPairs(msgs []protocol.Message) error {
	open := map[string]int{} // call id -> results seen, for the current turn
	for i, m := range msgs {
		switch m.Role {
		case protocol.RoleAssistant:
			for id, n := range open {
				if n != 1 {
					return fmt.Errorf("call %q before message %d has %d results, want 1", id, i, n)
				}
			}
			open = map[string]int{}
			for _, c := range m.ToolCalls {
				if _, dup := open[c.ID]; dup {
					return fmt.Errorf("message %d repeats the call id %q", i, c.ID)
				}
				open[c.ID] = 0
			}
		case protocol.RoleTool:
			n, ok := open[m.ToolCallID]
			if !ok {
				return fmt.Errorf("message %d answers %q, which the turn before did not call", i, m.ToolCallID)
			}
			open[m.ToolCallID] = n + 1
		}
	}
	for id, n := range open {
		if n != 1 {
			return fmt.Errorf("call %q at the end has %d results, want 1", id, n)
		}
	}
	return nil
}

// contents lists the messages as role: content lines, for failures.
func contents(msgs []protocol.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		c := m.Content
		if len(c) > 80 {
			c = c[:80] + "..."
		}
		fmt.Fprintf(&b, "%d %s %s %q", i, m.Role, m.ToolCallID, c)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, " [%s %s]", tc.ID, tc.Name)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// toolContent is the content of the tool message answering id.
func toolContent(t *testing.T, msgs []protocol.Message, id string) string {
	t.Helper()
	for _, m := range msgs {
		if m.Role == protocol.RoleTool && m.ToolCallID == id {
			return m.Content
		}
	}
	t.Fatalf("no tool message answers %q in\n%s", id, contents(msgs))
	return ""
}
