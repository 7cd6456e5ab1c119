package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// AnthropicWire is Anthropic's Messages API: POST /v1/messages with the
// key in x-api-key and an anthropic-version header, answered with a
// message or a stream of typed events ending with message_stop.
type AnthropicWire struct{}

var _ Wire = AnthropicWire{}

// Name returns "anthropic".
func (AnthropicWire) Name() string { return "anthropic" }

// Path returns "/v1/messages".
func (AnthropicWire) Path() string { return "/v1/messages" }

// The Messages API request as it travels, from the API reference. Unknown
// fields are refused.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    json.RawMessage    `json:"system,omitempty"` // a string or an array of text blocks
	Messages  []anthropicMessage `json:"messages"`
	Tools     []struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools,omitempty"`
	Stream bool `json:"stream,omitempty"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of blocks
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   *string         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// CacheControl is a prompt-cache breakpoint: {"type": "ephemeral"}.
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control,omitempty"`
}

// maxBreakpoints is how many cache_control marks the API takes in one
// request.
const maxBreakpoints = 4

// breakpoint checks a block's cache_control and counts it.
func breakpoint(b anthropicBlock, where string, n *int) error {
	if b.CacheControl == nil {
		return nil
	}
	if b.CacheControl.Type != "ephemeral" {
		return fmt.Errorf("%s: cache_control type %q, want ephemeral", where, b.CacheControl.Type)
	}
	if *n++; *n > maxBreakpoints {
		return fmt.Errorf("%s: more than %d cache_control breakpoints", where, maxBreakpoints)
	}
	return nil
}

// systemText reads the system prompt: a string, or text blocks joined.
func systemText(raw json.RawMessage, marks *int) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthropicBlock
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&blocks); err != nil {
		return "", fmt.Errorf("system: %w", err)
	}
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return "", fmt.Errorf("system[%d]: a %q block, want text", i, b.Type)
		}
		if err := breakpoint(b, fmt.Sprintf("system[%d]", i), marks); err != nil {
			return "", err
		}
		s += *b.Text
	}
	return s, nil
}

// Decode checks x-api-key, anthropic-version and the JSON content type,
// decodes the body strictly, and checks the rules the API enforces: a
// positive max_tokens; the first message from the user; non-empty text
// blocks; tool_use inputs that are objects; every tool_result answering a
// tool_use of the assistant message right before, and standing before any
// text in its message.
func (AnthropicWire) Decode(header http.Header, body []byte) (*protocol.CompletionRequest, bool, error) {
	if got := header.Get("X-Api-Key"); got != APIKey {
		return nil, false, fmt.Errorf("x-api-key = %q, want the key", got)
	}
	if header.Get("Anthropic-Version") == "" {
		return nil, false, fmt.Errorf("no anthropic-version header")
	}
	if got := header.Get("Content-Type"); got != "application/json" {
		return nil, false, fmt.Errorf("Content-Type = %q, want application/json", got)
	}
	var w anthropicRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, false, fmt.Errorf("decode body: %w", err)
	}
	if w.MaxTokens <= 0 {
		return nil, false, fmt.Errorf("max_tokens = %d, want a positive number", w.MaxTokens)
	}
	marks := 0
	system, err := systemText(w.System, &marks)
	if err != nil {
		return nil, false, err
	}
	req := &protocol.CompletionRequest{Model: w.Model, System: system, MaxOutputTokens: w.MaxTokens}
	var lastUses map[string]bool // tool_use ids of the assistant message before
	for i, m := range w.Messages {
		if i == 0 && m.Role != "user" {
			return nil, false, fmt.Errorf("messages[0]: role %q, want user first", m.Role)
		}
		var blocks []anthropicBlock
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			blocks = []anthropicBlock{{Type: "text", Text: &s}}
		} else {
			d := json.NewDecoder(bytes.NewReader(m.Content))
			d.DisallowUnknownFields()
			if err := d.Decode(&blocks); err != nil {
				return nil, false, fmt.Errorf("messages[%d].content: %w", i, err)
			}
		}
		if len(blocks) == 0 {
			return nil, false, fmt.Errorf("messages[%d]: empty content", i)
		}
		for j, b := range blocks {
			if err := breakpoint(b, fmt.Sprintf("messages[%d].content[%d]", i, j), &marks); err != nil {
				return nil, false, err
			}
		}
		switch m.Role {
		case "user":
			var text []string
			for j, b := range blocks {
				switch b.Type {
				case "tool_result":
					if len(text) > 0 {
						return nil, false, fmt.Errorf("messages[%d].content[%d]: a tool_result after text", i, j)
					}
					if !lastUses[b.ToolUseID] {
						return nil, false, fmt.Errorf("messages[%d].content[%d]: tool_result for %q answers no tool_use of the message before", i, j, b.ToolUseID)
					}
					content := ""
					if b.Content != nil {
						content = *b.Content
					}
					req.Messages = append(req.Messages, protocol.Message{Role: protocol.RoleTool, ToolCallID: b.ToolUseID, Content: content})
				case "text":
					if b.Text == nil || *b.Text == "" {
						return nil, false, fmt.Errorf("messages[%d].content[%d]: empty text block", i, j)
					}
					text = append(text, *b.Text)
				default:
					return nil, false, fmt.Errorf("messages[%d].content[%d]: block type %q in a user message", i, j, b.Type)
				}
			}
			if len(text) > 0 {
				req.Messages = append(req.Messages, protocol.Message{Role: protocol.RoleUser, Content: strings.Join(text, "")})
			}
			lastUses = nil
		case "assistant":
			pm := protocol.Message{Role: protocol.RoleAssistant}
			lastUses = map[string]bool{}
			for j, b := range blocks {
				switch b.Type {
				case "text":
					if b.Text == nil || *b.Text == "" {
						return nil, false, fmt.Errorf("messages[%d].content[%d]: empty text block", i, j)
					}
					pm.Content += *b.Text
				case "tool_use":
					if b.ID == "" || b.Name == "" || !bytes.HasPrefix(bytes.TrimSpace(b.Input), []byte("{")) {
						return nil, false, fmt.Errorf("messages[%d].content[%d]: tool_use needs an id, a name and an object input", i, j)
					}
					lastUses[b.ID] = true
					pm.ToolCalls = append(pm.ToolCalls, protocol.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				default:
					return nil, false, fmt.Errorf("messages[%d].content[%d]: block type %q in an assistant message", i, j, b.Type)
				}
			}
			req.Messages = append(req.Messages, pm)
		default:
			return nil, false, fmt.Errorf("messages[%d]: role %q", i, m.Role)
		}
	}
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, protocol.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return req, w.Stream, nil
}

// anthropicStop is the stop_reason for an OpenAI finish reason.
func anthropicStop(finish string) string {
	switch finish {
	case "stop":
		return "end_turn"
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	}
	return finish
}

// usage is t's usage as Anthropic counts it: input_tokens without the
// cache reads, which are counted apart.
func (AnthropicWire) usage(t *protocol.Turn) map[string]any {
	return map[string]any{
		"input_tokens":                t.Usage.InputTokens - t.Usage.CachedTokens,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     t.Usage.CachedTokens,
		"output_tokens":               t.Usage.OutputTokens,
	}
}

// Answer is the message answering with t: a text block when there is
// text, then a tool_use block per call.
func (a AnthropicWire) Answer(t *protocol.Turn) []byte {
	content := []any{}
	if t.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": t.Text})
	}
	for _, c := range t.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Arguments})
	}
	return mustJSON(map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": t.Model, "content": content,
		"stop_reason": nilIfEmpty(anthropicStop(t.FinishReason)), "stop_sequence": nil, "usage": a.usage(t),
	})
}

// Events are t as Anthropic streams it: message_start (with the input
// usage), a ping, a text block in text_delta fragments, a tool_use block
// per call with its input in input_json_delta fragments, message_delta
// with the stop reason and the output usage, and message_stop.
func (a AnthropicWire) Events(t *protocol.Turn) [][]byte {
	ev := func(v map[string]any) []byte { return sse(v["type"].(string), mustJSON(v)) }
	start := a.usage(t)
	start["output_tokens"] = 1
	events := [][]byte{
		ev(map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_test", "type": "message", "role": "assistant", "model": t.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": start}}),
		ev(map[string]any{"type": "ping"}),
	}
	index := 0
	if t.Text != "" {
		events = append(events, ev(map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}}))
		for _, piece := range fragments(t.Text, 4) {
			events = append(events, ev(map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": piece}}))
		}
		events = append(events, ev(map[string]any{"type": "content_block_stop", "index": index}))
		index++
	}
	for _, c := range t.ToolCalls {
		events = append(events, ev(map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}}))
		pieces := append([]string{""}, fragments(string(c.Arguments), 5)...)
		for _, piece := range pieces {
			events = append(events, ev(map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": piece}}))
		}
		events = append(events, ev(map[string]any{"type": "content_block_stop", "index": index}))
		index++
	}
	events = append(events,
		ev(map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": nilIfEmpty(anthropicStop(t.FinishReason)), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": t.Usage.OutputTokens}}),
		ev(map[string]any{"type": "message_stop"}),
	)
	return events
}

// anthropicErrorType is the error type Anthropic sends with an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// ErrorBody is {"type": "error", "error": {"type", "message"}}.
func (AnthropicWire) ErrorBody(status int, message string) []byte {
	return mustJSON(map[string]any{"type": "error",
		"error": map[string]any{"type": anthropicErrorType(status), "message": message}, "request_id": "req_test"})
}

// ErrorEvent is an error event, as Anthropic sends when an answer fails
// mid-stream (overloaded_error for 529).
func (AnthropicWire) ErrorEvent(status int, message string) []byte {
	return sse("error", mustJSON(map[string]any{"type": "error",
		"error": map[string]any{"type": anthropicErrorType(status), "message": message}}))
}

// Expect returns a copy of turn with Served empty, the finish reason in
// Anthropic's words, no reasoning tokens (Anthropic does not count them
// apart) and tool arguments compacted (Anthropic sends an object, not the
// model's text).
func (AnthropicWire) Expect(turn *protocol.Turn) *protocol.Turn {
	t := clone(turn)
	t.Served = ""
	t.FinishReason = anthropicStop(t.FinishReason)
	t.Usage.ReasoningTokens = 0
	for i := range t.ToolCalls {
		t.ToolCalls[i].Arguments = compact(t.ToolCalls[i].Arguments)
	}
	return t
}
