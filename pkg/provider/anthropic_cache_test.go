package provider

import (
	"encoding/json"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestAnthropicCacheBreakpoints checks where a request's prompt-cache
// breakpoints go: on the system prompt, on the last block of the last
// message and on that of the user message before it, never on a thinking
// block; and that NoPromptCache leaves them all out.
func TestAnthropicCacheBreakpoints(t *testing.T) {
	req := &protocol.CompletionRequest{Model: "claude-test", System: "You fix code.", Messages: []protocol.Message{
		{Role: protocol.RoleUser, Content: "Fix the test."},
		{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}}},
		{Role: protocol.RoleTool, ToolCallID: "a", Content: "package a"},
		{Role: protocol.RoleAssistant, Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "hm", Signature: "sig"}},
			ToolCalls: []protocol.ToolCall{{ID: "b", Name: "exec", Arguments: json.RawMessage(`{"argv":["go","test"]}`)}}},
		{Role: protocol.RoleTool, ToolCallID: "b", Content: "FAIL"},
	}}
	for _, tt := range []struct {
		name    string
		noCache bool
		want    []string // the blocks marked, as "where:type"
	}{
		{"breakpoints", false, []string{"system:text", "messages[2]:tool_result", "messages[4]:tool_result"}},
		{"no prompt cache", true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
			p := f.newClient(t, func(c *AnthropicConfig) { c.NoPromptCache = tt.noCache })
			if _, err := p.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			_, bodies := f.requests()
			var w struct {
				System   []map[string]any `json:"system"`
				Messages []struct {
					Content []map[string]any `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(bodies[0], &w); err != nil {
				t.Fatal(err)
			}
			var got []string
			mark := func(where string, b map[string]any) {
				if b["cache_control"] == nil {
					return
				}
				if cc, _ := b["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
					t.Errorf("%s: cache_control %v, want ephemeral", where, b["cache_control"])
				}
				got = append(got, where+":"+b["type"].(string))
			}
			for _, b := range w.System {
				mark("system", b)
			}
			for i, m := range w.Messages {
				for _, b := range m.Content {
					mark("messages["+string(rune('0'+i))+"]", b)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("breakpoints %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("breakpoints %q, want %q", got, tt.want)
				}
			}
		})
	}
}
