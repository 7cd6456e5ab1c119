package provider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ioharness/harness/pkg/protocol"
)

// OpenAIName is the Name of an OpenAI provider, and the Served of its turns.
const OpenAIName = "openai"

// DefaultOpenAIBaseURL is the API root used when OpenAIConfig.BaseURL is
// empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// DefaultOpenAITimeout bounds one call when OpenAIConfig.Timeout is zero.
const DefaultOpenAITimeout = 600 * time.Second

// emptySchema is sent for a tool that declares no parameters: the API wants
// an object schema, not null.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// OpenAIConfig configures an OpenAI client. The zero value with APIKey set
// talks to api.openai.com with the defaults below.
type OpenAIConfig struct {
	// Name is the provider's Name and the Served of its turns, so two
	// OpenAI-compatible providers in one Fallback chain can be told apart.
	// Default "openai".
	Name string
	// APIKey is sent as the bearer token. Required; main reads it from
	// OPENAI_API_KEY.
	APIKey string
	// BaseURL is the API root that /chat/completions is appended to. Any
	// OpenAI-compatible server works (vLLM, llama.cpp, OpenRouter, a
	// gateway). Default DefaultOpenAIBaseURL, https://api.openai.com/v1.
	BaseURL string
	// Model, when set, replaces the model named in every request. Default
	// empty: the request's Model is sent.
	Model string
	// Organization is sent as the OpenAI-Organization header. Default
	// empty: no header.
	Organization string
	// Headers are extra HTTP headers sent with every request. They are set
	// after the client's own headers, so one with the same name (even
	// Authorization) replaces it. Default none.
	Headers map[string]string
	// HTTPClient sends the requests. It is copied, and its Transport
	// wrapped, never modified. When its CheckRedirect is nil the copy does
	// not follow redirects, so requests go only to BaseURL's host. Default
	// a client on http.DefaultTransport.
	HTTPClient *http.Client
	// Timeout bounds one call, from sending the request to reading the
	// whole answer, streamed or not. Default DefaultOpenAITimeout, 600s. A
	// shorter deadline on the context passed to Complete wins.
	Timeout time.Duration
}

// Validate checks the config. It returns a *protocol.Error: CodeMissingField
// when APIKey is empty, CodeInvalidField when BaseURL is not an absolute
// http(s) URL, a header name or value cannot be sent, Name is blank but
// not empty, or Timeout is negative.
func (c OpenAIConfig) Validate() error {
	return c.validate("OPENAI_API_KEY", DefaultOpenAIBaseURL)
}

// validate is Validate with the variable main reads the key from and the
// default base URL, both named in the hints.
func (c OpenAIConfig) validate(keyEnv, baseURL string) error {
	if strings.TrimSpace(c.APIKey) == "" {
		return protocol.FieldError(protocol.CodeMissingField, "APIKey",
			"set "+keyEnv+" to an API key for the provider",
			"the %s provider has no API key", c.name())
	}
	return checkCommon(c.Name, c.BaseURL, baseURL, c.Headers, c.Timeout)
}

func (c OpenAIConfig) name() string {
	if c.Name == "" {
		return OpenAIName
	}
	return c.Name
}

// OpenAI is a Provider for the OpenAI chat completions API and servers
// compatible with it. It is safe for concurrent use.
type OpenAI struct {
	name     string
	client   *openai.Client
	model    string
	timeout  time.Duration
	endpoint string // host:port the client dials
	// openRouter says the server speaks OpenRouter's dialect: reasoning is
	// asked for with its unified "reasoning" object, not reasoning_effort.
	openRouter bool
}

var (
	_ Provider = (*OpenAI)(nil)
	_ Streamer = (*OpenAI)(nil)
)

// NewOpenAI returns a client configured by cfg. It returns cfg.Validate's
// error when the config is not usable; an empty APIKey is a
// CodeMissingField error saying to set OPENAI_API_KEY.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newOpenAI(cfg), nil
}

// newOpenAI builds the client from a valid cfg.
func newOpenAI(cfg OpenAIConfig) *OpenAI {
	cc := openai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		cc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	}
	cc.OrgID = cfg.Organization
	// go-openai counts comment and blank lines between stream events as
	// "empty messages" and gives up after 300; OpenRouter sends a comment
	// every few seconds while a slow model thinks, so allow far more. The
	// Timeout still bounds the call.
	cc.EmptyMessagesLimit = 1 << 20

	hc := httpClient(cfg.HTTPClient)
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &transport{base: base, headers: headerOf(cfg.Headers)}
	cc.HTTPClient = hc

	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultOpenAITimeout
	}
	return &OpenAI{name: cfg.name(), client: openai.NewClientWithConfig(cc), model: cfg.Model, timeout: timeout,
		endpoint: endpointOf(cc.BaseURL)}
}

// Endpoints names the host:port the client dials, so a worker can check it
// against a run's policy before calling.
func (o *OpenAI) Endpoints() []string { return []string{o.endpoint} }

// AcceptsImages reports that the chat completions API takes images (as
// content parts); whether the configured model does is the server's to
// say, with a request error.
func (o *OpenAI) AcceptsImages() bool { return true }

// Name returns OpenAIConfig.Name: "openai" unless configured otherwise.
func (o *OpenAI) Name() string { return o.name }

// Complete sends req as one non-streaming chat completion and returns the
// first choice of the answer (choices[0], whatever its index says) as a
// turn whose Served is Name().
//
// req.ReasoningEffort is sent as reasoning_effort; req.ThinkingBudget has
// no OpenAI equivalent and is not sent. A client made by NewOpenRouter
// sends both as OpenRouter's reasoning object instead (see NewOpenRouter).
// The Thinking blocks of req's messages are not sent back: go-openai's
// request message cannot carry them.
//
// The usage gives InputTokens and OutputTokens from prompt_tokens and
// completion_tokens, CachedTokens from prompt_tokens_details.cached_tokens,
// ReasoningTokens from completion_tokens_details.reasoning_tokens and, from
// a server that reports them (OpenRouter), CacheWriteTokens from
// prompt_tokens_details.cache_write_tokens and ReportedCost from
// usage.cost. A message's reasoning text (OpenRouter's message.reasoning)
// becomes one Thinking block of kind protocol.ThinkingSummary, never part
// of Text. A message with a refusal has FinishReason protocol.FinishRefusal
// whatever the choice's finish reason, and the refusal as its Text when it
// has no content.
//
// The request is refused before sending, with CodeProviderRequest whose
// Field names the offending field ("messages[2].role"), when no model is
// known (neither OpenAIConfig.Model nor req.Model), a message has an
// unknown role, a tool message has no ToolCallID, or a tool's Parameters
// is not valid JSON. Every other error is classified from the HTTP status
// or the failure as described on Provider: 429 is CodeRateLimited with
// RetryAfterMS from Retry-After-Ms or Retry-After (seconds or an HTTP
// date), 401 and 403 CodeProviderAuth, 5xx and 529 CodeProviderServer, a
// 400 saying the context length is exceeded CodeContextOverflow, any other
// 4xx or a redirect CodeProviderRequest, a deadline CodeProviderTimeout,
// and a lost connection or a cancelled ctx CodeProviderTransport. An error
// object in a body that came with 200 (OpenRouter's {"error": {"code":
// 429, ...}}), or on the first choice, is classified by its code or type
// as the same error sent as an HTTP status would be, CodeProviderServer
// when it names neither. A body that is not a completion, or has no
// choices and no error, is CodeProviderMalformed.
//
// Tool call arguments the model wrote are kept verbatim when they are valid
// JSON; otherwise they are kept as a JSON string holding the model's text,
// so the caller can report bad arguments. Empty arguments become {}. A tool
// call without an id, or with the id of an earlier call of the turn, is
// given one no other call of the turn has: call_<index>, or the repeated
// id with _<index> added.
func (o *OpenAI) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	if err := ctxError(ctx, o.name); err != nil {
		return nil, err
	}
	wire, f := o.chatRequest(req)
	if f != nil {
		return nil, classify(*f)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	call := &wireCall{keepBody: true, fields: o.bodyFields(req)}
	ctx = context.WithValue(ctx, wireCallKey{}, call)

	resp, err := o.client.CreateChatCompletion(ctx, wire)
	if err != nil {
		return nil, classify(o.failed(ctx, call, err))
	}
	status, header, _ := call.result()
	if status >= 300 && status < 400 {
		return nil, classify(failure{provider: o.name, status: status, header: header,
			message: redirectMessage(status, header)})
	}
	// What go-openai cannot carry is read from the same bytes. Its
	// decoder took them as a completion, so this one only fails on a
	// field of an unexpected type, which is then left out.
	var x chatExtras
	_ = json.NewDecoder(bytes.NewReader(call.body())).Decode(&x)
	var xc chatExtraChoice
	if len(x.Choices) > 0 {
		xc = x.Choices[0]
	}
	if e := cmp.Or(x.Error, xc.Error); e != nil {
		return nil, classify(o.reportedError(header, e))
	}
	if len(resp.Choices) == 0 {
		return nil, classify(failure{provider: o.name, status: status, header: header, bad: true,
			message: "the answer has no choices"})
	}
	c := &resp.Choices[0]
	return o.turn(&chatAnswer{
		model:     resp.Model,
		message:   c.Message,
		finish:    c.FinishReason,
		usage:     usageOf(&resp.Usage, x.Usage),
		reasoning: xc.Message.Reasoning,
	}, wire.Model), nil
}

// bodyFields returns what req asks for that go-openai's request cannot
// carry, for the transport to add to the body: OpenRouter's reasoning
// object, {"max_tokens": ThinkingBudget} when a budget is set and
// {"effort": ReasoningEffort} otherwise. It returns nil when there is
// nothing to add.
func (o *OpenAI) bodyFields(req *protocol.CompletionRequest) map[string]any {
	if !o.openRouter {
		return nil
	}
	switch {
	case req.ThinkingBudget > 0:
		return map[string]any{"reasoning": openRouterReasoning{MaxTokens: req.ThinkingBudget}}
	case req.ReasoningEffort != "":
		return map[string]any{"reasoning": openRouterReasoning{Effort: req.ReasoningEffort}}
	}
	return nil
}

// openRouterReasoning is OpenRouter's unified reasoning parameter: one of
// an effort or a token budget.
type openRouterReasoning struct {
	Effort    string `json:"effort,omitempty"`
	MaxTokens int    `json:"max_tokens,omitempty"`
}

// chatExtras is what go-openai's types cannot carry of a chat completion
// or of one stream chunk, decoded from the same bytes: an error object in
// a body that came with 200, at the top or on a choice (OpenRouter's), a
// choice's reasoning text (OpenRouter's message.reasoning, or
// delta.reasoning in a stream), and OpenRouter's usage.cost and
// prompt_tokens_details.cache_write_tokens. Its Choices are in the order
// of the answer's, so Choices[i] belongs to go-openai's Choices[i].
type chatExtras struct {
	Error   *chatError        `json:"error"`
	Choices []chatExtraChoice `json:"choices"`
	Usage   *chatExtraUsage   `json:"usage"`
}

type chatExtraChoice struct {
	Message chatReasoning `json:"message"`
	Delta   chatReasoning `json:"delta"`
	Error   *chatError    `json:"error"`
}

type chatReasoning struct {
	Reasoning string `json:"reasoning"`
}

type chatExtraUsage struct {
	Cost                float64 `json:"cost"` // credits, each worth a US dollar
	PromptTokensDetails struct {
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
}

// chatError is an error object reported in place of an answer, or of a
// part of one: its code a number (OpenRouter's, an HTTP status) or a
// string (OpenAI's).
type chatError struct {
	Code    any    `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

// reportedError is the failure for an error reported inside an answer that
// came with 200: e is the error object of a whole body, of a stream chunk,
// or of a choice in either, or nil when a stream only said its finish
// reason was "error". It is classified by e's code or type as the same
// error sent as an HTTP status would be, as a server failure when it names
// neither.
func (o *OpenAI) reportedError(header http.Header, e *chatError) failure {
	f := failure{provider: o.name, header: header, inStream: true,
		status: errorTypeStatus(""), message: "the stream finished with reason \"error\""}
	if e != nil {
		code := apiCode(e.Code)
		typ := code
		if typ == "" {
			typ = e.Type
		}
		f.status = errorTypeStatus(typ)
		f.apiCode = code
		f.message = e.Message
		if code != "" {
			f.message += " (" + code + ")"
		}
	}
	return f
}

// usageOf maps a usage object onto Usage: u is what go-openai read of it,
// x what it could not (nil when absent).
func usageOf(u *openai.Usage, x *chatExtraUsage) protocol.Usage {
	var v protocol.Usage
	if u != nil {
		v.InputTokens, v.OutputTokens = int64(u.PromptTokens), int64(u.CompletionTokens)
		if d := u.PromptTokensDetails; d != nil {
			v.CachedTokens = int64(d.CachedTokens)
		}
		if d := u.CompletionTokensDetails; d != nil {
			v.ReasoningTokens = int64(d.ReasoningTokens)
		}
	}
	if x != nil {
		v.CacheWriteTokens = x.PromptTokensDetails.CacheWriteTokens
		v.ReportedCost = x.Cost
	}
	return v
}

// chatRequest maps req onto the chat completions request, or says why it
// cannot be sent.
func (o *OpenAI) chatRequest(req *protocol.CompletionRequest) (openai.ChatCompletionRequest, *failure) {
	refuse := func(field, format string, args ...any) (openai.ChatCompletionRequest, *failure) {
		return openai.ChatCompletionRequest{}, &failure{provider: o.name, notSent: true,
			field: field, message: fmt.Sprintf(format, args...)}
	}
	if req == nil {
		return refuse("", "no request")
	}
	w := openai.ChatCompletionRequest{Model: o.model}
	if w.Model == "" {
		w.Model = req.Model
	}
	if w.Model == "" {
		return refuse("model", "no model is named; set the contract's provider.model or the worker's model")
	}
	w.Messages = make([]openai.ChatCompletionMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		w.Messages = append(w.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: req.System})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case protocol.RoleUser:
			um := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: m.Content}
			if len(m.Images) > 0 {
				// Images go as data URLs beside the text, in content parts.
				um.Content = ""
				um.MultiContent = []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: m.Content}}
				for _, img := range m.Images {
					um.MultiContent = append(um.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
						ImageURL: &openai.ChatMessageImageURL{URL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)}})
				}
			}
			w.Messages = append(w.Messages, um)
		case protocol.RoleAssistant:
			// m.Thinking is not sent: go-openai's message has no field for
			// OpenRouter's reasoning (only DeepSeek's reasoning_content),
			// and OpenAI's chat API takes none back.
			wm := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: m.Content}
			for _, c := range m.ToolCalls {
				wm.ToolCalls = append(wm.ToolCalls, openai.ToolCall{
					ID:       c.ID,
					Type:     openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: c.Name, Arguments: wireArguments(c.Arguments)},
				})
			}
			w.Messages = append(w.Messages, wm)
		case protocol.RoleTool:
			if m.ToolCallID == "" {
				return refuse(fmt.Sprintf("messages[%d].tool_call_id", i), "a tool result must name the call it answers")
			}
			w.Messages = append(w.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, Content: m.Content, ToolCallID: m.ToolCallID})
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
		w.Tools = append(w.Tools, openai.Tool{
			Type:     openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	if n := req.MaxOutputTokens; n > 0 {
		// max_tokens is what most compatible servers read; the models the
		// library knows to refuse it get max_completion_tokens instead.
		w.MaxTokens = n
		if errors.Is(openai.NewReasoningValidator().Validate(w), openai.ErrReasoningModelMaxTokensDeprecated) {
			w.MaxTokens, w.MaxCompletionTokens = 0, n
		}
	}
	if !o.openRouter {
		// OpenRouter's effort goes in its reasoning object (bodyFields).
		w.ReasoningEffort = req.ReasoningEffort
	}
	return w, nil
}

// failed gathers what is known about a call that returned err. ctx is the
// call's context: when its deadline has passed, or it was cancelled, after
// the request went out, that is why the call failed, whatever error the
// library saw on the way.
func (o *OpenAI) failed(ctx context.Context, call *wireCall, err error) failure {
	f := failure{provider: o.name, err: err}
	status, header, readErr := call.result()
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		f.status = apiErr.HTTPStatusCode
		f.apiCode = apiCode(apiErr.Code)
		if f.apiCode == "" {
			f.apiCode = apiErr.Type // insufficient_quota comes as a type with code null
		}
		f.message = apiErr.Message
		if f.apiCode != "" {
			f.message += " (" + f.apiCode + ")"
		}
		if f.status == 0 && status >= 200 && status < 300 {
			// An error event inside a stream that began with 200.
			f.inStream = true
			f.status = errorTypeStatus(f.apiCode)
		}
	case errors.As(err, &reqErr):
		f.status = reqErr.HTTPStatusCode
		f.message = strings.TrimSpace(string(reqErr.Body))
		if f.message == "" && reqErr.Err != nil {
			f.message = reqErr.Err.Error()
		}
	}
	if f.status == 0 {
		f.status = status
	}
	f.header = header
	switch {
	case !call.wasSent():
		f.notSent = true
	case ctx.Err() != nil && !f.inStream && (f.status == 0 || f.status >= 200 && f.status < 300):
		// The deadline or the caller ended the call after it went out;
		// the library's error may only say a read failed.
		f.err, f.message = ctx.Err(), ""
	case readErr != nil:
		// The answer was cut off on the way: a transport failure or a
		// timeout, not a malformed answer.
		f.err = readErr
	case f.inStream:
	case status != 0:
		f.bad = true
		if f.message == "" {
			f.message = "the body is not a chat completion: " + err.Error()
			if errors.Is(err, io.EOF) {
				f.message = "the body is empty"
			}
		}
	}
	if f.status >= 300 && f.status < 400 {
		f.message = redirectMessage(f.status, header)
	}
	return f
}

// chatAnswer is the one choice of an answer a turn is made of, whole or
// gathered from a stream, with the answer's model and usage.
type chatAnswer struct {
	model     string // as the server named it; empty when it did not
	message   openai.ChatCompletionMessage
	finish    openai.FinishReason
	usage     protocol.Usage
	reasoning string // the choice's reasoning text (OpenRouter's)
}

// turn maps an answer onto a turn; model is the one asked for, named when
// the answer names none.
func (o *OpenAI) turn(a *chatAnswer, model string) *protocol.Turn {
	m := &a.message
	t := &protocol.Turn{
		Text:         m.Content,
		Model:        cmp.Or(a.model, model),
		FinishReason: string(a.finish),
		Served:       o.name,
		Usage:        a.usage,
	}
	if m.Refusal != "" {
		// A refusal is no answer: the turn says so, whatever the choice's
		// finish reason.
		t.FinishReason = protocol.FinishRefusal
		if t.Text == "" {
			t.Text = m.Refusal
		}
	}
	if a.reasoning != "" {
		t.Thinking = []protocol.Thinking{{Kind: protocol.ThinkingSummary, Text: a.reasoning}}
	}
	calls := m.ToolCalls
	if len(calls) == 0 && m.FunctionCall != nil {
		calls = []openai.ToolCall{{Function: *m.FunctionCall}}
	}
	for _, wc := range calls {
		t.ToolCalls = append(t.ToolCalls, protocol.ToolCall{
			ID:        wc.ID,
			Name:      wc.Function.Name,
			Arguments: toolArguments(wc.Function.Arguments),
		})
	}
	uniqueCallIDs(t.ToolCalls)
	return t
}

// toolArguments keeps the model's arguments verbatim when they are JSON,
// as a JSON string of its text when they are not, and as {} when empty.
func toolArguments(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// wireArguments is the inverse of toolArguments: the text to send back as a
// tool call's arguments string. A JSON string is unquoted, so arguments the
// model wrote as invalid JSON go back exactly as it wrote them.
func wireArguments(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// apiCode returns an API error's code as text: OpenAI sends a string,
// some compatible servers a number.
func apiCode(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case int:
		if v == 0 {
			return "" // go-openai reads "code": null as 0
		}
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// wireCallKey is the context key under which Complete leaves a *wireCall
// for the transport to fill in.
type wireCallKey struct{}

// wireCall is what the transport saw of one call: whether a request went
// out, the status and headers of the last answer, an error that cut its
// body short and, for a stream, the last bytes of the body read so far,
// or, for a whole answer, all of it. go-openai returns neither headers nor
// body read errors with its errors, reports a stream that ends early as
// one that ended well, and drops the fields its types lack, so the
// transport keeps what it saw here. It also carries the fields the
// transport adds to the request body.
type wireCall struct {
	// Set before the call.
	keepTail bool           // keep the body's last bytes
	keepBody bool           // keep the whole body, as go-openai holds it too
	fields   map[string]any // added to the request's JSON body; see bodyFields

	mu      sync.Mutex
	sent    bool
	status  int
	header  http.Header
	readErr error
	tail    []byte
	whole   []byte
}

// tailSize is how many of a stream's last bytes a wireCall keeps: enough
// for "data: [DONE]" and the line breaks around it.
const tailSize = 32

func (c *wireCall) read(p []byte) {
	if len(p) == 0 || !c.keepTail && !c.keepBody {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keepBody {
		c.whole = append(c.whole, p...)
	}
	if !c.keepTail {
		return
	}
	if len(p) >= tailSize {
		c.tail = append(c.tail[:0], p[len(p)-tailSize:]...)
		return
	}
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - tailSize; over > 0 {
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

// body returns the body read so far of a call that keeps it whole. It is
// not copied: read it only once the body has been read.
func (c *wireCall) body() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.whole
}

// lastBytes returns a copy of the last bytes of the body read so far.
func (c *wireCall) lastBytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tail)
}

func (c *wireCall) markSent() {
	c.mu.Lock()
	c.sent = true
	c.mu.Unlock()
}

func (c *wireCall) answered(resp *http.Response) {
	c.mu.Lock()
	c.status, c.header, c.readErr = resp.StatusCode, resp.Header, nil
	c.whole = c.whole[:0]
	c.mu.Unlock()
}

func (c *wireCall) failedRead(err error) {
	c.mu.Lock()
	if c.readErr == nil {
		c.readErr = err
	}
	c.mu.Unlock()
}

func (c *wireCall) wasSent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

func (c *wireCall) result() (int, http.Header, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header, c.readErr
}

// transport sends the configured extra headers, adds the call's fields to
// the request body, and records each answer in the call's *wireCall, found
// through the request's context.
type transport struct {
	base    http.RoundTripper
	headers http.Header
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.headers {
			req.Header[k] = slices.Clone(vs)
		}
	}
	call, _ := req.Context().Value(wireCallKey{}).(*wireCall)
	if call == nil {
		return t.base.RoundTrip(req)
	}
	if len(call.fields) > 0 {
		var err error
		if req, err = withFields(req, call.fields); err != nil {
			return nil, err
		}
	}
	call.markSent()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	call.answered(resp)
	resp.Body = &watchedBody{ReadCloser: resp.Body, call: call}
	return resp, nil
}

// withFields returns a copy of req whose JSON body has fields added (or
// replaced), closing req's body. It fails when the body cannot be read or
// is not a JSON object.
func withFields(req *http.Request, fields map[string]any) (*http.Request, error) {
	if req.Body == nil {
		return nil, errors.New("add fields to the request body: no body")
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("add fields to the request body: %w", err)
	}
	for k, v := range fields {
		if body[k], err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("add %s to the request body: %w", k, err)
		}
	}
	if raw, err = json.Marshal(body); err != nil {
		return nil, fmt.Errorf("add fields to the request body: %w", err)
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(raw))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	req.ContentLength = int64(len(raw))
	return req, nil
}

// watchedBody records an error that cuts a response body short, so a lost
// connection is told apart from an answer that is not JSON.
type watchedBody struct {
	io.ReadCloser
	call *wireCall
}

// Read reads from the body, keeping its last bytes and any error other
// than io.EOF in the call.
func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.call.read(p[:n])
	if err != nil && err != io.EOF {
		b.call.failedRead(err)
	}
	return n, err
}
