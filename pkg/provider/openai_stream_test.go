package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// streamServer answers every request with the given data lines as a
// stream, each followed by a blank line.
func streamServer(t *testing.T, lines ...string) *fakeOpenAI {
	t.Helper()
	return newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		if !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
			t.Errorf("request stream = %v, stream_options = %+v; want a stream with its usage", req.Stream, req.StreamOptions)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, l := range lines {
			io.WriteString(w, l+"\n\n")
		}
	})
}

func chunk(delta, finish string) string {
	return `data: {"id": "c", "object": "chat.completion.chunk", "model": "m-1", "choices": [{"index": 0, "delta": ` + delta + `, "finish_reason": ` + finish + `}]}`
}

const usageChunk = `data: {"id": "c", "object": "chat.completion.chunk", "model": "m-1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}`

func TestOpenAIStream(t *testing.T) {
	tests := []struct {
		name   string
		lines  []string
		want   *protocol.Turn
		tokens []string
	}{
		{
			name: "tool call fragments interleaved by index",
			lines: []string{
				chunk(`{"role": "assistant", "content": ""}`, `null`),
				chunk(`{"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "b", "arguments": ""}}]}`, `null`),
				chunk(`{"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "a", "arguments": "{\"x\""}}]}`, `null`),
				chunk(`{"tool_calls": [{"index": 1, "function": {"arguments": "{\"y\": 2}"}}]}`, `null`),
				chunk(`{"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}`, `null`),
				chunk(`{}`, `"tool_calls"`),
				usageChunk,
				"data: [DONE]",
			},
			want: &protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				{ID: "call_a", Name: "a", Arguments: json.RawMessage(`{"x": 1}`)},
				{ID: "call_b", Name: "b", Arguments: json.RawMessage(`{"y": 2}`)},
			}},
		},
		{
			name: "calls without index or id",
			lines: []string{
				chunk(`{"tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{}"}}]}`, `null`),
				chunk(`{}`, `"tool_calls"`),
				usageChunk,
				"data: [DONE]",
			},
			want: &protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				{ID: "call_0", Name: "a", Arguments: json.RawMessage(`{}`)},
			}},
		},
		{
			name: "refusal",
			lines: []string{
				chunk(`{"role": "assistant", "refusal": "I can't "}`, `null`),
				chunk(`{"refusal": "help."}`, `"stop"`),
				usageChunk,
				"data: [DONE]",
			},
			want:   &protocol.Turn{Text: "I can't help.", FinishReason: "refusal"}, // a refusal, not an answer
			tokens: []string{"I can't ", "help."},
		},
		{
			name: "legacy function_call",
			lines: []string{
				chunk(`{"function_call": {"name": "exec", "arguments": "{\"argv\""}}`, `null`),
				chunk(`{"function_call": {"arguments": ": []}"}}`, `"function_call"`),
				usageChunk,
				"data: [DONE]",
			},
			want: &protocol.Turn{FinishReason: "function_call", ToolCalls: []protocol.ToolCall{
				{ID: "call_0", Name: "exec", Arguments: json.RawMessage(`{"argv": []}`)},
			}},
		},
		{
			name: "comments and other choices are skipped",
			lines: []string{
				": OPENROUTER PROCESSING",
				chunk(`{"content": "Hi"}`, `null`),
				`data: {"id": "c", "model": "m-1", "choices": [{"index": 1, "delta": {"content": "other"}, "finish_reason": null}]}`,
				chunk(`{"content": "!"}`, `"stop"`),
				usageChunk,
				"data: [DONE]",
			},
			want:   &protocol.Turn{Text: "Hi!", FinishReason: "stop"},
			tokens: []string{"Hi", "!"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := streamServer(t, tt.lines...)
			var tokens []string
			got, err := f.newClient(t, nil).CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
			if err != nil {
				t.Fatalf("CompleteStream: %v", err)
			}
			want := cloneTurn(tt.want)
			want.Model, want.Served = "m-1", "openai"
			want.Usage = protocol.Usage{InputTokens: 3, OutputTokens: 2}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("turn mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.tokens, tokens); diff != "" {
				t.Errorf("tokens mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenAIStreamFailures(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  protocol.Code
	}{
		{
			name:  "ends after the finish reason, before the usage and [DONE]",
			lines: []string{chunk(`{"content": "Hi"}`, `"stop"`)},
			want:  protocol.CodeProviderTransport,
		},
		{
			name: "OpenRouter error chunk",
			lines: []string{
				chunk(`{"content": "Hi"}`, `null`),
				`data: {"id": "c", "model": "m-1", "error": {"code": 502, "message": "Provider disconnected"}, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}`,
			},
			want: protocol.CodeProviderServer,
		},
		{
			name:  "finish reason error alone",
			lines: []string{chunk(`{"content": "Hi"}`, `"error"`)},
			want:  protocol.CodeProviderServer,
		},
		{
			name:  "rate limit error mid-stream",
			lines: []string{chunk(`{"content": "Hi"}`, `null`), `data: {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}`},
			want:  protocol.CodeRateLimited,
		},
		{
			name:  "only usage",
			lines: []string{usageChunk, "data: [DONE]"},
			want:  protocol.CodeProviderMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := streamServer(t, tt.lines...)
			_, err := f.newClient(t, nil).CompleteStream(t.Context(), simpleRequest(), nil)
			pe := checkCode(t, err, tt.want)
			t.Logf("error: %v", pe)
		})
	}
}

// TestOpenAIName checks a configured name is the provider's name, its
// turns' Served, and named in its errors.
func TestOpenAIName(t *testing.T) {
	f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		if call == 2 {
			writeAPIError(w, 500, "server_error", "", "down")
			return
		}
		writeJSON(w, http.StatusOK, completionJSON(&protocol.Turn{Text: "ok"}))
	})
	p := f.newClient(t, func(c *OpenAIConfig) { c.Name = "vllm-local" })
	if p.Name() != "vllm-local" {
		t.Errorf("Name() = %q, want vllm-local", p.Name())
	}
	turn, err := p.Complete(t.Context(), simpleRequest())
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if turn.Served != "vllm-local" {
		t.Errorf("Served = %q, want vllm-local", turn.Served)
	}
	_, err = p.Complete(t.Context(), simpleRequest())
	if pe := checkCode(t, err, protocol.CodeProviderServer); !strings.Contains(pe.Message, "vllm-local") {
		t.Errorf("Message = %q, want it to name vllm-local", pe.Message)
	}
}

func TestNewOpenRouter(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		p, err := NewOpenRouter(OpenRouterConfig{APIKey: "k"})
		if err != nil {
			t.Fatalf("NewOpenRouter: %v", err)
		}
		if p.Name() != "openrouter" {
			t.Errorf("Name() = %q, want openrouter", p.Name())
		}
		cfg := OpenRouterConfig{APIKey: "k"}.openAI()
		if cfg.BaseURL != DefaultOpenRouterBaseURL || len(cfg.Headers) != 0 {
			t.Errorf("config = %+v, want OpenRouter's base URL and no headers", cfg)
		}
	})
	t.Run("no API key", func(t *testing.T) {
		_, err := NewOpenRouter(OpenRouterConfig{})
		checkCode(t, err, protocol.CodeMissingField)
		if !strings.Contains(err.Error(), "OPENROUTER_API_KEY") {
			t.Errorf("error %q, want it to name OPENROUTER_API_KEY", err)
		}
	})
	t.Run("bad title", func(t *testing.T) {
		_, err := NewOpenRouter(OpenRouterConfig{APIKey: "k", Title: "a\nb"})
		checkCode(t, err, protocol.CodeInvalidField)
	})
	t.Run("headers", func(t *testing.T) {
		f := newFakeOpenAI(t, answerTurns(&protocol.Turn{Text: "ok"}))
		p, err := NewOpenRouter(OpenRouterConfig{
			APIKey: testKey, BaseURL: f.srv.URL + "/v1", HTTPClient: f.srv.Client(),
			Referer: "https://a.example", Title: "harness",
			Headers: map[string]string{"x-title": "override", "X-Run": "1"},
		})
		if err != nil {
			t.Fatalf("NewOpenRouter: %v", err)
		}
		if _, err := p.Complete(t.Context(), simpleRequest()); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		h := f.received()[0].header
		for name, want := range map[string]string{"HTTP-Referer": "https://a.example", "X-Title": "override", "X-Run": "1"} {
			if got := h.Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("header %s = %q, want [%q]", name, got, want)
			}
		}
	})
}
