package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// sse writes events as Anthropic streams them: an event line naming the
// data's type, the data (a data line per line of its JSON, as the format
// allows), and the blank line that ends the event.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var typ struct{ Type string }
		json.Unmarshal([]byte(e), &typ)
		b.WriteString("event: " + typ.Type + "\ndata: " + strings.ReplaceAll(e, "\n", "\ndata: ") + "\n\n")
	}
	return b.String()
}

// anthropicWire answers a stream request with events and any other with
// whole, as the Messages API does.
func anthropicWire(whole string, events []string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			answerBody(200, "text/event-stream", sse(events...))(w, r)
			return
		}
		answerBody(200, "application/json", whole)(w, r)
	}
}

// bothWays completes simpleRequest whole and streamed against the answer,
// checks the two turns are equal and the tokens streamed are the turn's
// Text, and returns the whole turn.
func bothWays(t *testing.T, whole string, events []string) *protocol.Turn {
	t.Helper()
	p := newFakeAnthropic(t, anthropicWire(whole, events)).newClient(t, nil)
	plain, err := p.Complete(t.Context(), simpleRequest())
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	var tokens []string
	streamed, err := p.CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
	if err != nil {
		t.Fatalf("CompleteStream: %v", err)
	}
	if diff := cmp.Diff(plain, streamed); diff != "" {
		t.Errorf("streamed turn differs from the plain one (-plain +streamed):\n%s", diff)
	}
	if got := strings.Join(tokens, ""); got != plain.Text {
		t.Errorf("tokens join to %q, want the turn's text %q", got, plain.Text)
	}
	return plain
}

// The signed blocks of the answers below, with the characters of base64
// that a careless copy might change.
const (
	testSignature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/w=="
	testRedacted  = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj=="
)

// TestAnthropicThinkingTurns checks thinking and redacted_thinking blocks
// are kept in the turn's Thinking, in order and unchanged, whole and
// streamed alike, and never in its Text or the streamed tokens.
func TestAnthropicThinkingTurns(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		events []string
		want   *protocol.Turn
	}{
		{
			name: "thinking, redacted thinking, text and a tool call",
			answer: `{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
				"content": [
					{"type": "thinking", "thinking": "The user wants the tests run.\n\nI'll call exec with go test: 2 × 3 = 6.", "signature": "` + testSignature + `"},
					{"type": "redacted_thinking", "data": "` + testRedacted + `"},
					{"type": "text", "text": "I'll run the tests."},
					{"type": "tool_use", "id": "toolu_01A", "name": "exec", "input": {"argv": ["go", "test", "./..."]}}
				],
				"stop_reason": "tool_use", "stop_sequence": null,
				"usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}`,
			events: []string{
				`{"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 2095, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}`,
				`{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants the tests run.\n\n"}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I'll call exec with go test: 2 × 3 = 6."}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "` + testSignature + `"}}`,
				`{"type": "content_block_stop", "index": 0}`,
				`{"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "` + testRedacted + `"}}`,
				`{"type": "content_block_stop", "index": 1}`,
				`{"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "I'll run "}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "the tests."}}`,
				`{"type": "content_block_stop", "index": 2}`,
				`{"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "exec", "input": {}}}`,
				`{"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"argv\": [\"go\", "}}`,
				`{"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "\"test\", \"./...\"]}"}}`,
				`{"type": "content_block_stop", "index": 3}`,
				`{"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 503}}`,
				`{"type": "message_stop"}`,
			},
			want: &protocol.Turn{
				Text:      "I'll run the tests.",
				ToolCalls: []protocol.ToolCall{{ID: "toolu_01A", Name: "exec", Arguments: json.RawMessage(`{"argv":["go","test","./..."]}`)}},
				Thinking: []protocol.Thinking{
					{Kind: protocol.ThinkingText, Text: "The user wants the tests run.\n\nI'll call exec with go test: 2 × 3 = 6.", Signature: testSignature},
					{Kind: protocol.ThinkingRedacted, Data: testRedacted},
				},
				Model:        "claude-sonnet-4-5",
				FinishReason: "tool_use",
				// 71 bytes of thinking text: 18 tokens, the redacted block uncounted.
				Usage: protocol.Usage{InputTokens: 2095, OutputTokens: 503, ReasoningTokens: 18},
			},
		},
		{
			name: "two thinking blocks, the estimate capped at the output",
			answer: `{"type": "message", "model": "claude-x", "stop_reason": "end_turn",
				"content": [
					{"type": "thinking", "thinking": "` + strings.Repeat("a", 41) + `", "signature": "s1"},
					{"type": "text", "text": "Done."},
					{"type": "thinking", "thinking": "` + strings.Repeat("b", 40) + `", "signature": "s2"}
				],
				"usage": {"input_tokens": 3, "output_tokens": 12}}`,
			events: []string{
				`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}}}`,
				`{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "` + strings.Repeat("a", 41) + `"}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s1"}}`,
				`{"type": "content_block_stop", "index": 0}`,
				`{"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}`,
				`{"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Done."}}`,
				`{"type": "content_block_stop", "index": 1}`,
				`{"type": "content_block_start", "index": 2, "content_block": {"type": "thinking", "thinking": "` + strings.Repeat("b", 20) + `"}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "thinking_delta", "thinking": "` + strings.Repeat("b", 20) + `"}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "signature_delta", "signature": "s2"}}`,
				`{"type": "content_block_stop", "index": 2}`,
				`{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}}`,
				`{"type": "message_stop"}`,
			},
			want: &protocol.Turn{
				Text: "Done.",
				Thinking: []protocol.Thinking{
					{Kind: protocol.ThinkingText, Text: strings.Repeat("a", 41), Signature: "s1"},
					{Kind: protocol.ThinkingText, Text: strings.Repeat("b", 40), Signature: "s2"},
				},
				Model:        "claude-x",
				FinishReason: "end_turn",
				// 11 + 10 estimated, more than the 12 output tokens reported.
				Usage: protocol.Usage{InputTokens: 3, OutputTokens: 12, ReasoningTokens: 12},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bothWays(t, tt.answer, tt.events)
			want := cloneTurn(tt.want)
			want.Served = "anthropic"
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("turn mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicThinkingSentBack checks an assistant message's thinking is
// sent before its text and tool calls, each block as the API gave it.
func TestAnthropicThinkingSentBack(t *testing.T) {
	f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
	req := &protocol.CompletionRequest{
		Model: "claude-test",
		Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "Run the tests."},
			{
				Role:    protocol.RoleAssistant,
				Content: "Running.",
				ToolCalls: []protocol.ToolCall{
					{ID: "toolu_1", Name: "exec", Arguments: json.RawMessage(`{"argv": ["go", "test"]}`)},
				},
				Thinking: []protocol.Thinking{
					{Kind: protocol.ThinkingText, Text: "Let me <run> them & see.\n", Signature: testSignature},
					{Kind: protocol.ThinkingRedacted, Data: testRedacted},
					{Kind: protocol.ThinkingSummary, Text: "another provider's reasoning"}, // signed by no one: left out
					{Kind: protocol.ThinkingText, Text: "", Signature: "sig-of-empty"},
				},
			},
			{Role: protocol.RoleTool, ToolCallID: "toolu_1", Content: "ok"},
			{Role: protocol.RoleAssistant, Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "alone", Signature: "s"}}}, // no content: left out
			{Role: protocol.RoleUser, Content: "Thanks."},
		},
	}
	if _, err := f.newClient(t, nil).Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	_, bodies := f.requests()
	want := `{
	  "model": "claude-test",
	  "max_tokens": 8192,
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "Run the tests.", "cache_control": {"type": "ephemeral"}}]},
	    {"role": "assistant", "content": [
	      {"type": "thinking", "thinking": "Let me <run> them & see.\n", "signature": "` + testSignature + `"},
	      {"type": "redacted_thinking", "data": "` + testRedacted + `"},
	      {"type": "thinking", "thinking": "", "signature": "sig-of-empty"},
	      {"type": "text", "text": "Running."},
	      {"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"argv": ["go", "test"]}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
	      {"type": "text", "text": "Thanks.", "cache_control": {"type": "ephemeral"}}
	    ]}
	  ]
	}`
	if !jsonEqual(json.RawMessage(want), bodies[0]) {
		t.Errorf("request body:\n%s\nwant:\n%s", bodies[0], want)
	}
}

// TestAnthropicThinkingRoundTrip answers with signed and redacted
// thinking before a tool call, carries the turn into the next request as
// the coordinator does, and checks the assistant content sent back is the
// content the API gave, block for block.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	content := `[
		{"type": "redacted_thinking", "data": "` + testRedacted + `"},
		{"type": "thinking", "thinking": "I should list the files first.", "signature": "` + testSignature + `"},
		{"type": "tool_use", "id": "toolu_9", "name": "list_files", "input": {"dir": "."}}
	]`
	whole := `{"type": "message", "model": "claude-x", "stop_reason": "tool_use", "content": ` + content + `,
		"usage": {"input_tokens": 50, "output_tokens": 40}}`
	events := []string{
		`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 50, "output_tokens": 1}}}`,
		`{"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "` + testRedacted + `"}}`,
		`{"type": "content_block_stop", "index": 0}`,
		`{"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": ""}}`,
		`{"type": "content_block_delta", "index": 1, "delta": {"type": "thinking_delta", "thinking": "I should list the files first."}}`,
		`{"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "` + testSignature + `"}}`,
		`{"type": "content_block_stop", "index": 1}`,
		`{"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "list_files", "input": {}}}`,
		`{"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"dir\": \".\"}"}}`,
		`{"type": "content_block_stop", "index": 2}`,
		`{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}}`,
		`{"type": "message_stop"}`,
	}
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "streamed"}[stream]
		t.Run(name, func(t *testing.T) {
			f := newFakeAnthropic(t, anthropicWire(whole, events))
			p := f.newClient(t, nil)
			call := p.Complete
			if stream {
				call = func(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
					return p.CompleteStream(ctx, req, nil)
				}
			}
			req := simpleRequest()
			turn, err := call(t.Context(), req)
			if err != nil {
				t.Fatalf("first call: %v", err)
			}
			req.Messages = append(req.Messages,
				protocol.Message{Role: protocol.RoleAssistant, Content: turn.Text, ToolCalls: turn.ToolCalls, Thinking: turn.Thinking},
				protocol.Message{Role: protocol.RoleTool, ToolCallID: turn.ToolCalls[0].ID, Content: "a.go"})
			if _, err := call(t.Context(), req); err != nil {
				t.Fatalf("second call: %v", err)
			}
			_, bodies := f.requests()
			var sent struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(bodies[1], &sent); err != nil {
				t.Fatal(err)
			}
			if len(sent.Messages) != 3 || sent.Messages[1].Role != "assistant" {
				t.Fatalf("second request's messages = %s, want user, assistant, user", bodies[1])
			}
			if got := sent.Messages[1].Content; !jsonEqual(json.RawMessage(content), got) {
				t.Errorf("assistant content sent back:\n%s\nwant the answer's:\n%s", got, content)
			}
		})
	}
}

// TestAnthropicThinkingBudget checks the thinking parameter is sent when a
// budget is set, and a budget the API would refuse is refused unsent.
func TestAnthropicThinkingBudget(t *testing.T) {
	tests := []struct {
		name         string
		budget       int
		reqMax       int
		wantThinking string // the thinking field's JSON; "" for none
		wantMax      int
		refused      bool
	}{
		{name: "off", wantMax: 8192},
		{name: "under the request's limit", budget: 2048, reqMax: 4096, wantThinking: `{"type": "enabled", "budget_tokens": 2048}`, wantMax: 4096},
		{name: "under the config's limit", budget: 1024, wantThinking: `{"type": "enabled", "budget_tokens": 1024}`, wantMax: 8192},
		{name: "equal to the limit", budget: 4096, reqMax: 4096, refused: true},
		{name: "over the config's limit", budget: 10000, refused: true},
		{name: "negative", budget: -1, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
			req := simpleRequest()
			req.ThinkingBudget, req.MaxOutputTokens = tt.budget, tt.reqMax
			_, err := f.newClient(t, nil).Complete(t.Context(), req)
			_, bodies := f.requests()
			if tt.refused {
				pe := checkCode(t, err, protocol.CodeProviderRequest)
				if pe.Field != "thinking_budget" {
					t.Errorf("Field = %q, want thinking_budget", pe.Field)
				}
				if len(bodies) != 0 {
					t.Errorf("server got %d requests, want none", len(bodies))
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			var body struct {
				MaxTokens int             `json:"max_tokens"`
				Thinking  json.RawMessage `json:"thinking"`
			}
			if err := json.Unmarshal(bodies[0], &body); err != nil {
				t.Fatal(err)
			}
			if body.MaxTokens != tt.wantMax {
				t.Errorf("max_tokens = %d, want %d", body.MaxTokens, tt.wantMax)
			}
			switch {
			case tt.wantThinking == "" && body.Thinking != nil:
				t.Errorf("thinking = %s, want none sent", body.Thinking)
			case tt.wantThinking != "" && !jsonEqual(json.RawMessage(tt.wantThinking), body.Thinking):
				t.Errorf("thinking = %s, want %s", body.Thinking, tt.wantThinking)
			}
		})
	}
}

// TestAnthropicCacheUsage checks cache writes are counted apart from cache
// reads, whether the answer gives their total or only their breakdown by
// lifetime, and that both are parts of InputTokens.
func TestAnthropicCacheUsage(t *testing.T) {
	tests := []struct {
		name  string
		usage string // the message's usage object
		want  protocol.Usage
	}{
		{
			name:  "total",
			usage: `{"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 5}`,
			want:  protocol.Usage{InputTokens: 3210, OutputTokens: 5, CachedTokens: 3000, CacheWriteTokens: 200},
		},
		{
			name: "total and breakdown",
			usage: `{"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 0, "output_tokens": 5,
				"cache_creation": {"ephemeral_5m_input_tokens": 150, "ephemeral_1h_input_tokens": 50}}`,
			want: protocol.Usage{InputTokens: 210, OutputTokens: 5, CacheWriteTokens: 200},
		},
		{
			name: "breakdown only",
			usage: `{"input_tokens": 10, "cache_read_input_tokens": 40, "output_tokens": 5,
				"cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 25}}`,
			want: protocol.Usage{InputTokens: 175, OutputTokens: 5, CachedTokens: 40, CacheWriteTokens: 125},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := `{"type": "message", "model": "claude-x", "stop_reason": "end_turn",
				"content": [{"type": "text", "text": "Hi."}], "usage": ` + tt.usage + `}`
			events := []string{
				`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": ` + tt.usage + `}}`,
				`{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}}`,
				`{"type": "content_block_stop", "index": 0}`,
				`{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}`,
				`{"type": "message_stop"}`,
			}
			got := bothWays(t, whole, events)
			if diff := cmp.Diff(tt.want, got.Usage); diff != "" {
				t.Errorf("usage mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicDuplicateToolIDs checks every call of a turn gets an id of
// its own when the answer repeats one or leaves one out.
func TestAnthropicDuplicateToolIDs(t *testing.T) {
	whole := `{"type": "message", "model": "claude-x", "stop_reason": "tool_use",
		"content": [
			{"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"argv": ["ls"]}},
			{"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"argv": ["pwd"]}},
			{"type": "tool_use", "name": "list_files", "input": {}}
		],
		"usage": {"input_tokens": 1, "output_tokens": 1}}`
	events := []string{
		`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}`,
		`{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"argv": ["ls"]}}}`,
		`{"type": "content_block_stop", "index": 0}`,
		`{"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {}}}`,
		`{"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"argv\": [\"pwd\"]}"}}`,
		`{"type": "content_block_stop", "index": 1}`,
		`{"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "name": "list_files", "input": {}}}`,
		`{"type": "content_block_stop", "index": 2}`,
		`{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}}`,
		`{"type": "message_stop"}`,
	}
	got := bothWays(t, whole, events)
	want := []protocol.ToolCall{
		{ID: "toolu_1", Name: "exec", Arguments: json.RawMessage(`{"argv":["ls"]}`)},
		{ID: "toolu_1_1", Name: "exec", Arguments: json.RawMessage(`{"argv":["pwd"]}`)},
		{ID: "call_2", Name: "list_files", Arguments: json.RawMessage(`{}`)},
	}
	if diff := cmp.Diff(want, got.ToolCalls); diff != "" {
		t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
	}
}

// TestAnthropicStopReasons checks the turn keeps Anthropic's stop_reason
// and Finish maps it, and that a stream cut off at its output limit inside
// a tool input gives the partial input as a JSON string.
func TestAnthropicStopReasons(t *testing.T) {
	tests := []struct {
		stop string
		want string // Finish()
	}{
		{"end_turn", protocol.FinishStop},
		{"stop_sequence", protocol.FinishStop},
		{"tool_use", protocol.FinishToolCalls},
		{"max_tokens", protocol.FinishMaxTokens},
		{"model_context_window_exceeded", protocol.FinishMaxTokens},
		{"pause_turn", protocol.FinishPause},
		{"refusal", protocol.FinishRefusal},
	}
	for _, tt := range tests {
		t.Run(tt.stop, func(t *testing.T) {
			whole := `{"type": "message", "model": "claude-x", "stop_reason": "` + tt.stop + `",
				"content": [{"type": "text", "text": "Let me "}, {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"path": "a.go"}}],
				"usage": {"input_tokens": 1, "output_tokens": 9}}`
			events := []string{
				`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}`,
				`{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}`,
				`{"type": "content_block_stop", "index": 0}`,
				`{"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}`,
				`{"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a.go\"}"}}`,
				`{"type": "content_block_stop", "index": 1}`,
				`{"type": "message_delta", "delta": {"stop_reason": "` + tt.stop + `", "stop_sequence": null}, "usage": {"output_tokens": 9}}`,
				`{"type": "message_stop"}`,
			}
			got := bothWays(t, whole, events)
			if got.FinishReason != tt.stop || got.Finish() != tt.want {
				t.Errorf("FinishReason = %q, Finish() = %q; want %q, %q", got.FinishReason, got.Finish(), tt.stop, tt.want)
			}
		})
	}

	t.Run("max_tokens inside a tool input", func(t *testing.T) {
		stream := sse(
			`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}`,
			`{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}`,
			`{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a.go\", \"text\": \"pack"}}`,
			`{"type": "content_block_stop", "index": 0}`,
			`{"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null}, "usage": {"output_tokens": 20}}`,
			`{"type": "message_stop"}`,
		)
		f := newFakeAnthropic(t, answerBody(200, "text/event-stream", stream))
		got, err := f.newClient(t, nil).CompleteStream(t.Context(), simpleRequest(), nil)
		if err != nil {
			t.Fatalf("CompleteStream: %v", err)
		}
		want := []protocol.ToolCall{{ID: "toolu_1", Name: "write_file", Arguments: json.RawMessage(`"{\"path\": \"a.go\", \"text\": \"pack"`)}}
		if diff := cmp.Diff(want, got.ToolCalls); diff != "" {
			t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
		}
		if got.Finish() != protocol.FinishMaxTokens {
			t.Errorf("Finish() = %q, want %q", got.Finish(), protocol.FinishMaxTokens)
		}
	})
}

// TestAnthropicStreamEndsWithoutBlankLine checks a stream whose last
// event is not closed by a blank line: a whole message_stop or error
// ends it as it would have with the line, anything else is a cut stream.
func TestAnthropicStreamEndsWithoutBlankLine(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"type\":\"message\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":4,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
	end := "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"
	tests := []struct {
		name   string
		stream string
		want   protocol.Code // 0 for success
	}{
		{name: "message_stop, its line ended", stream: start + end + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n"},
		{name: "message_stop, its line not ended", stream: start + end + "event: message_stop\ndata: {\"type\":\"message_stop\"}"},
		{name: "message_stop with CRLF", stream: start + end + "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n"},
		{
			name:   "error event",
			stream: start + "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}",
			want:   protocol.CodeProviderServer,
		},
		{
			name:   "message_stop cut inside its data",
			stream: start + end + "event: message_stop\ndata: {\"type\":\"message_st",
			want:   protocol.CodeProviderTransport,
		},
		{
			name:   "inside a content_block_delta",
			stream: start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" wor",
			want:   protocol.CodeProviderTransport,
		},
		{
			name:   "after a whole content_block_delta",
			stream: start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" world\"}}\n",
			want:   protocol.CodeProviderTransport,
		},
		{
			name:   "after message_delta",
			stream: start + end[:len(end)-1],
			want:   protocol.CodeProviderTransport,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, answerBody(200, "text/event-stream", tt.stream))
			var tokens []string
			turn, err := f.newClient(t, nil).CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
			if tt.want != 0 {
				checkCode(t, err, tt.want)
				return
			}
			if err != nil {
				t.Fatalf("CompleteStream: %v", err)
			}
			want := &protocol.Turn{Text: "Hello", Model: "claude-x", FinishReason: "end_turn", Served: "anthropic",
				Usage: protocol.Usage{InputTokens: 4, OutputTokens: 2}}
			if diff := cmp.Diff(want, turn); diff != "" {
				t.Errorf("turn mismatch (-want +got):\n%s", diff)
			}
			if got := strings.Join(tokens, ""); got != "Hello" {
				t.Errorf("tokens join to %q, want %q", got, "Hello")
			}
		})
	}
}
