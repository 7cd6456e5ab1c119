package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ioharness/harness/pkg/protocol"
)

// OpenAIWire is the OpenAI chat completions format: POST
// <BasePath>/chat/completions with a bearer key, answered with a
// chat.completion or a stream of chat.completion.chunk data lines ending
// with "data: [DONE]". OpenRouter and other compatible servers speak it
// too.
type OpenAIWire struct {
	// BasePath is the path of the base URL the client is given, to which
	// /chat/completions is appended. Default "/v1".
	BasePath string
	// Header holds headers every request must carry with these values,
	// such as OpenRouter's HTTP-Referer and X-Title. Default none.
	Header http.Header
}

var _ Wire = OpenAIWire{}

// Name returns "openai".
func (OpenAIWire) Name() string { return "openai" }

// Path returns BasePath + "/chat/completions".
func (o OpenAIWire) Path() string {
	base := o.BasePath
	if base == "" {
		base = "/v1"
	}
	return base + "/chat/completions"
}

// The chat completions request as it travels, written from the API
// reference rather than from a client library's types. Unknown fields are
// refused.
type openaiRequest struct {
	Model               string          `json:"model"`
	Messages            []openaiMessage `json:"messages"`
	Tools               []openaiTool    `json:"tools,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content,omitempty"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Decode checks the bearer key, the JSON content type and o.Header, and
// decodes the body strictly. A streamed request must ask for the usage
// (stream_options.include_usage), or the turn's usage would be lost.
func (o OpenAIWire) Decode(header http.Header, body []byte) (*protocol.CompletionRequest, bool, error) {
	if got := header.Get("Authorization"); got != "Bearer "+APIKey {
		return nil, false, fmt.Errorf("Authorization = %q, want the bearer key", got)
	}
	if got := header.Get("Content-Type"); got != "application/json" {
		return nil, false, fmt.Errorf("Content-Type = %q, want application/json", got)
	}
	for k := range o.Header {
		if got, want := header.Get(k), o.Header.Get(k); got != want {
			return nil, false, fmt.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	var w openaiRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, false, fmt.Errorf("decode body: %w", err)
	}
	if w.Stream && (w.StreamOptions == nil || !w.StreamOptions.IncludeUsage) {
		return nil, false, fmt.Errorf("a streamed request without stream_options.include_usage loses the usage")
	}
	req := &protocol.CompletionRequest{Model: w.Model, MaxOutputTokens: max(w.MaxTokens, w.MaxCompletionTokens)}
	calls := map[string]bool{}
	for i, m := range w.Messages {
		content := ""
		if m.Content != nil {
			content = *m.Content
		}
		switch m.Role {
		case "system":
			if i != 0 {
				return nil, false, fmt.Errorf("messages[%d]: a system message after the first", i)
			}
			req.System = content
		case "user":
			req.Messages = append(req.Messages, protocol.Message{Role: protocol.RoleUser, Content: content})
		case "assistant":
			pm := protocol.Message{Role: protocol.RoleAssistant, Content: content}
			for _, c := range m.ToolCalls {
				if c.Type != "function" || c.ID == "" {
					return nil, false, fmt.Errorf("messages[%d]: tool call %+v is not a function call with an id", i, c)
				}
				calls[c.ID] = true
				pm.ToolCalls = append(pm.ToolCalls, protocol.ToolCall{ID: c.ID, Name: c.Function.Name,
					Arguments: arguments(c.Function.Arguments)})
			}
			req.Messages = append(req.Messages, pm)
		case "tool":
			if !calls[m.ToolCallID] {
				return nil, false, fmt.Errorf("messages[%d]: tool result for %q answers no call", i, m.ToolCallID)
			}
			req.Messages = append(req.Messages, protocol.Message{Role: protocol.RoleTool, Content: content, ToolCallID: m.ToolCallID})
		default:
			return nil, false, fmt.Errorf("messages[%d]: role %q", i, m.Role)
		}
	}
	for i, t := range w.Tools {
		if t.Type != "function" {
			return nil, false, fmt.Errorf("tools[%d]: type %q", i, t.Type)
		}
		req.Tools = append(req.Tools, protocol.ToolSpec{Name: t.Function.Name, Description: t.Function.Description,
			Parameters: t.Function.Parameters})
	}
	return req, w.Stream, nil
}

// arguments is a call's arguments string as raw JSON: itself when it is
// JSON, a JSON string of it otherwise.
func arguments(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func (OpenAIWire) usage(t *protocol.Turn) map[string]any {
	return map[string]any{
		"prompt_tokens":             t.Usage.InputTokens,
		"completion_tokens":         t.Usage.OutputTokens,
		"total_tokens":              t.Usage.Total(),
		"prompt_tokens_details":     map[string]any{"cached_tokens": t.Usage.CachedTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": t.Usage.ReasoningTokens, "audio_tokens": 0},
	}
}

// Answer is the chat.completion answering with t: content null when there
// is no text, arguments as a string.
func (o OpenAIWire) Answer(t *protocol.Turn) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if t.Text != "" {
		msg["content"] = t.Text
	}
	var calls []map[string]any
	for _, c := range t.ToolCalls {
		calls = append(calls, map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	return mustJSON(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": t.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": nilIfEmpty(t.FinishReason)}},
		"usage":   o.usage(t), "system_fingerprint": "fp_test",
	})
}

// Events are the chunks of t as OpenAI streams them: the role, the text
// in fragments, each tool call's id and name and then its arguments in
// fragments (every fragment naming the call's index), the finish reason,
// the usage in a chunk with no choices, and [DONE].
func (o OpenAIWire) Events(t *protocol.Turn) [][]byte {
	chunk := func(delta map[string]any, finish any) []byte {
		return sse("", mustJSON(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": t.Model,
			"system_fingerprint": "fp_test",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}))
	}
	events := [][]byte{chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)}
	for _, piece := range fragments(t.Text, 4) {
		events = append(events, chunk(map[string]any{"content": piece}, nil))
	}
	for i, c := range t.ToolCalls {
		events = append(events, chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		for _, piece := range fragments(string(c.Arguments), 5) {
			events = append(events, chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	events = append(events, chunk(map[string]any{}, nilIfEmpty(t.FinishReason)))
	events = append(events, sse("", mustJSON(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": t.Model,
		"choices": []any{}, "usage": o.usage(t),
	})))
	return append(events, []byte("data: [DONE]\n\n"))
}

// openaiErrorType is the error type OpenAI sends with an HTTP status.
func openaiErrorType(status int) (typ, code string) {
	switch {
	case status == 401:
		return "invalid_request_error", "invalid_api_key"
	case status == 429:
		return "requests", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

// ErrorBody is {"error": {"message", "type", "param", "code"}}.
func (OpenAIWire) ErrorBody(status int, message string) []byte {
	typ, code := openaiErrorType(status)
	return mustJSON(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": nilIfEmpty(code)}})
}

// ErrorEvent is a data line holding the error object, as OpenAI sends when
// an answer fails mid-stream.
func (o OpenAIWire) ErrorEvent(status int, message string) []byte {
	return sse("", o.ErrorBody(status, message))
}

// Expect returns a copy of turn with Served empty: the format carries
// every field of a turn.
func (OpenAIWire) Expect(turn *protocol.Turn) *protocol.Turn {
	t := clone(turn)
	t.Served = ""
	return t
}

// sse formats one server-sent event.
func sse(event string, data []byte) []byte {
	var b bytes.Buffer
	if event != "" {
		b.WriteString("event: " + event + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

// fragments splits s into pieces of at most n runes.
func fragments(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// clone returns a deep copy of t.
func clone(t *protocol.Turn) *protocol.Turn {
	c := *t
	c.ToolCalls = nil
	for _, tc := range t.ToolCalls {
		tc.Arguments = bytes.Clone(tc.Arguments)
		c.ToolCalls = append(c.ToolCalls, tc)
	}
	return &c
}

// compact returns raw with insignificant whitespace removed.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
