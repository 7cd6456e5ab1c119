package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// AnthropicName is the default Name of an Anthropic provider, and the
// Served of its turns.
const AnthropicName = "anthropic"

// Defaults of AnthropicConfig.
const (
	// DefaultAnthropicBaseURL is the API root /v1/messages is appended to.
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	// DefaultAnthropicVersion is the anthropic-version header sent.
	DefaultAnthropicVersion = "2023-06-01"
	// DefaultAnthropicMaxTokens is the max_tokens sent when neither the
	// request nor the config sets one; the Messages API requires it.
	DefaultAnthropicMaxTokens = 8192
	// DefaultAnthropicTimeout bounds one call.
	DefaultAnthropicTimeout = 600 * time.Second
)

// maxAnswerBytes bounds how much of an answer a client reads: far more
// than any completion, and less than would hurt a worker.
const maxAnswerBytes = 32 << 20

// maxErrorBytes bounds how much of an error answer is read for its
// message.
const maxErrorBytes = 64 << 10

// AnthropicConfig configures a client for Anthropic's Messages API. The
// zero value with APIKey set talks to api.anthropic.com with the defaults
// below.
type AnthropicConfig struct {
	// Name is the provider's Name and the Served of its turns. Default
	// "anthropic".
	Name string
	// APIKey is sent as the x-api-key header. Required; main reads it from
	// ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL is the API root that /v1/messages is appended to. Default
	// DefaultAnthropicBaseURL, https://api.anthropic.com.
	BaseURL string
	// Model, when set, replaces the model named in every request
	// ("claude-sonnet-4-5"). Default empty: the request's Model is sent.
	Model string
	// Version is sent as the anthropic-version header. Default
	// DefaultAnthropicVersion, 2023-06-01.
	Version string
	// Headers are extra HTTP headers sent with every request
	// ("anthropic-beta"). They are set after the client's own, so one with
	// the same name (even x-api-key) replaces it. Default none.
	Headers map[string]string
	// HTTPClient sends the requests. It is copied, never modified. When
	// its CheckRedirect is nil the copy does not follow redirects. Default
	// a client on http.DefaultTransport.
	HTTPClient *http.Client
	// Timeout bounds one call, from sending the request to reading the
	// whole answer, streamed or not. Default DefaultAnthropicTimeout,
	// 600s. A shorter deadline on the context wins.
	Timeout time.Duration
	// MaxTokens is the max_tokens sent when the request's MaxOutputTokens
	// is zero. Default DefaultAnthropicMaxTokens, 8192.
	MaxTokens int
	// NoPromptCache leaves out the prompt-cache breakpoints (cache_control)
	// every request otherwise carries on its system prompt and its last two
	// user messages. Default false: the transcript's stable prefix is
	// cached, and its reads are billed at the cached rate.
	NoPromptCache bool
}

// Validate checks the config. It returns a *protocol.Error: CodeMissingField
// when APIKey is empty, CodeInvalidField when BaseURL is not an absolute
// http(s) URL, Version or a header cannot be sent, Name is blank but not
// empty, or Timeout or MaxTokens is negative.
func (c AnthropicConfig) Validate() error {
	if strings.TrimSpace(c.APIKey) == "" {
		return protocol.FieldError(protocol.CodeMissingField, "APIKey",
			"set ANTHROPIC_API_KEY to an API key for the provider",
			"the Anthropic provider has no API key")
	}
	if err := checkCommon(c.Name, c.BaseURL, DefaultAnthropicBaseURL, c.Headers, c.Timeout); err != nil {
		return err
	}
	if strings.ContainsAny(c.Version, "\r\n\x00") {
		return protocol.FieldError(protocol.CodeInvalidField, "Version",
			"use a version date such as "+DefaultAnthropicVersion,
			"anthropic-version %q cannot be sent", c.Version)
	}
	if c.MaxTokens < 0 {
		return protocol.FieldError(protocol.CodeInvalidField, "MaxTokens",
			"use a positive number, or zero for 8192",
			"max tokens is negative")
	}
	return nil
}

// Anthropic is a Provider and Streamer for Anthropic's Messages API,
// written on net/http. It is safe for concurrent use.
type Anthropic struct {
	name      string
	client    *http.Client
	url       string
	header    http.Header // every request's headers, the key included
	model     string
	maxTokens int
	timeout   time.Duration
	noCache   bool
}

// Endpoints names the host:port the client dials, so a worker can check it
// against a run's policy before calling.
func (a *Anthropic) Endpoints() []string { return []string{endpointOf(a.url)} }

// AcceptsImages reports that the Messages API takes images.
func (a *Anthropic) AcceptsImages() bool { return true }

var (
	_ Provider = (*Anthropic)(nil)
	_ Streamer = (*Anthropic)(nil)
)

// NewAnthropic returns a client configured by cfg. It returns
// cfg.Validate's error when the config is not usable; an empty APIKey is a
// CodeMissingField error saying to set ANTHROPIC_API_KEY.
func NewAnthropic(cfg AnthropicConfig) (*Anthropic, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Anthropic{
		name:      cfg.Name,
		client:    httpClient(cfg.HTTPClient),
		url:       strings.TrimRight(cfg.BaseURL, "/") + "/v1/messages",
		model:     cfg.Model,
		maxTokens: cfg.MaxTokens,
		timeout:   cfg.Timeout,
		noCache:   cfg.NoPromptCache,
	}
	if a.name == "" {
		a.name = AnthropicName
	}
	if cfg.BaseURL == "" {
		a.url = DefaultAnthropicBaseURL + "/v1/messages"
	}
	if a.maxTokens == 0 {
		a.maxTokens = DefaultAnthropicMaxTokens
	}
	if a.timeout == 0 {
		a.timeout = DefaultAnthropicTimeout
	}
	version := cfg.Version
	if version == "" {
		version = DefaultAnthropicVersion
	}
	a.header = http.Header{
		"X-Api-Key":         {cfg.APIKey},
		"Anthropic-Version": {version},
		"Content-Type":      {"application/json"},
	}
	for k, v := range cfg.Headers {
		a.header.Set(k, v)
	}
	return a, nil
}

// Name returns AnthropicConfig.Name: "anthropic" unless configured
// otherwise.
func (a *Anthropic) Name() string { return a.name }

// Complete sends req to the Messages API and returns the answer as a turn
// whose Served is Name():
//
//   - Text is the answer's text blocks joined, and nothing else.
//   - Thinking is its thinking and redacted_thinking blocks, in their
//     order: Kind protocol.ThinkingText with the block's Text and
//     Signature, or protocol.ThinkingRedacted with its Data, the
//     signature and data byte for byte as the API sent them.
//   - ToolCalls is its tool_use blocks, Arguments the input object
//     compacted (input that is not JSON, as a stream cut off at its
//     output limit inside a call leaves it, is kept as a JSON string of
//     its text); a missing or repeated id is made unique with
//     uniqueCallIDs, so every result can name its call.
//   - FinishReason is Anthropic's own stop_reason (end_turn, tool_use,
//     max_tokens, pause_turn, refusal, stop_sequence,
//     model_context_window_exceeded), which protocol.Turn.Finish maps.
//   - Usage.InputTokens counts every input token: input_tokens plus cache
//     reads and cache writes, so that CachedTokens
//     (cache_read_input_tokens) and CacheWriteTokens
//     (cache_creation_input_tokens, or the sum of its cache_creation
//     breakdown when only that is given) are parts of it, as with OpenAI.
//     OutputTokens is output_tokens, the thinking included, since
//     Anthropic counts and prices thinking as output. ReasoningTokens,
//     a part of OutputTokens and never more than it, is the answer's
//     output_tokens_details.thinking_tokens where it gives one; where it
//     does not (most answers), an estimate: a token per four bytes of
//     thinking text (rounded up, block by block), redacted blocks, whose
//     text is not known, not counted.
//
// When req.ThinkingBudget is above zero, extended thinking is turned on:
// "thinking": {"type": "enabled", "budget_tokens": ThinkingBudget} is
// sent, and the budget must be under the max_tokens sent (the request's
// MaxOutputTokens, or the config's MaxTokens when that is zero), which it
// is a part of.
//
// The transcript is mapped as the API wants it: System as the top-level
// system prompt; an assistant message as its thinking blocks first,
// unchanged and in order (thinking with its text and signature,
// redacted_thinking with its data; Thinking of another kind, from a
// provider that signs nothing, is left out), then a text block, then its
// tool_use blocks, since the API wants a signed block back with the
// tool_use it came before; an assistant message with neither text nor
// tool calls is left out, thinking and all, since the API refuses empty
// content; tool results as tool_result blocks in one user message, with a
// user message that follows them in the same message. Arguments that are
// not a JSON object (a model's broken JSON, kept as a string) are sent as
// {"arguments": <what the model wrote>}, since the API wants an object.
//
// The request is refused before sending, with CodeProviderRequest whose
// Field names the offending field, when no model is known, a message has
// an unknown role, a tool result names no call or a call no earlier
// assistant message made, a tool's Parameters is not valid JSON, or the
// thinking budget is negative or not under max_tokens (Field
// "thinking_budget"). Every other error is classified as described on
// Provider: 429 is CodeRateLimited with RetryAfterMS from Retry-After
// (seconds or an HTTP date), 401 and 403 CodeProviderAuth, 5xx and 529
// (overloaded) CodeProviderServer, a 400 saying the prompt is too long
// CodeContextOverflow, any other 4xx or a redirect CodeProviderRequest, a
// body that is not a message CodeProviderMalformed, a deadline
// CodeProviderTimeout, and a lost connection or a cancelled ctx
// CodeProviderTransport.
func (a *Anthropic) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	return a.call(ctx, req, false, nil)
}

// CompleteStream sends req with "stream": true, calls onToken with each
// text_delta as it arrives, and returns the same turn Complete returns for
// the same answer, put together from the events message_start,
// content_block_start, content_block_delta (text_delta, input_json_delta,
// thinking_delta and signature_delta), message_delta (stop reason and
// usage) and message_stop. Thinking is kept in the turn's Thinking and is
// never passed to onToken, which is given the answer's text only.
//
// It fails as Complete does, and also: an error event (overloaded_error,
// rate_limit_error, ...) is classified as the HTTP status of that error
// type would be, so an overloaded stream is CodeProviderServer; a stream
// that ends before message_stop, cut off in the middle of an event or
// between two, is CodeProviderTransport; an event that is not JSON, or a
// delta for a block that never started, is CodeProviderMalformed. A
// stream that ends right after the data of its message_stop or error
// event, without the blank line that closes it, is read as if the line
// had come, as Anthropic's SDKs read it: that data is whole JSON, so
// nothing of the answer is missing. Cut off so inside any other event, it
// is CodeProviderTransport.
func (a *Anthropic) CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error) {
	return a.call(ctx, req, true, onToken)
}

func (a *Anthropic) call(ctx context.Context, req *protocol.CompletionRequest, stream bool, onToken func(string)) (*protocol.Turn, error) {
	if err := ctxError(ctx, a.name); err != nil {
		return nil, err
	}
	body, model, f := a.messagesRequest(req, stream)
	if f != nil {
		return nil, classify(*f)
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return nil, classify(failure{provider: a.name, notSent: true, err: err})
	}
	hreq.Header = a.header.Clone()
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	resp, err := a.client.Do(hreq)
	if err != nil {
		return nil, classify(failure{provider: a.name, err: cause(ctx, err)})
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil, classify(a.statusFailure(ctx, resp))
	}
	var t *protocol.Turn
	var sf *failure
	if stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t, sf = a.readStream(ctx, resp, onToken)
	} else {
		// Not a stream (or a gateway that answered a stream request with
		// the whole message): read it whole.
		t, sf = a.readMessage(ctx, resp)
		if sf == nil && onToken != nil && t.Text != "" {
			onToken(t.Text)
		}
	}
	if sf != nil {
		return nil, classify(*sf)
	}
	if t.Model == "" {
		t.Model = model
	}
	return t, nil
}

// statusFailure reads an error answer: Anthropic's error type and message
// when the body is its error JSON, the body's text otherwise.
func (a *Anthropic) statusFailure(ctx context.Context, resp *http.Response) failure {
	f := failure{provider: a.name, status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		f.message = redirectMessage(resp.StatusCode, resp.Header)
		return f
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	if err != nil && len(raw) == 0 {
		// The status says enough; the reason is lost with the body.
		f.message = "the error's body was cut off: " + cause(ctx, err).Error()
		return f
	}
	var e anthropicErrorBody
	if json.Unmarshal(raw, &e) == nil && e.Error != nil && e.Error.Message != "" {
		f.apiCode = e.Error.Type
		f.message = e.Error.Message + " (" + e.Error.Type + ")"
		return f
	}
	f.message = strings.TrimSpace(string(raw))
	return f
}

// readMessage reads a whole (non-streamed) message.
func (a *Anthropic) readMessage(ctx context.Context, resp *http.Response) (*protocol.Turn, *failure) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		// Cut off on the way: a transport failure or a timeout.
		return nil, &failure{provider: a.name, status: resp.StatusCode, header: resp.Header, err: cause(ctx, err)}
	}
	bad := func(format string, args ...any) (*protocol.Turn, *failure) {
		return nil, &failure{provider: a.name, status: resp.StatusCode, header: resp.Header, bad: true,
			message: fmt.Sprintf(format, args...)}
	}
	if len(raw) > maxAnswerBytes {
		return bad("the answer is larger than %d bytes", maxAnswerBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return bad("the body is empty")
	}
	var m anthropicMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return bad("the body is not a message: %s", err.Error())
	}
	if m.Type == "error" && m.Error != nil {
		return nil, a.eventFailure(resp.Header, m.Error)
	}
	if m.Type != "message" {
		return bad("the body is not a message: its type is %q", m.Type)
	}
	var acc messageTurn
	acc.start(&m)
	for i := range m.Content {
		acc.blocks = append(acc.blocks, newBlock(i, &m.Content[i]))
	}
	return acc.turn(a.name), nil
}

// eventFailure is the failure for an error Anthropic reported in place of
// the answer, after the status line said 200.
func (a *Anthropic) eventFailure(h http.Header, e *anthropicError) *failure {
	return &failure{provider: a.name, header: h, inStream: true, status: errorTypeStatus(e.Type),
		apiCode: e.Type, message: e.Message + " (" + e.Type + ")"}
}

// messagesRequest maps req onto the Messages API's request body, or says
// why it cannot be sent. It returns the model it names.
func (a *Anthropic) messagesRequest(req *protocol.CompletionRequest, stream bool) ([]byte, string, *failure) {
	refuse := func(field, format string, args ...any) ([]byte, string, *failure) {
		return nil, "", &failure{provider: a.name, notSent: true, field: field, message: fmt.Sprintf(format, args...)}
	}
	if req == nil {
		return refuse("", "no request")
	}
	w := anthropicRequest{Model: a.model, MaxTokens: req.MaxOutputTokens, Stream: stream}
	if req.System != "" {
		w.System = []anthropicContent{{Type: "text", Text: &req.System}}
	}
	if w.Model == "" {
		w.Model = req.Model
	}
	if w.Model == "" {
		return refuse("model", "no model is named; set the contract's provider.model or the worker's model")
	}
	if w.MaxTokens <= 0 {
		w.MaxTokens = a.maxTokens
	}
	switch b := req.ThinkingBudget; {
	case b < 0:
		return refuse("thinking_budget", "the thinking budget of %d tokens is negative; use zero for no thinking", b)
	case b >= w.MaxTokens:
		return refuse("thinking_budget", "the thinking budget of %d tokens is not under max_tokens %d, which it is a part of; raise provider.max_output_tokens above it, or lower provider.thinking.budget_tokens", b, w.MaxTokens)
	case b > 0:
		w.Thinking = &anthropicThinking{Type: "enabled", BudgetTokens: b}
	}
	w.Messages = make([]anthropicMessageParam, 0, len(req.Messages))
	calls := map[string]bool{} // ids of the tool calls made so far
	// results is true while the last message sent is a user message of
	// tool results, which the next tool result or user text joins.
	results := false
	for i, m := range req.Messages {
		switch m.Role {
		case protocol.RoleUser:
			blocks := []anthropicContent{{Type: "text", Text: &m.Content}}
			for _, img := range m.Images {
				blocks = append(blocks, anthropicContent{Type: "image", Source: &anthropicImage{Type: "base64", MediaType: img.MediaType, Data: img.Data}})
			}
			if results {
				last := &w.Messages[len(w.Messages)-1]
				last.Content = append(last.Content, blocks...)
			} else {
				w.Messages = append(w.Messages, anthropicMessageParam{Role: "user", Content: blocks})
			}
			results = false
		case protocol.RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				continue // nothing the API would take, its thinking alone included
			}
			blocks := thinkingBlocks(m.Thinking)
			if m.Content != "" {
				blocks = append(blocks, anthropicContent{Type: "text", Text: &m.Content})
			}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
				blocks = append(blocks, anthropicContent{Type: "tool_use", ID: c.ID, Name: c.Name, Input: inputObject(c.Arguments)})
			}
			w.Messages = append(w.Messages, anthropicMessageParam{Role: "assistant", Content: blocks})
			results = false
		case protocol.RoleTool:
			field := fmt.Sprintf("messages[%d].tool_call_id", i)
			if m.ToolCallID == "" {
				return refuse(field, "a tool result must name the call it answers")
			}
			if !calls[m.ToolCallID] {
				return refuse(field, "no assistant message before it made a tool call with id %q", m.ToolCallID)
			}
			block := anthropicContent{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content}
			if results {
				last := &w.Messages[len(w.Messages)-1]
				last.Content = append(last.Content, block)
			} else {
				w.Messages = append(w.Messages, anthropicMessageParam{Role: "user", Content: []anthropicContent{block}})
			}
			results = true
		default:
			return refuse(fmt.Sprintf("messages[%d].role", i), "unknown role %q; use user, assistant or tool", m.Role)
		}
	}
	for i, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptySchema
		} else if !json.Valid(params) {
			return refuse(fmt.Sprintf("tools[%d].parameters", i), "the schema of tool %q is not valid JSON", t.Name)
		}
		w.Tools = append(w.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: params})
	}
	if !a.noCache {
		w.markCache()
	}
	body, err := json.Marshal(w)
	if err != nil {
		// Every raw field is valid JSON by now; say so rather than panic.
		return refuse("", "the request cannot be encoded: %s", err.Error())
	}
	return body, w.Model, nil
}

// thinkingBlocks returns an assistant message's thinking as the blocks the
// API gave it in, unchanged: thinking with its text and signature,
// redacted_thinking with its data. Thinking of other kinds (another
// provider's reasoning, which no one signed) is left out.
func thinkingBlocks(th []protocol.Thinking) []anthropicContent {
	var blocks []anthropicContent
	for i := range th {
		switch t := &th[i]; t.Kind {
		case protocol.ThinkingText:
			blocks = append(blocks, anthropicContent{Type: "thinking", Thinking: &t.Text, Signature: &t.Signature})
		case protocol.ThinkingRedacted:
			blocks = append(blocks, anthropicContent{Type: "redacted_thinking", Data: &t.Data})
		}
	}
	return blocks
}

// inputObject returns a tool call's arguments as the JSON object the API
// wants for a tool_use input: the arguments when they are an object, {}
// when they are empty, and {"arguments": <them>} otherwise (a model's
// broken JSON is kept as a string of its text).
func inputObject(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	if raw[0] == '{' && json.Valid(raw) {
		return raw
	}
	if !json.Valid(raw) {
		raw, _ = json.Marshal(string(raw)) // a string always marshals
	}
	return json.RawMessage(`{"arguments":` + string(raw) + `}`)
}

// markCache puts prompt-cache breakpoints on the request: on the system
// prompt (which caches the tools before it too), on the last message (what
// the next turn reads back), and on the user message before it (what this
// turn reads back, written by the turn before). Three of the four the API
// allows; thinking blocks take none, so the last block that can is marked.
func (w *anthropicRequest) markCache() {
	if n := len(w.System); n > 0 {
		w.System[n-1].CacheControl = ephemeral
	}
	marked := 0
	for i := len(w.Messages) - 1; i >= 0 && marked < 2; i-- {
		m := &w.Messages[i]
		if marked == 1 && m.Role != "user" {
			continue
		}
		for j := len(m.Content) - 1; j >= 0; j-- {
			if b := &m.Content[j]; b.Type != "thinking" && b.Type != "redacted_thinking" {
				b.CacheControl = ephemeral
				marked++
				break
			}
		}
	}
}

// ephemeral is the prompt cache's one kind of breakpoint.
var ephemeral = &anthropicCache{Type: "ephemeral"}

type anthropicCache struct {
	Type string `json:"type"`
}

// The Messages API's request, as it travels.
type anthropicRequest struct {
	Model     string                  `json:"model"`
	MaxTokens int                     `json:"max_tokens"`
	System    []anthropicContent      `json:"system,omitempty"`
	Messages  []anthropicMessageParam `json:"messages"`
	Tools     []anthropicTool         `json:"tools,omitempty"`
	Stream    bool                    `json:"stream,omitempty"`
	Thinking  *anthropicThinking      `json:"thinking,omitempty"`
}

// anthropicThinking turns extended thinking on.
type anthropicThinking struct {
	Type         string `json:"type"` // "enabled"
	BudgetTokens int    `json:"budget_tokens"`
}

type anthropicMessageParam struct {
	Role    string             `json:"role"`
	Content []anthropicContent `json:"content"`
}

// anthropicContent is a content block of a request: text, image,
// thinking, redacted_thinking, tool_use or tool_result.
type anthropicContent struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      *string         `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	Source    *anthropicImage `json:"source,omitempty"`
	// CacheControl marks the end of a prefix to cache.
	CacheControl *anthropicCache `json:"cache_control,omitempty"`
}

// anthropicImage is an image block's source: base64 data.
type anthropicImage struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// The Messages API's answer, whole or in message_start.
type anthropicMessage struct {
	Type       string           `json:"type"`
	Model      string           `json:"model"`
	Content    []anthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      anthropicUsage   `json:"usage"`
	Error      *anthropicError  `json:"error"`
}

// anthropicBlock is a content block of an answer, whole or as
// content_block_start gives it.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"` // redacted_thinking's
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// anthropicUsage is a usage block. Fields are pointers because
// message_delta carries only the counts that changed.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	// CacheCreation is the cache writes by lifetime, which newer answers
	// give beside (or, from some gateways, in place of) their total.
	CacheCreation *struct {
		Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	// OutputTokensDetails counts the thinking among the output, where
	// the API reports it.
	OutputTokensDetails *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type anthropicErrorBody struct {
	Type  string          `json:"type"`
	Error *anthropicError `json:"error"`
}

// messageTurn gathers an answer, whole or from its events, so both give
// the same turn.
type messageTurn struct {
	model string
	stop  string
	usage struct{ input, output, cacheWrite, cacheRead int64 }
	// thinking is the API's own count of thinking tokens, nil when it
	// gave none.
	thinking *int64
	blocks   []*blockTurn // in order of index
}

// blockTurn is one content block being put together.
type blockTurn struct {
	index     int
	typ       string
	text      []byte // a text block's text, or a thinking block's
	signature string // a thinking block's
	data      string // a redacted_thinking block's
	id        string
	name      string
	input     json.RawMessage // the start's input, replaced by deltas when any arrive
	json      []byte          // input_json_delta fragments
	delta     bool            // an input_json_delta arrived
}

// newBlock returns the block b as it starts, at index.
func newBlock(index int, b *anthropicBlock) *blockTurn {
	bt := &blockTurn{index: index, typ: b.Type, text: []byte(b.Text), signature: b.Signature, data: b.Data,
		id: b.ID, name: b.Name, input: b.Input}
	if b.Type == "thinking" {
		bt.text = []byte(b.Thinking)
	}
	return bt
}

func (a *messageTurn) start(m *anthropicMessage) {
	a.model = m.Model
	a.stop = m.StopReason
	a.addUsage(&m.Usage)
}

// addUsage takes the counts u carries; message_delta's are cumulative, so
// a later count replaces an earlier one.
func (a *messageTurn) addUsage(u *anthropicUsage) {
	set := func(dst *int64, src *int64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&a.usage.input, u.InputTokens)
	set(&a.usage.output, u.OutputTokens)
	set(&a.usage.cacheWrite, u.CacheCreationInputTokens)
	set(&a.usage.cacheRead, u.CacheReadInputTokens)
	if d := u.OutputTokensDetails; d != nil && d.ThinkingTokens != nil {
		n := *d.ThinkingTokens
		a.thinking = &n
	}
	if c := u.CacheCreation; u.CacheCreationInputTokens == nil && c != nil {
		var sum int64
		for _, n := range []*int64{c.Ephemeral5m, c.Ephemeral1h} {
			if n != nil {
				sum += *n
			}
		}
		a.usage.cacheWrite = sum
	}
}

func (a *messageTurn) block(index int) *blockTurn {
	for _, b := range a.blocks {
		if b.index == index {
			return b
		}
	}
	return nil
}

// turn maps the gathered answer onto a turn served by name.
func (a *messageTurn) turn(name string) *protocol.Turn {
	t := &protocol.Turn{
		Model:        a.model,
		FinishReason: a.stop,
		Served:       name,
		Usage: protocol.Usage{
			InputTokens:      a.usage.input + a.usage.cacheWrite + a.usage.cacheRead,
			OutputTokens:     a.usage.output,
			CachedTokens:     a.usage.cacheRead,
			CacheWriteTokens: a.usage.cacheWrite,
		},
	}
	var text []byte
	var thought int64 // estimated tokens of thinking text
	for _, b := range a.blocks {
		switch b.typ {
		case "text":
			text = append(text, b.text...)
		case "thinking":
			t.Thinking = append(t.Thinking, protocol.Thinking{Kind: protocol.ThinkingText, Text: string(b.text), Signature: b.signature})
			thought += (int64(len(b.text)) + 3) / 4
		case "redacted_thinking":
			t.Thinking = append(t.Thinking, protocol.Thinking{Kind: protocol.ThinkingRedacted, Data: b.data})
		case "tool_use":
			args := b.input
			if b.delta {
				args = b.json
			}
			t.ToolCalls = append(t.ToolCalls, protocol.ToolCall{ID: b.id, Name: b.name, Arguments: inputArguments(args)})
		}
	}
	uniqueCallIDs(t.ToolCalls)
	t.Text = string(text)
	if a.thinking != nil {
		thought = *a.thinking // counted, not estimated
	}
	t.Usage.ReasoningTokens = min(thought, t.Usage.OutputTokens)
	return t
}

// inputArguments turns a tool_use input into a call's Arguments: compacted
// when it is JSON, a JSON string of its text when not (a stream whose
// fragments do not join into JSON), and {} when empty.
func inputArguments(raw []byte) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`)
	}
	if !json.Valid(raw) {
		b, _ := json.Marshal(string(raw)) // a string always marshals
		return b
	}
	return bytes.Clone(compactJSON(raw))
}

// errStreamCut is the cause of a stream that ended before message_stop.
var errStreamCut = errors.New("the stream ended before message_stop")
