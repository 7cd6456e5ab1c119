package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Roles of a transcript message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of a multi-turn transcript: a user message, an
// assistant turn (text and tool calls), or a tool result matched to its call
// by ToolCallID.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Images ride on a user message, for models that accept them.
	Images []Image `json:"images,omitempty"`
	// Thinking is an assistant turn's reasoning, as its provider gave it
	// (Turn.Thinking): sent back to that provider with the turn, as the
	// Anthropic API requires of signed blocks, and to no tool.
	Thinking []Thinking `json:"thinking,omitempty"`
}

// SameMessage reports whether two messages are equal, field by field (a
// string or slice two messages share compares at once, by its address).
func SameMessage(a, b *Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID &&
		slices.EqualFunc(a.ToolCalls, b.ToolCalls, func(x, y ToolCall) bool {
			return x.ID == y.ID && x.Name == y.Name && bytes.Equal(x.Arguments, y.Arguments)
		}) &&
		slices.EqualFunc(a.Images, b.Images, func(x, y Image) bool {
			return x.MediaType == y.MediaType && bytes.Equal(x.Data, y.Data)
		}) &&
		slices.Equal(a.Thinking, b.Thinking)
}

// SameTools reports whether two tool lists are equal as a request sends
// them: names, descriptions and parameters, in order.
func SameTools(a, b []ToolSpec) bool {
	return slices.EqualFunc(a, b, func(x, y ToolSpec) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Parameters, y.Parameters)
	})
}

// Kinds of Thinking.
const (
	ThinkingText     = "thinking"          // Anthropic's thinking block: text and its signature
	ThinkingRedacted = "redacted_thinking" // Anthropic's redacted block: encrypted data only
	ThinkingSummary  = "reasoning"         // an OpenAI-wire provider's reasoning text (OpenRouter's message.reasoning)
)

// Thinking is one block of a model's reasoning before or between the
// parts of its answer. Signature and Data are opaque, and are sent back
// byte for byte: a changed block is refused by the API that signed it.
type Thinking struct {
	Kind      string `json:"kind"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// Image is a picture for the model: its media type (image/png,
// image/jpeg, image/gif or image/webp) and its bytes (base64 in JSON).
type Image struct {
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// HasImages reports whether any message of the request carries an image.
func (r *CompletionRequest) HasImages() bool {
	for _, m := range r.Messages {
		if len(m.Images) > 0 {
			return true
		}
	}
	return false
}

// ToolCall is the model asking for one tool. Arguments is the JSON object
// the model wrote, kept verbatim.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Gate says what a call of a tool that is not a built-in does, for the
	// policy and a person asked to approve it: which act, on the target
	// which argument names. Nil: the call is judged as an exec of the
	// tool's name.
	Gate *ToolGate `json:"gate,omitempty"`
}

// ToolGate is what a tool's call acts on. Act is "read" or "write" (Arg
// names a workspace path), "exec" (Arg names an argv, an array of
// strings) or "net" (Arg names a host or URL).
type ToolGate struct {
	Act string `json:"act"`
	Arg string `json:"arg"`
}

// CompletionRequest is one provider call: the whole transcript so far.
type CompletionRequest struct {
	Model           string     `json:"model,omitempty"`
	System          string     `json:"system"`
	Messages        []Message  `json:"messages"`
	Tools           []ToolSpec `json:"tools,omitempty"`
	MaxOutputTokens int        `json:"max_output_tokens,omitempty"`
	// ThinkingBudget turns Anthropic's extended thinking on with that many
	// tokens of it (at least 1,024, under MaxOutputTokens); OpenRouter
	// sends it as reasoning.max_tokens. Zero: off.
	ThinkingBudget int `json:"thinking_budget,omitempty"`
	// ReasoningEffort is passed to OpenAI-wire providers as their
	// reasoning effort ("minimal", "low", "medium", "high"). Empty: the
	// model's default.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// Usage is what a provider reports a call cost. InputTokens counts every
// prompt token, those read from and written to the provider's prompt cache
// included (CachedTokens and CacheWriteTokens are parts of it, priced on
// their own); OutputTokens counts every generated token, the reasoning
// ones included (ReasoningTokens is a part of it, priced as output).
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CachedTokens     int64 `json:"cached_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
	// ReportedCost is what the provider itself said the call cost, in its
	// own currency (OpenRouter's usage.cost, in credits worth a US
	// dollar); zero when it said nothing. It is recorded beside the cost
	// the price table gives, never in its place.
	ReportedCost float64 `json:"reported_cost,omitempty"`
}

// Add returns u and v summed, as two reports of parts of one call.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CachedTokens: u.CachedTokens + v.CachedTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens: u.ReasoningTokens + v.ReasoningTokens, ReportedCost: u.ReportedCost + v.ReportedCost}
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Turn is a provider's answer: text, tool calls, usage, and who served it.
type Turn struct {
	Text         string     `json:"text,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	Usage        Usage      `json:"usage"`
	Model        string     `json:"model,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	// Served names the provider that answered ("openai", "replay", ...).
	Served string `json:"served,omitempty"`
	// Thinking is the reasoning the provider returned with the answer, in
	// its order: kept in the transcript and the trace, sent back with the
	// turn, never put in Text nor shown to a tool.
	Thinking []Thinking `json:"thinking,omitempty"`
}

// StepTask is what a coordinator publishes on harness.steps.<pool> for a
// worker: one provider call for one step of one run.
type StepTask struct {
	Run     string            `json:"run"`
	Step    int               `json:"step"`
	Attempt int               `json:"attempt"`
	Request CompletionRequest `json:"request"`
	// Deadline is when the run's wall clock runs out; zero for none. A
	// worker does not start a call it cannot finish before it.
	Deadline time.Time `json:"deadline,omitzero"`
	// Expires is when the coordinator stops waiting for this attempt and
	// publishes the next; zero for never. A worker does not start a call
	// for an expired task: nobody holds a reservation for it any more.
	Expires time.Time `json:"expires,omitzero"`
	// Policy is the run's policy: a worker checks net on its provider's
	// endpoints against it before calling (an explicit deny refuses; an
	// ask is answered by TurnResult.Refused, with no call made).
	Policy *Policy `json:"policy,omitempty"`
	// Transcript names this task's request whole, for a later task of
	// the run to extend: unique to the coordinator's hold of the run and
	// the task's place in it.
	Transcript string `json:"transcript,omitempty"`
	// Base, when set, says the request extends an earlier task's, which
	// the worker that served that task may have kept: Request carries
	// only what follows it. A worker without it asks for the request
	// whole on harness.task.<run>.<step>.<attempt> (WholeRequest).
	Base *TaskBase `json:"base,omitempty"`
}

// TaskBase is what a step task's request takes from an earlier task of
// its run: the request whole is the earlier one's first Messages
// messages followed by Request.Messages, and, when Frame is set, the
// earlier one's system prompt and tools (Request.System and Tools are
// then empty).
type TaskBase struct {
	Transcript string `json:"transcript"`
	Messages   int    `json:"messages"`
	Frame      bool   `json:"frame,omitempty"`
}

// WholeRequest is a coordinator's answer on
// harness.task.<run>.<step>.<attempt>, asked by a worker that holds not
// the base of a step task: the step's request whole, or an error when the
// run has gone past that step (the task is wanted no more). Only the
// coordinator holding the run answers; none answers while no coordinator
// holds the step yet.
type WholeRequest struct {
	Request *CompletionRequest `json:"request,omitempty"`
	Error   *Error             `json:"error,omitempty"`
}

// Key is the task's idempotency key: run, step and attempt.
func (t *StepTask) Key() string { return StepKey(t.Run, t.Step, t.Attempt) }

// StepKey formats the idempotency key of one provider call.
func StepKey(run string, step, attempt int) string {
	return fmt.Sprintf("%s.%d.%d", run, step, attempt)
}

// TurnResult is what a worker publishes on harness.turns.<run>.<step>.<attempt>: the turn, or
// the typed error that stopped it.
type TurnResult struct {
	Run       string `json:"run"`
	Step      int    `json:"step"`
	Attempt   int    `json:"attempt"`
	Turn      *Turn  `json:"turn,omitempty"`
	Error     *Error `json:"error,omitempty"`
	Worker    string `json:"worker,omitempty"`
	LatencyMS int64  `json:"latency_ms"`
	// Deliveries counts how often the task was delivered to a worker,
	// when more than once, less the deliveries given back without a call:
	// each earlier delivery counted may have made a provider call whose
	// answer was lost with its worker.
	Deliveries int `json:"deliveries,omitempty"`
	// Returned, on a result with neither turn nor error, makes it a mark
	// and not an answer: that many deliveries of the task were given back
	// by their workers (shutting down) before any provider call. The next
	// delivery reads the mark and counts only the others as calls that
	// may have been made; the answer it publishes replaces the mark.
	Returned int `json:"returned,omitempty"`
	// Message names the step task's message in the steps stream that a
	// mark counts the deliveries of (its sequence and the time it was
	// stored): a task published again is another message, whose
	// deliveries count afresh.
	Message string `json:"message,omitempty"`
	// Usage is what a call cost whose turn could not be delivered (Error
	// too_large: over the bus's message limit): the provider was paid, so
	// the coordinator charges it though there is no turn. Model is the
	// model that answered it, for its price.
	Usage *Usage `json:"usage,omitempty"`
	Model string `json:"model,omitempty"`
	// Refused is the run policy's verdict on the provider's endpoint when
	// it stopped the call before it was made (Error refused): a deny, or
	// an ask, which the coordinator puts to the run's approver; once a
	// person approves, the endpoint is remembered as allowed for the run.
	Refused *Refusal `json:"refused,omitempty"`
}

// GivenBack reports whether r is a mark of deliveries given back without
// a call (Returned), not an answer of the attempt.
func (r *TurnResult) GivenBack() bool { return r.Returned > 0 && r.Turn == nil && r.Error == nil }

// Finish reasons, as Turn.Finish gives every provider's.
const (
	FinishStop      = "stop"           // the model ended its turn
	FinishToolCalls = "tool_calls"     // it stopped to have its calls carried out
	FinishMaxTokens = "max_tokens"     // it was cut off at its output limit, perhaps inside a call
	FinishPause     = "pause_turn"     // it paused a long turn, to be continued as it stands
	FinishRefusal   = "refusal"        // it refused
	FinishFilter    = "content_filter" // the provider withheld its output
)

// Finish is the turn's finish reason, mapped from its provider's words
// (OpenAI's length, Anthropic's end_turn and tool_use, ...) to one of the
// Finish reasons above; "" when the provider gave none, and the provider's
// own word when it is none of those.
func (t *Turn) Finish() string {
	switch strings.ToLower(t.FinishReason) {
	case "":
		return ""
	case "stop", "end_turn", "stop_sequence":
		return FinishStop
	case "tool_calls", "tool_use", "function_call":
		return FinishToolCalls
	case "length", "max_tokens", "model_context_window_exceeded":
		return FinishMaxTokens
	case "pause_turn":
		return FinishPause
	case "refusal":
		return FinishRefusal
	case "content_filter":
		return FinishFilter
	}
	return t.FinishReason
}
