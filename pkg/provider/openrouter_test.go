package provider

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// newOpenRouter returns an OpenRouter provider pointed at the fake server.
func (f *fakeOpenAI) newOpenRouter(t *testing.T) *OpenAI {
	t.Helper()
	p, err := NewOpenRouter(OpenRouterConfig{
		APIKey:     testKey,
		BaseURL:    f.srv.URL + "/v1",
		HTTPClient: f.srv.Client(),
		Timeout:    10 * time.Second,
	})
	if err != nil {
		t.Fatalf("NewOpenRouter: %v", err)
	}
	return p
}

// TestOpenRouterAnswers checks OpenRouter's extras, in the shapes of its
// API reference, given whole and streamed, give the same, exact turn.
func TestOpenRouterAnswers(t *testing.T) {
	// The usage of OpenRouter's usage accounting page: the cost in
	// credits, and cache reads and writes among the prompt tokens.
	const accounted = `{"completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 1},
		"cost": 0.95, "cost_details": {"upstream_inference_cost": 19},
		"prompt_tokens": 194, "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 100, "audio_tokens": 0},
		"total_tokens": 196}`
	accountedUsage := protocol.Usage{InputTokens: 194, OutputTokens: 2, CachedTokens: 60, CacheWriteTokens: 100,
		ReasoningTokens: 1, ReportedCost: 0.95}
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	turn := func(t protocol.Turn) *protocol.Turn {
		t.Model, t.Served, t.Usage = "m-1", "openrouter", accountedUsage
		return &t
	}
	tests := []answerCase{
		{
			name: "usage with cost and cache writes",
			body: completionAt(0, `{"role": "assistant", "content": "Hi."}`, `"stop"`, accounted),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "content": "Hi."}`, `"stop"`),
				usageLine(oneLine(accounted)),
			},
			want:   turn(protocol.Turn{Text: "Hi.", FinishReason: "stop"}),
			tokens: []string{"Hi."},
		},
		{
			name: "usage with cost split over two chunks",
			body: completionAt(0, `{"role": "assistant", "content": "Hi."}`, `"stop"`, accounted),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "content": "Hi."}`, `"stop"`),
				usageLine(`{"prompt_tokens": 194, "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 100}, "cost": 0.5}`),
				usageLine(`{"completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 1}, "cost": 0.45}`),
			},
			want:   turn(protocol.Turn{Text: "Hi.", FinishReason: "stop"}),
			tokens: []string{"Hi."},
		},
		{
			name: "reasoning is thinking, not text",
			body: completionAt(0, `{"role": "assistant", "content": "It is 4.", "reasoning": "Two and two make four."}`, `"stop"`, accounted),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "content": "", "reasoning": "Two and two "}`, `null`),
				chunkAt(0, `{"content": "", "reasoning": "make four."}`, `null`),
				chunkAt(0, `{"content": "It is 4.", "reasoning": null}`, `"stop"`),
				usageLine(oneLine(accounted)),
			},
			want: turn(protocol.Turn{Text: "It is 4.", FinishReason: "stop",
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingSummary, Text: "Two and two make four."}}}),
			tokens: []string{"It is 4."}, // no reasoning
		},
		{
			name: "the one choice at index 1",
			body: completionAt(1, `{"role": "assistant", "content": "Hello there."}`, `"stop"`, accounted),
			lines: []string{
				chunkAt(1, `{"role": "assistant", "content": "Hello "}`, `null`),
				chunkAt(1, `{"content": "there."}`, `null`),
				chunkAt(1, `{}`, `"stop"`),
				usageLine(oneLine(accounted)),
			},
			want:   turn(protocol.Turn{Text: "Hello there.", FinishReason: "stop"}),
			tokens: []string{"Hello ", "there."},
		},
		{
			name: "later choices are skipped",
			body: completionAt(1, `{"role": "assistant", "content": "Hello."}`, `"stop"`, accounted),
			lines: []string{
				chunkAt(1, `{"role": "assistant", "content": "Hello."}`, `null`),
				chunkAt(0, `{"content": "other"}`, `null`),
				chunkAt(1, `{}`, `"stop"`),
				usageLine(oneLine(accounted)),
			},
			want:   turn(protocol.Turn{Text: "Hello.", FinishReason: "stop"}),
			tokens: []string{"Hello."},
		},
	}
	checkAnswers(t, tests, func(t *testing.T, f *fakeOpenAI) *OpenAI { return f.newOpenRouter(t) })
}

// TestOpenRouterReportedErrors checks an error OpenRouter reports inside
// an answer that came with 200, whole or streamed, at the top or on a
// choice, is classified as the same error sent as its HTTP status is.
func TestOpenRouterReportedErrors(t *testing.T) {
	tests := []struct {
		name  string
		error string        // the error object, as OpenRouter's errors page shapes it
		want  protocol.Code // 0: whatever the same error sent as a status gives
	}{
		{
			name:  "402 insufficient credits",
			error: `{"code": 402, "message": "This request needs more credits than the key has left"}`,
		},
		{
			name: "429 rate limited",
			error: `{"code": 429, "message": "Rate limit exceeded: free-models-per-day",
				"metadata": {"headers": {"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1741305600000"}}}`,
			want: protocol.CodeRateLimited,
		},
		{
			name:  "502 upstream down",
			error: `{"code": 502, "message": "Provider returned error", "metadata": {"provider_name": "Example", "raw": "upstream timed out"}}`,
			want:  protocol.CodeProviderServer,
		},
		{
			name: "403 flagged by moderation",
			error: `{"code": 403, "message": "Input was flagged",
				"metadata": {"reasons": ["violence"], "flagged_input": "...", "provider_name": "Example", "model_slug": "m-1"}}`,
			want: protocol.CodeProviderAuth,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal([]byte(tt.error), &e); err != nil {
				t.Fatalf("test error object: %v", err)
			}
			errLine := strings.Join(strings.Fields(tt.error), " ")
			// The same error sent as an HTTP status decides the code.
			f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				writeJSON(w, e.Code, []byte(`{"error": `+tt.error+`}`))
			})
			_, err := f.newOpenRouter(t).Complete(t.Context(), simpleRequest())
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Complete with HTTP %d = %v, want a *protocol.Error", e.Code, err)
			}
			want := pe.Code
			if tt.want != 0 && want != tt.want {
				t.Fatalf("Complete with HTTP %d: code %s, want %s", e.Code, want, tt.want)
			}
			if want == protocol.CodeProviderMalformed || want == protocol.CodeProviderTransport {
				t.Fatalf("Complete with HTTP %d: code %s, want the status's own", e.Code, want)
			}

			deliveries := []struct {
				name   string
				stream bool
				body   string   // a whole answer with 200
				lines  []string // a stream with 200
			}{
				{name: "whole body", body: `{"error": ` + tt.error + `}`},
				{name: "whole body's choice", body: `{"id": "gen-1", "object": "chat.completion", "created": 1700000000, "model": "m-1",
					"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "error", "error": ` + tt.error + `}]}`},
				{name: "stream before any chunk", stream: true, lines: []string{`data: {"error": ` + errLine + `}`}},
				{name: "stream chunk mid-answer", stream: true, lines: []string{
					chunkAt(0, `{"role": "assistant", "content": "Hi"}`, `null`),
					`data: {"id": "gen-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m-1", "provider": "Example", "error": ` +
						errLine + `, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}`,
				}},
				{name: "stream chunk's choice", stream: true, lines: []string{
					chunkAt(1, `{"role": "assistant", "content": "Hi"}`, `null`),
					`data: {"id": "gen-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m-1", ` +
						`"choices": [{"index": 1, "delta": {"content": ""}, "finish_reason": "error", "error": ` + errLine + `}]}`,
				}},
			}
			for _, d := range deliveries {
				t.Run(d.name, func(t *testing.T) {
					f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
						if !d.stream {
							writeJSON(w, http.StatusOK, []byte(d.body))
							return
						}
						w.Header().Set("Content-Type", "text/event-stream")
						for _, l := range d.lines {
							io.WriteString(w, l+"\n\n")
						}
					})
					p := f.newOpenRouter(t)
					var turn *protocol.Turn
					var err error
					if d.stream {
						turn, err = p.CompleteStream(t.Context(), simpleRequest(), nil)
					} else {
						turn, err = p.Complete(t.Context(), simpleRequest())
					}
					if err == nil {
						t.Fatalf("call = %+v, want a %s error", turn, want)
					}
					pe := checkCode(t, err, want)
					t.Logf("error: %v", pe)
					if !strings.Contains(pe.Message, e.Message) {
						t.Errorf("Message = %q, want it to contain %q", pe.Message, e.Message)
					}
				})
			}
		})
	}
}

// TestOpenAIReasoningRequest checks how a request's reasoning effort and
// thinking budget go on each dialect's wire, streamed or not, and that a
// transcript's thinking is not sent back.
func TestOpenAIReasoningRequest(t *testing.T) {
	tests := []struct {
		name       string
		openRouter bool
		effort     string
		budget     int
		wantEffort string         // reasoning_effort
		want       *wireReasoning // OpenRouter's reasoning
	}{
		{name: "openai effort", effort: "high", wantEffort: "high"},
		{name: "openai minimal effort", effort: "minimal", wantEffort: "minimal"},
		{name: "openai budget is not sent", budget: 2048},
		{name: "openai neither"},
		{name: "openrouter effort", openRouter: true, effort: "low", want: &wireReasoning{Effort: "low"}},
		{name: "openrouter budget", openRouter: true, budget: 2048, want: &wireReasoning{MaxTokens: 2048}},
		{name: "openrouter budget wins over effort", openRouter: true, effort: "high", budget: 4096, want: &wireReasoning{MaxTokens: 4096}},
		{name: "openrouter neither", openRouter: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, answerTurns(&protocol.Turn{Text: "ok"}, &protocol.Turn{Text: "ok"}))
			p := f.newClient(t, nil)
			if tt.openRouter {
				p = f.newOpenRouter(t)
			}
			req := simpleRequest()
			req.Model, req.ReasoningEffort, req.ThinkingBudget = "o4-mini", tt.effort, tt.budget
			req.Messages = append(req.Messages,
				protocol.Message{Role: protocol.RoleAssistant, Content: "Hi.",
					Thinking: []protocol.Thinking{{Kind: protocol.ThinkingSummary, Text: "Greet back."}}},
				protocol.Message{Role: protocol.RoleUser, Content: "Again."})
			if _, err := p.Complete(t.Context(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if _, err := p.CompleteStream(t.Context(), req, nil); err != nil {
				t.Fatalf("CompleteStream: %v", err)
			}
			calls := f.received()
			if len(calls) != 2 {
				t.Fatalf("server got %d requests, want 2", len(calls))
			}
			for i, c := range calls {
				// The fake refuses unknown fields, so a reasoning field on
				// a message, or an unknown one in reasoning, fails the call.
				if c.body.Stream != (i == 1) {
					t.Errorf("request %d: stream = %v, want %v", i, c.body.Stream, i == 1)
				}
				if c.body.ReasoningEffort != tt.wantEffort {
					t.Errorf("request %d: reasoning_effort = %q, want %q\nraw: %s", i, c.body.ReasoningEffort, tt.wantEffort, c.raw)
				}
				if got, want := c.body.Reasoning, tt.want; (got == nil) != (want == nil) || got != nil && *got != *want {
					t.Errorf("request %d: reasoning = %+v, want %+v\nraw: %s", i, got, want, c.raw)
				}
				if strings.Contains(string(c.raw), "Greet back.") {
					t.Errorf("request %d sends the transcript's thinking: %s", i, c.raw)
				}
				if n := len(c.body.Messages); n != 4 || *c.body.Messages[2].Content != "Hi." {
					t.Errorf("request %d: messages = %+v, want system, user, assistant Hi., user", i, c.body.Messages)
				}
			}
		})
	}
}
