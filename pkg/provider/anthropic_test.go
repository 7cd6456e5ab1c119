package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// fakeAnthropic is an httptest server for the Messages API that keeps each
// request's headers and raw body and answers with answer.
type fakeAnthropic struct {
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request)

	mu     sync.Mutex
	header []http.Header
	bodies [][]byte
}

func newFakeAnthropic(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeAnthropic {
	t.Helper()
	f := &fakeAnthropic{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			t.Errorf("fake Anthropic server: got %s %s, want POST /v1/messages", r.Method, r.URL.Path)
		}
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.header = append(f.header, r.Header.Clone())
		f.bodies = append(f.bodies, body)
		f.mu.Unlock()
		f.answer(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAnthropic) requests() ([]http.Header, [][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.header...), append([][]byte(nil), f.bodies...)
}

func (f *fakeAnthropic) newClient(t *testing.T, edit func(*AnthropicConfig)) *Anthropic {
	t.Helper()
	cfg := AnthropicConfig{APIKey: testKey, BaseURL: f.srv.URL, HTTPClient: f.srv.Client(), Timeout: 10 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewAnthropic(cfg)
	if err != nil {
		t.Fatalf("NewAnthropic: %v", err)
	}
	return p
}

// answerBody answers every request with status and body.
func answerBody(status int, contentType, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const anthropicHello = `{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-1",
	"content": [{"type": "text", "text": "Hello."}], "stop_reason": "end_turn", "stop_sequence": null,
	"usage": {"input_tokens": 10, "output_tokens": 2}}`

// TestAnthropicRequest checks the body and headers sent for a whole
// transcript, against the Messages API's shape written out by hand.
func TestAnthropicRequest(t *testing.T) {
	f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
	p := f.newClient(t, func(c *AnthropicConfig) {
		c.Headers = map[string]string{"anthropic-beta": "tools-2025", "X-Harness-Run": "run-1"}
	})
	req := &protocol.CompletionRequest{
		Model:  "claude-test",
		System: "You fix code.",
		Tools: []protocol.ToolSpec{
			{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`)},
			{Name: "list_files"},
		},
		Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "Fix the test."},
			{Role: protocol.RoleAssistant, Content: "Reading.", ToolCalls: []protocol.ToolCall{
				{ID: "toolu_a", Name: "read_file", Arguments: json.RawMessage(`{"path": "a_test.go"}`)},
				{ID: "toolu_b", Name: "read_file", Arguments: json.RawMessage(`"{\"path\": "`)}, // broken JSON the model wrote
				{ID: "toolu_c", Name: "list_files"},
			}},
			{Role: protocol.RoleTool, ToolCallID: "toolu_a", Content: "package a"},
			{Role: protocol.RoleTool, ToolCallID: "toolu_b", Content: "bad arguments"},
			{Role: protocol.RoleTool, ToolCallID: "toolu_c"},
			{Role: protocol.RoleUser, Content: "Go on."},
			{Role: protocol.RoleAssistant}, // said nothing: left out
			{Role: protocol.RoleUser, Content: "Well?"},
		},
	}
	if _, err := p.Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	headers, bodies := f.requests()
	for name, want := range map[string]string{
		"X-Api-Key":         testKey,
		"Anthropic-Version": "2023-06-01",
		"Anthropic-Beta":    "tools-2025",
		"X-Harness-Run":     "run-1",
		"Content-Type":      "application/json",
		"Authorization":     "",
	} {
		if got := headers[0].Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	want := `{
	  "model": "claude-test",
	  "max_tokens": 8192,
	  "system": [{"type": "text", "text": "You fix code.", "cache_control": {"type": "ephemeral"}}],
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "Fix the test."}]},
	    {"role": "assistant", "content": [
	      {"type": "text", "text": "Reading."},
	      {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a_test.go"}},
	      {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"arguments": "{\"path\": "}},
	      {"type": "tool_use", "id": "toolu_c", "name": "list_files", "input": {}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_a", "content": "package a"},
	      {"type": "tool_result", "tool_use_id": "toolu_b", "content": "bad arguments"},
	      {"type": "tool_result", "tool_use_id": "toolu_c"},
	      {"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}
	    ]},
	    {"role": "user", "content": [{"type": "text", "text": "Well?", "cache_control": {"type": "ephemeral"}}]}
	  ],
	  "tools": [
	    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
	    {"name": "list_files", "input_schema": {"type": "object", "properties": {}}}
	  ]
	}`
	if !jsonEqual(json.RawMessage(want), bodies[0]) {
		t.Errorf("request body:\n%s\nwant:\n%s", bodies[0], want)
	}
}

func TestAnthropicOutputLimitAndModel(t *testing.T) {
	tests := []struct {
		name       string
		cfg        AnthropicConfig
		reqModel   string
		reqMax     int
		wantModel  string
		wantMax    int
		wantHeader string
	}{
		{name: "defaults", reqModel: "claude-a", wantModel: "claude-a", wantMax: 8192, wantHeader: "2023-06-01"},
		{name: "request limit", reqModel: "claude-a", reqMax: 300, wantModel: "claude-a", wantMax: 300, wantHeader: "2023-06-01"},
		{name: "config limit", cfg: AnthropicConfig{MaxTokens: 4096}, reqModel: "claude-a", wantModel: "claude-a", wantMax: 4096, wantHeader: "2023-06-01"},
		{name: "config model and version", cfg: AnthropicConfig{Model: "claude-b", Version: "2099-01-01"}, reqModel: "claude-a", wantModel: "claude-b", wantMax: 8192, wantHeader: "2099-01-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
			p := f.newClient(t, func(c *AnthropicConfig) {
				c.Model, c.MaxTokens, c.Version = tt.cfg.Model, tt.cfg.MaxTokens, tt.cfg.Version
			})
			req := simpleRequest()
			req.Model, req.MaxOutputTokens = tt.reqModel, tt.reqMax
			if _, err := p.Complete(t.Context(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			headers, bodies := f.requests()
			var body struct {
				Model     string `json:"model"`
				MaxTokens int    `json:"max_tokens"`
				Stream    *bool  `json:"stream"`
			}
			if err := json.Unmarshal(bodies[0], &body); err != nil {
				t.Fatal(err)
			}
			if body.Model != tt.wantModel || body.MaxTokens != tt.wantMax {
				t.Errorf("model = %q, max_tokens = %d; want %q, %d", body.Model, body.MaxTokens, tt.wantModel, tt.wantMax)
			}
			if body.Stream != nil {
				t.Errorf("a plain call sent stream = %v, want no stream field", *body.Stream)
			}
			if got := headers[0].Get("Anthropic-Version"); got != tt.wantHeader {
				t.Errorf("anthropic-version = %q, want %q", got, tt.wantHeader)
			}
		})
	}
}

func TestAnthropicRefusesBeforeSending(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(*protocol.CompletionRequest)
		wantField string
	}{
		{name: "no model", edit: func(r *protocol.CompletionRequest) { r.Model = "" }, wantField: "model"},
		{name: "unknown role", edit: func(r *protocol.CompletionRequest) { r.Messages[0].Role = "system" }, wantField: "messages[0].role"},
		{
			name: "tool result for a call never made",
			edit: func(r *protocol.CompletionRequest) {
				r.Messages = append(r.Messages, protocol.Message{Role: protocol.RoleTool, ToolCallID: "toolu_x", Content: "x"})
			},
			wantField: "messages[1].tool_call_id",
		},
		{
			name: "schema that is not JSON",
			edit: func(r *protocol.CompletionRequest) {
				r.Tools = []protocol.ToolSpec{{Name: "exec", Parameters: json.RawMessage(`{"type":`)}}
			},
			wantField: "tools[0].parameters",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
			req := simpleRequest()
			tt.edit(req)
			_, err := f.newClient(t, nil).Complete(t.Context(), req)
			pe := checkCode(t, err, protocol.CodeProviderRequest)
			if pe.Field != tt.wantField {
				t.Errorf("Field = %q, want %q", pe.Field, tt.wantField)
			}
			if _, bodies := f.requests(); len(bodies) != 0 {
				t.Errorf("server got %d requests, want none", len(bodies))
			}
		})
	}
}

// TestAnthropicTurns checks how messages of various shapes become turns,
// whole and streamed.
func TestAnthropicTurns(t *testing.T) {
	tests := []struct {
		name   string
		answer string   // the whole message
		events []string // the same message streamed, as data lines
		want   *protocol.Turn
	}{
		{
			name: "text blocks around a tool call, thinking kept apart",
			answer: `{"type": "message", "model": "claude-x", "stop_reason": "tool_use",
				"content": [
					{"type": "thinking", "thinking": "hmm", "signature": "sig"},
					{"type": "text", "text": "First. "},
					{"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"argv": ["ls", "-l"]}},
					{"type": "text", "text": "Then."}
				],
				"usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 400}}`,
			events: []string{
				`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "stop_reason": null,
					"usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 400}}}`,
				`{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}`,
				`{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}`,
				`{"type": "content_block_stop", "index": 0}`,
				`{"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}`,
				`{"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "First. "}}`,
				`{"type": "content_block_stop", "index": 1}`,
				`{"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {}}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"argv\": [\"ls\""}}`,
				`{"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ", \"-l\"]}"}}`,
				`{"type": "content_block_stop", "index": 2}`,
				`{"type": "content_block_start", "index": 3, "content_block": {"type": "text", "text": ""}}`,
				`{"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "Then."}}`,
				`{"type": "content_block_stop", "index": 3}`,
				`{"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 20}}`,
				`{"type": "message_stop"}`,
			},
			want: &protocol.Turn{
				Text:         "First. Then.",
				ToolCalls:    []protocol.ToolCall{{ID: "toolu_1", Name: "exec", Arguments: json.RawMessage(`{"argv":["ls","-l"]}`)}},
				Thinking:     []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "hmm", Signature: "sig"}},
				Model:        "claude-x",
				FinishReason: "tool_use",
				Usage:        protocol.Usage{InputTokens: 530, OutputTokens: 20, CachedTokens: 400, CacheWriteTokens: 30, ReasoningTokens: 1},
			},
		},
		{
			name: "tool call with no input",
			answer: `{"type": "message", "model": "claude-x", "stop_reason": "tool_use",
				"content": [{"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}}],
				"usage": {"input_tokens": 5, "output_tokens": 3}}`,
			events: []string{
				`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}}`,
				`{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}}}`,
				`{"type": "content_block_stop", "index": 0}`,
				`{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}`,
				`{"type": "message_stop"}`,
			},
			want: &protocol.Turn{
				ToolCalls: []protocol.ToolCall{{ID: "toolu_2", Name: "list_files", Arguments: json.RawMessage(`{}`)}},
				Model:     "claude-x", FinishReason: "tool_use",
				Usage: protocol.Usage{InputTokens: 5, OutputTokens: 3},
			},
		},
		{
			name: "empty content, and usage message_delta revises",
			answer: `{"type": "message", "model": "claude-x", "stop_reason": "end_turn", "content": [],
				"usage": {"input_tokens": 7, "output_tokens": 0, "cache_read_input_tokens": 3}}`,
			events: []string{
				`{"type": "message_start", "message": {"type": "message", "model": "claude-x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}`,
				`{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 7, "output_tokens": 0, "cache_read_input_tokens": 3}}`,
				`{"type": "message_stop"}`,
			},
			want: &protocol.Turn{Model: "claude-x", FinishReason: "end_turn", Usage: protocol.Usage{InputTokens: 10, CachedTokens: 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
				if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
					answerBody(200, "application/json", tt.answer)(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for _, e := range tt.events {
					var typ struct{ Type string }
					json.Unmarshal([]byte(e), &typ)
					// A data line per line of the JSON, as the format allows.
					io.WriteString(w, "event: "+typ.Type+"\ndata: "+strings.ReplaceAll(e, "\n", "\ndata: ")+"\n\n")
				}
			})
			p := f.newClient(t, nil)
			want := cloneTurn(tt.want)
			want.Served = "anthropic"
			plain, err := p.Complete(t.Context(), simpleRequest())
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(want, plain); diff != "" {
				t.Errorf("Complete turn mismatch (-want +got):\n%s", diff)
			}
			var tokens []string
			streamed, err := p.CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
			if err != nil {
				t.Fatalf("CompleteStream: %v", err)
			}
			if diff := cmp.Diff(plain, streamed); diff != "" {
				t.Errorf("streamed turn differs from the plain one (-plain +streamed):\n%s", diff)
			}
			if got := strings.Join(tokens, ""); got != want.Text {
				t.Errorf("tokens join to %q, want %q", got, want.Text)
			}
		})
	}
}

// TestAnthropicStreamFraming checks the server-sent events parser on what
// the format allows beyond the usual.
func TestAnthropicStreamFraming(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   protocol.Code // 0 for success
		text   string
	}{
		{
			name: "CRLF line ends, comments, multi-line data, events without data, unknown events",
			stream: ": keep-alive\r\n\r\n" +
				"event: message_start\r\ndata: {\"type\": \"message_start\",\r\ndata:  \"message\": {\"type\": \"message\", \"model\": \"m\", \"usage\": {\"input_tokens\": 1}}}\r\n\r\n" +
				"event: ping\r\n\r\n" +
				"event: future_event\r\ndata: {\"type\": \"future_event\", \"x\": 1}\r\n\r\n" +
				"data:{\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": \"text\", \"text\": \"Hi\"}}\r\n\r\n" +
				"data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \" there\"}}\r\n\r\n" +
				"data: {\"type\": \"message_stop\"}\r\n\r\n",
			text: "Hi there",
		},
		{
			name:   "delta for a block that never started",
			stream: "data: {\"type\": \"message_start\", \"message\": {\"type\": \"message\"}}\n\ndata: {\"type\": \"content_block_delta\", \"index\": 3, \"delta\": {\"type\": \"text_delta\", \"text\": \"x\"}}\n\n",
			want:   protocol.CodeProviderMalformed,
		},
		{
			name:   "message_stop before message_start",
			stream: "data: {\"type\": \"message_stop\"}\n\n",
			want:   protocol.CodeProviderMalformed,
		},
		{
			name:   "empty stream",
			stream: "",
			want:   protocol.CodeProviderMalformed,
		},
		{
			name:   "rate limit error event",
			stream: "event: message_start\ndata: {\"type\": \"message_start\", \"message\": {\"type\": \"message\"}}\n\nevent: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"rate_limit_error\", \"message\": \"slow down\"}}\n\n",
			want:   protocol.CodeRateLimited,
		},
		{
			name:   "event line with no blank line after it",
			stream: "data: {\"type\": \"message_start\", \"message\": {\"type\": \"message\"}}\n\nevent: message_stop\n",
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
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("CompleteStream: %v", err)
			}
			if turn.Text != tt.text || strings.Join(tokens, "") != tt.text {
				t.Errorf("text = %q, tokens %q; want %q", turn.Text, tokens, tt.text)
			}
		})
	}
}

// TestAnthropicStreamAnsweredWhole checks a stream request answered with a
// whole message (as some gateways do) is read, and its text handed on.
func TestAnthropicStreamAnsweredWhole(t *testing.T) {
	f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
	var tokens []string
	turn, err := f.newClient(t, nil).CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
	if err != nil {
		t.Fatalf("CompleteStream: %v", err)
	}
	if turn.Text != "Hello." || len(tokens) != 1 || tokens[0] != "Hello." {
		t.Errorf("turn text %q, tokens %q; want Hello. once", turn.Text, tokens)
	}
	_, bodies := f.requests()
	if !bytes.Contains(bodies[0], []byte(`"stream":true`)) {
		t.Errorf("request %s does not ask for a stream", bodies[0])
	}
}

func TestAnthropicErrorInPlaceOfMessage(t *testing.T) {
	f := newFakeAnthropic(t, answerBody(200, "application/json",
		`{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`))
	_, err := f.newClient(t, nil).Complete(t.Context(), simpleRequest())
	pe := checkCode(t, err, protocol.CodeProviderServer)
	if !strings.Contains(pe.Message, "Overloaded") {
		t.Errorf("Message = %q, want the provider's reason", pe.Message)
	}
}

func TestAnthropicContextOverflowWording(t *testing.T) {
	for _, msg := range []string{
		"prompt is too long: 212345 tokens > 200000 maximum",
		"input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or `max_tokens` and try again",
	} {
		f := newFakeAnthropic(t, answerBody(400, "application/json",
			`{"type": "error", "error": {"type": "invalid_request_error", "message": `+jsonString(msg)+`}}`))
		_, err := f.newClient(t, nil).Complete(t.Context(), simpleRequest())
		checkCode(t, err, protocol.CodeContextOverflow)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestNewAnthropic(t *testing.T) {
	tests := []struct {
		name      string
		cfg       AnthropicConfig
		want      protocol.Code // 0 for no error
		wantInErr string
		wantName  string
	}{
		{name: "defaults", cfg: AnthropicConfig{APIKey: "k"}, wantName: "anthropic"},
		{name: "named", cfg: AnthropicConfig{APIKey: "k", Name: "claude-backup"}, wantName: "claude-backup"},
		{name: "no API key", cfg: AnthropicConfig{}, want: protocol.CodeMissingField, wantInErr: "ANTHROPIC_API_KEY"},
		{name: "relative base URL", cfg: AnthropicConfig{APIKey: "k", BaseURL: "api.anthropic.com"}, want: protocol.CodeInvalidField, wantInErr: "BaseURL"},
		{name: "negative timeout", cfg: AnthropicConfig{APIKey: "k", Timeout: -time.Second}, want: protocol.CodeInvalidField, wantInErr: "Timeout"},
		{name: "negative max tokens", cfg: AnthropicConfig{APIKey: "k", MaxTokens: -1}, want: protocol.CodeInvalidField, wantInErr: "MaxTokens"},
		{name: "version with a newline", cfg: AnthropicConfig{APIKey: "k", Version: "2023\n"}, want: protocol.CodeInvalidField, wantInErr: "Version"},
		{name: "bad header", cfg: AnthropicConfig{APIKey: "k", Headers: map[string]string{"a b": "1"}}, want: protocol.CodeInvalidField, wantInErr: "Headers"},
		{name: "blank name", cfg: AnthropicConfig{APIKey: "k", Name: " "}, want: protocol.CodeInvalidField, wantInErr: "Name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewAnthropic(tt.cfg)
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("NewAnthropic(%+v) = %v, want no error", tt.cfg, err)
				}
				if p.Name() != tt.wantName {
					t.Errorf("Name() = %q, want %q", p.Name(), tt.wantName)
				}
				if p.url != DefaultAnthropicBaseURL+"/v1/messages" {
					t.Errorf("url = %q, want the default API", p.url)
				}
				return
			}
			checkCode(t, err, tt.want)
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("NewAnthropic error %q, want it to mention %s", err, tt.wantInErr)
			}
		})
	}
}

// TestAnthropicHTTPClient checks a caller's client is used and not
// modified.
func TestAnthropicHTTPClient(t *testing.T) {
	f := newFakeAnthropic(t, answerBody(200, "application/json", anthropicHello))
	ct := &countingTransport{base: f.srv.Client().Transport}
	hc := &http.Client{Transport: ct}
	p := f.newClient(t, func(c *AnthropicConfig) { c.HTTPClient = hc })
	if _, err := p.Complete(t.Context(), simpleRequest()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if n := ct.n.Load(); n != 1 {
		t.Errorf("caller's transport carried %d round trips, want 1", n)
	}
	if hc.Transport != ct || hc.CheckRedirect != nil {
		t.Errorf("NewAnthropic modified the caller's http.Client")
	}
}

// anthropicBenchAnswer is benchTurn as a message.
const anthropicBenchAnswer = `{"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-test",
	"content": [{"type": "text", "text": "I'll run the tests."},
		{"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"argv": ["go", "test", "./..."]}}],
	"stop_reason": "tool_use", "stop_sequence": null,
	"usage": {"input_tokens": 900, "output_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}`

// BenchmarkAnthropicComplete measures one call through the client against
// a local server that answers at once. Compare with
// BenchmarkAnthropicRawHTTP.
func BenchmarkAnthropicComplete(b *testing.B) {
	srv, client := benchServer(b, []byte(anthropicBenchAnswer))
	p, err := NewAnthropic(AnthropicConfig{APIKey: testKey, BaseURL: srv, HTTPClient: client})
	if err != nil {
		b.Fatal(err)
	}
	req := conversation()[2].req
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnthropicRawHTTP posts the bytes the Anthropic client sends for
// the same request with a bare http.Client and reads the answer, decoding
// nothing: the floor BenchmarkAnthropicComplete is measured against.
func BenchmarkAnthropicRawHTTP(b *testing.B) {
	srv, client := benchServer(b, []byte(anthropicBenchAnswer))
	p, err := NewAnthropic(AnthropicConfig{APIKey: testKey, BaseURL: srv})
	if err != nil {
		b.Fatal(err)
	}
	body, _, f := p.messagesRequest(conversation()[2].req, false)
	if f != nil {
		b.Fatal(classify(*f))
	}
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, srv+"/v1/messages", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Anthropic-Version", DefaultAnthropicVersion)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}
