package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

func ptr[T any](v T) *T { return &v }

// TestOpenAIRequest checks what goes on the wire for a whole transcript and
// what comes back.
func TestOpenAIRequest(t *testing.T) {
	answer := `{
	  "id": "chatcmpl-9", "object": "chat.completion", "created": 1700000000,
	  "model": "gpt-4.1-2025-04-14",
	  "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
	    "message": {"role": "assistant", "content": "Checking the test.", "refusal": null,
	      "tool_calls": [
	        {"id": "call_b", "type": "function", "function": {"name": "exec", "arguments": "{\"argv\": [\"go\", \"test\"]}"}},
	        {"id": "call_c", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.go\""}}
	      ]}}],
	  "usage": {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876,
	    "prompt_tokens_details": {"cached_tokens": 512, "audio_tokens": 0},
	    "completion_tokens_details": {"reasoning_tokens": 16, "audio_tokens": 0}},
	  "system_fingerprint": "fp_1"
	}`
	f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		writeJSON(w, http.StatusOK, []byte(answer))
	})
	p := f.newClient(t, func(c *OpenAIConfig) {
		c.Model = "gpt-4.1"
		c.Organization = "org-test"
		c.Headers = map[string]string{"X-Harness-Run": "run-1", "http-referer": "https://example.test"}
	})
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {"path": {"type": "string"}},
		"required": ["path"]
	}`)
	req := &protocol.CompletionRequest{
		Model:           "ignored-by-override",
		System:          "You fix code.",
		MaxOutputTokens: 1024,
		Tools: []protocol.ToolSpec{
			{Name: "read_file", Description: "Read a file.", Parameters: schema},
			{Name: "list_files", Description: "List the workspace."},
		},
		Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "Fix the test."},
			{Role: protocol.RoleAssistant, Content: "Reading.", ToolCalls: []protocol.ToolCall{
				{ID: "call_a", Name: "read_file", Arguments: json.RawMessage(`{"path": "a_test.go"}`)},
				{ID: "call_z", Name: "read_file", Arguments: json.RawMessage(`"{\"path\": "`)},
			}},
			{Role: protocol.RoleTool, ToolCallID: "call_a", Content: "package a"},
			{Role: protocol.RoleTool, ToolCallID: "call_z", Content: "bad arguments"},
		},
	}

	got, err := p.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}

	want := &protocol.Turn{
		Text: "Checking the test.",
		ToolCalls: []protocol.ToolCall{
			{ID: "call_b", Name: "exec", Arguments: json.RawMessage(`{"argv": ["go", "test"]}`)},
			// Not JSON: kept as a JSON string of what the model wrote.
			{ID: "call_c", Name: "read_file", Arguments: json.RawMessage(`"{\"path\": \"a.go\""`)},
		},
		Usage:        protocol.Usage{InputTokens: 812, OutputTokens: 64, CachedTokens: 512, ReasoningTokens: 16},
		Model:        "gpt-4.1-2025-04-14",
		FinishReason: "tool_calls",
		Served:       "openai",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Complete turn mismatch (-want +got):\n%s", diff)
	}

	calls := f.received()
	if len(calls) != 1 {
		t.Fatalf("server got %d requests, want 1", len(calls))
	}
	h := calls[0].header
	for name, want := range map[string]string{
		"Authorization":       "Bearer " + testKey,
		"OpenAI-Organization": "org-test",
		"X-Harness-Run":       "run-1",
		"Http-Referer":        "https://example.test",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	wantBody := wireRequest{
		Model:     "gpt-4.1",
		MaxTokens: 1024,
		Messages: []wireMessage{
			{Role: "system", Content: ptr("You fix code.")},
			{Role: "user", Content: ptr("Fix the test.")},
			{Role: "assistant", Content: ptr("Reading."), ToolCalls: []wireToolCall{
				{ID: "call_a", Type: "function", Function: wireFunction{Name: "read_file", Arguments: `{"path": "a_test.go"}`}},
				// Bad arguments go back exactly as the model wrote them.
				{ID: "call_z", Type: "function", Function: wireFunction{Name: "read_file", Arguments: `{"path": `}},
			}},
			{Role: "tool", Content: ptr("package a"), ToolCallID: "call_a"},
			{Role: "tool", Content: ptr("bad arguments"), ToolCallID: "call_z"},
		},
		Tools: []wireTool{
			{Type: "function", Function: wireFunctionDef{Name: "read_file", Description: "Read a file.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}},
			{Type: "function", Function: wireFunctionDef{Name: "list_files", Description: "List the workspace.",
				Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
		},
	}
	if diff := cmp.Diff(wantBody, calls[0].body, cmp.Comparer(jsonEqual)); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s\nraw: %s", diff, calls[0].raw)
	}
	// Every tool result answers a call the assistant made, by id.
	ids := map[string]bool{}
	for _, m := range calls[0].body.Messages {
		for _, c := range m.ToolCalls {
			ids[c.ID] = true
		}
		if m.Role == "tool" && !ids[m.ToolCallID] {
			t.Errorf("tool result for %q follows no call with that id", m.ToolCallID)
		}
	}
}

// jsonEqual compares raw JSON by value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(x, y)
}

// TestOpenAITurns checks how answers of various shapes become turns.
func TestOpenAITurns(t *testing.T) {
	tests := []struct {
		name    string
		message string // the choice's message object
		finish  string
		want    *protocol.Turn
	}{
		{
			name:    "text",
			message: `{"role": "assistant", "content": "Done."}`,
			finish:  `"stop"`,
			want:    &protocol.Turn{Text: "Done.", FinishReason: "stop"},
		},
		{
			name:    "tool call with null content",
			message: `{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "exec", "arguments": "{\"argv\":[\"ls\"]}"}}]}`,
			finish:  `"tool_calls"`,
			want: &protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				{ID: "call_1", Name: "exec", Arguments: json.RawMessage(`{"argv":["ls"]}`)}}},
		},
		{
			name:    "empty arguments become an empty object",
			message: `{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "list_files", "arguments": ""}}]}`,
			finish:  `"tool_calls"`,
			want: &protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				{ID: "call_1", Name: "list_files", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name:    "arguments that are not JSON become a JSON string",
			message: `{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "exec", "arguments": "argv: ls"}}]}`,
			finish:  `"tool_calls"`,
			want: &protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				{ID: "call_1", Name: "exec", Arguments: json.RawMessage(`"argv: ls"`)}}},
		},
		{
			name:    "calls without ids are numbered",
			message: `{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{}"}}, {"type": "function", "function": {"name": "b", "arguments": "{}"}}]}`,
			finish:  `"tool_calls"`,
			want: &protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				{ID: "call_0", Name: "a", Arguments: json.RawMessage(`{}`)},
				{ID: "call_1", Name: "b", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name:    "legacy function_call",
			message: `{"role": "assistant", "function_call": {"name": "exec", "arguments": "{}"}}`,
			finish:  `"function_call"`,
			want: &protocol.Turn{FinishReason: "function_call", ToolCalls: []protocol.ToolCall{
				{ID: "call_0", Name: "exec", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name:    "refusal",
			message: `{"role": "assistant", "content": null, "refusal": "I can't help with that."}`,
			finish:  `"stop"`,
			want:    &protocol.Turn{Text: "I can't help with that.", FinishReason: "refusal"}, // a refusal, not an answer
		},
		{
			name:    "cut off by the output limit",
			message: `{"role": "assistant", "content": "The answer is"}`,
			finish:  `"length"`,
			want:    &protocol.Turn{Text: "The answer is", FinishReason: "length"},
		},
		{
			name:    "no finish reason",
			message: `{"role": "assistant", "content": "Hi"}`,
			finish:  `null`,
			want:    &protocol.Turn{Text: "Hi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"id": "x", "object": "chat.completion", "created": 1, "model": "m-1",
				"choices": [{"index": 0, "message": ` + tt.message + `, "finish_reason": ` + tt.finish + `}],
				"usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}`
			f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				writeJSON(w, http.StatusOK, []byte(body))
			})
			got, err := f.newClient(t, nil).Complete(t.Context(), simpleRequest())
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := cloneTurn(tt.want)
			want.Model, want.Served = "m-1", "openai"
			want.Usage = protocol.Usage{InputTokens: 3, OutputTokens: 2}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("turn mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func simpleRequest() *protocol.CompletionRequest {
	return &protocol.CompletionRequest{
		Model:    "gpt-test",
		System:   "Be brief.",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Hello"}},
	}
}

// TestOpenAIOutputLimit checks which field carries MaxOutputTokens.
func TestOpenAIOutputLimit(t *testing.T) {
	tests := []struct {
		name          string
		model         string
		max           int
		wantMax       int
		wantMaxCompl  int
		wantNoMaxKeys bool
	}{
		{name: "chat model", model: "gpt-4.1", max: 2048, wantMax: 2048},
		{name: "compatible server", model: "qwen3-coder", max: 100, wantMax: 100},
		{name: "reasoning model", model: "o3-mini", max: 2048, wantMaxCompl: 2048},
		{name: "gpt-5", model: "gpt-5", max: 64, wantMaxCompl: 64},
		{name: "unset", model: "gpt-4.1", wantNoMaxKeys: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, answerTurns(&protocol.Turn{Text: "ok", Model: tt.model}))
			req := simpleRequest()
			req.Model, req.MaxOutputTokens = tt.model, tt.max
			if _, err := f.newClient(t, nil).Complete(t.Context(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			body := f.received()[0].body
			if body.MaxTokens != tt.wantMax || body.MaxCompletionTokens != tt.wantMaxCompl {
				t.Errorf("max_tokens = %d, max_completion_tokens = %d; want %d, %d",
					body.MaxTokens, body.MaxCompletionTokens, tt.wantMax, tt.wantMaxCompl)
			}
			raw := string(f.received()[0].raw)
			if tt.wantNoMaxKeys && strings.Contains(raw, "max_") {
				t.Errorf("body %s names an output limit, want none", raw)
			}
			if body.Stream {
				t.Errorf("stream = true, want a non-streaming request")
			}
		})
	}
}

// TestOpenAIErrors checks that every way a call can fail is classified.
func TestOpenAIErrors(t *testing.T) {
	retryAt := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	status := func(code int, header map[string]string, body string) answerFunc {
		return func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
			for k, v := range header {
				w.Header().Set(k, v)
			}
			writeJSON(w, code, []byte(body))
		}
	}
	apiError := func(code int, header map[string]string, typ, errCode, message string) answerFunc {
		return func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
			for k, v := range header {
				w.Header().Set(k, v)
			}
			writeAPIError(w, code, typ, errCode, message)
		}
	}
	hang := func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		<-r.Context().Done()
	}
	hangMidBody := func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"id": "chatcmpl-1", "choices": [`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	closeConn := func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		conn.Close()
	}
	closeMidBody := func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"id\": \"chatcmpl-1\", \"choices\": [")
		buf.Flush()
		conn.Close()
	}

	tests := []struct {
		name           string
		answer         answerFunc
		timeout        time.Duration
		want           protocol.Code
		wantRetryAfter [2]int64 // inclusive range in ms; zero for none
		wantInMessage  string
	}{
		{
			name:           "429 with Retry-After seconds",
			answer:         apiError(429, map[string]string{"Retry-After": "7"}, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-4.1"),
			want:           protocol.CodeRateLimited,
			wantRetryAfter: [2]int64{7000, 7000},
			wantInMessage:  "Rate limit reached",
		},
		{
			name:           "429 with Retry-After as an HTTP date",
			answer:         apiError(429, map[string]string{"Retry-After": retryAt}, "requests", "rate_limit_exceeded", "slow down"),
			want:           protocol.CodeRateLimited,
			wantRetryAfter: [2]int64{20000, 31000},
		},
		{
			name:           "429 with retry-after-ms",
			answer:         apiError(429, map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"}, "tokens", "rate_limit_exceeded", "slow down"),
			want:           protocol.CodeRateLimited,
			wantRetryAfter: [2]int64{1500, 1500},
		},
		{
			name:   "429 without Retry-After",
			answer: apiError(429, nil, "requests", "rate_limit_exceeded", "slow down"),
			want:   protocol.CodeRateLimited,
		},
		{
			name:          "401",
			answer:        apiError(401, nil, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
			want:          protocol.CodeProviderAuth,
			wantInMessage: "Incorrect API key",
		},
		{
			name:   "403",
			answer: apiError(403, nil, "invalid_request_error", "", "Project does not have access to model"),
			want:   protocol.CodeProviderAuth,
		},
		{
			name:          "400",
			answer:        apiError(400, nil, "invalid_request_error", "", "Invalid value for 'role'"),
			want:          protocol.CodeProviderRequest,
			wantInMessage: "Invalid value for 'role'",
		},
		{
			name:   "404 unknown model",
			answer: apiError(404, nil, "invalid_request_error", "model_not_found", "The model `gpt-9` does not exist"),
			want:   protocol.CodeProviderRequest,
		},
		{
			name: "400 context_length_exceeded",
			answer: apiError(400, nil, "invalid_request_error", "context_length_exceeded",
				"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens."),
			want: protocol.CodeContextOverflow,
		},
		{
			name: "400 context length said in words only (vLLM)",
			answer: apiError(400, nil, "BadRequestError", "",
				"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."),
			want: protocol.CodeContextOverflow,
		},
		{
			name:          "500 with an HTML body",
			answer:        status(500, nil, "<html><body>Internal Server Error</body></html>"),
			want:          protocol.CodeProviderServer,
			wantInMessage: "Internal Server Error",
		},
		{
			name:           "503 with Retry-After",
			answer:         apiError(503, map[string]string{"Retry-After": "3"}, "server_error", "", "The engine is currently overloaded"),
			want:           protocol.CodeProviderServer,
			wantRetryAfter: [2]int64{3000, 3000},
		},
		{
			name:   "529 overloaded",
			answer: status(529, nil, `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`),
			want:   protocol.CodeProviderServer,
		},
		{
			name:   "malformed JSON body",
			answer: status(200, nil, `{"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}`),
			want:   protocol.CodeProviderMalformed,
		},
		{
			name:   "not JSON at all",
			answer: status(200, nil, `<html>gateway page</html>`),
			want:   protocol.CodeProviderMalformed,
		},
		{
			name:   "empty body",
			answer: status(200, nil, ``),
			want:   protocol.CodeProviderMalformed,
		},
		{
			name:          "no choices",
			answer:        status(200, nil, `{"id": "chatcmpl-1", "object": "chat.completion", "choices": [], "usage": {"prompt_tokens": 1}}`),
			want:          protocol.CodeProviderMalformed,
			wantInMessage: "no choices",
		},
		{
			name: "redirect",
			answer: func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				http.Redirect(w, r, "https://elsewhere.test/v1/chat/completions", http.StatusTemporaryRedirect)
			},
			want:          protocol.CodeProviderRequest,
			wantInMessage: "elsewhere.test",
		},
		{
			name:    "handler hangs",
			answer:  hang,
			timeout: 100 * time.Millisecond,
			want:    protocol.CodeProviderTimeout,
		},
		{
			name:    "body stalls half way",
			answer:  hangMidBody,
			timeout: 100 * time.Millisecond,
			want:    protocol.CodeProviderTimeout,
		},
		{
			name:   "connection closed",
			answer: closeConn,
			want:   protocol.CodeProviderTransport,
		},
		{
			name:   "connection closed half way through the body",
			answer: closeMidBody,
			want:   protocol.CodeProviderTransport,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, tt.answer)
			p := f.newClient(t, func(c *OpenAIConfig) {
				if tt.timeout != 0 {
					c.Timeout = tt.timeout
				}
			})
			turn, err := p.Complete(t.Context(), simpleRequest())
			if err == nil {
				t.Fatalf("Complete = %+v, want a %s error", turn, tt.want)
			}
			pe := checkCode(t, err, tt.want)
			t.Logf("error: %v", pe)
			if pe.Retryable() != tt.want.Retryable() {
				t.Errorf("Retryable() = %v, want %v", pe.Retryable(), tt.want.Retryable())
			}
			if lo, hi := tt.wantRetryAfter[0], tt.wantRetryAfter[1]; pe.RetryAfterMS < lo || pe.RetryAfterMS > hi {
				t.Errorf("RetryAfterMS = %d, want %d..%d", pe.RetryAfterMS, lo, hi)
			}
			if !strings.Contains(pe.Message, tt.wantInMessage) {
				t.Errorf("Message = %q, want it to contain %q", pe.Message, tt.wantInMessage)
			}
			if strings.Contains(pe.Error(), testKey) {
				t.Errorf("error %q shows the API key", pe.Error())
			}
		})
	}
}

// TestOpenAIRetryAfterPerCall checks that concurrent calls each get the
// Retry-After of their own answer.
func TestOpenAIRetryAfterPerCall(t *testing.T) {
	f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		// The wait asked for is the number in the user's message.
		w.Header().Set("Retry-After", *req.Messages[len(req.Messages)-1].Content)
		writeAPIError(w, 429, "requests", "rate_limit_exceeded", "slow down")
	})
	p := f.newClient(t, nil)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := simpleRequest()
			req.Messages[0].Content = strings.Repeat("1", 1+i%4)
			_, err := p.Complete(t.Context(), req)
			pe := checkCode(t, err, protocol.CodeRateLimited)
			secs := int64(0)
			for range 1 + i%4 {
				secs = secs*10 + 1
			}
			if want := secs * 1000; pe.RetryAfterMS != want {
				t.Errorf("call %d: RetryAfterMS = %d, want %d", i, pe.RetryAfterMS, want)
			}
		})
	}
	wg.Wait()
}

// TestOpenAIRefusesBeforeSending checks requests that cannot be sent never
// reach the server.
func TestOpenAIRefusesBeforeSending(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(*protocol.CompletionRequest)
		wantField string
	}{
		{name: "no model", edit: func(r *protocol.CompletionRequest) { r.Model = "" }, wantField: "model"},
		{name: "unknown role", edit: func(r *protocol.CompletionRequest) { r.Messages[0].Role = "system" }, wantField: "messages[0].role"},
		{
			name: "tool result without a call id",
			edit: func(r *protocol.CompletionRequest) {
				r.Messages = append(r.Messages, protocol.Message{Role: protocol.RoleTool, Content: "x"})
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
			f := newFakeOpenAI(t, answerTurns())
			req := simpleRequest()
			tt.edit(req)
			_, err := f.newClient(t, nil).Complete(t.Context(), req)
			pe := checkCode(t, err, protocol.CodeProviderRequest)
			t.Logf("error: %v", pe)
			if pe.Field != tt.wantField {
				t.Errorf("Field = %q, want %q", pe.Field, tt.wantField)
			}
			if n := len(f.received()); n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}
	t.Run("refused by the client library", func(t *testing.T) {
		// go-openai refuses tools for models it knows need the Responses API.
		f := newFakeOpenAI(t, answerTurns())
		req := conversation()[0].req
		req.Model = "gpt-6-sol"
		_, err := f.newClient(t, nil).Complete(t.Context(), req)
		pe := checkCode(t, err, protocol.CodeProviderRequest)
		t.Logf("error: %v", pe)
		if n := len(f.received()); n != 0 {
			t.Errorf("server got %d requests, want none", n)
		}
	})
	t.Run("nil request", func(t *testing.T) {
		f := newFakeOpenAI(t, answerTurns())
		_, err := f.newClient(t, nil).Complete(t.Context(), nil)
		checkCode(t, err, protocol.CodeProviderRequest)
	})
}

// TestOpenAIModel checks the config's model replaces the request's, and the
// request's is used otherwise.
func TestOpenAIModel(t *testing.T) {
	tests := []struct {
		name, config, request, want string
	}{
		{name: "request", request: "gpt-4.1-mini", want: "gpt-4.1-mini"},
		{name: "config overrides", config: "local-model", request: "gpt-4.1-mini", want: "local-model"},
		{name: "config alone", config: "local-model", want: "local-model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, answerTurns(&protocol.Turn{Text: "ok"}))
			req := simpleRequest()
			req.Model = tt.request
			got, err := f.newClient(t, func(c *OpenAIConfig) { c.Model = tt.config }).Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if m := f.received()[0].body.Model; m != tt.want {
				t.Errorf("sent model %q, want %q", m, tt.want)
			}
			// The answer names no model, so the turn names the one asked for.
			if got.Model != tt.want {
				t.Errorf("turn.Model = %q, want %q", got.Model, tt.want)
			}
		})
	}
}

// countingTransport counts the round trips it carries.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// TestOpenAIHTTPClient checks a caller's client is used and not modified.
func TestOpenAIHTTPClient(t *testing.T) {
	f := newFakeOpenAI(t, answerTurns(&protocol.Turn{Text: "ok"}))
	ct := &countingTransport{base: f.srv.Client().Transport}
	hc := &http.Client{Transport: ct}
	p := f.newClient(t, func(c *OpenAIConfig) { c.HTTPClient = hc })
	if _, err := p.Complete(t.Context(), simpleRequest()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if n := ct.n.Load(); n != 1 {
		t.Errorf("caller's transport carried %d round trips, want 1", n)
	}
	if hc.Transport != ct || hc.CheckRedirect != nil {
		t.Errorf("NewOpenAI modified the caller's http.Client")
	}
}

func TestOpenAICancelledBeforeSending(t *testing.T) {
	f := newFakeOpenAI(t, answerTurns(&protocol.Turn{Text: "ok"}))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := f.newClient(t, nil).Complete(ctx, simpleRequest())
	checkCode(t, err, protocol.CodeProviderTransport)
	if n := len(f.received()); n != 0 {
		t.Errorf("server got %d requests, want none", n)
	}
}

func TestNewOpenAI(t *testing.T) {
	tests := []struct {
		name      string
		cfg       OpenAIConfig
		want      protocol.Code // 0 for no error
		wantInErr string
	}{
		{name: "defaults", cfg: OpenAIConfig{APIKey: "k"}},
		{name: "no API key", cfg: OpenAIConfig{}, want: protocol.CodeMissingField, wantInErr: "OPENAI_API_KEY"},
		{name: "blank API key", cfg: OpenAIConfig{APIKey: "  "}, want: protocol.CodeMissingField, wantInErr: "OPENAI_API_KEY"},
		{name: "relative base URL", cfg: OpenAIConfig{APIKey: "k", BaseURL: "api.openai.com/v1"}, want: protocol.CodeInvalidField, wantInErr: "BaseURL"},
		{name: "odd scheme", cfg: OpenAIConfig{APIKey: "k", BaseURL: "ftp://host/v1"}, want: protocol.CodeInvalidField, wantInErr: "BaseURL"},
		{name: "negative timeout", cfg: OpenAIConfig{APIKey: "k", Timeout: -time.Second}, want: protocol.CodeInvalidField, wantInErr: "Timeout"},
		{name: "bad header name", cfg: OpenAIConfig{APIKey: "k", Headers: map[string]string{"X Run": "1"}}, want: protocol.CodeInvalidField, wantInErr: "Headers"},
		{name: "header value with a newline", cfg: OpenAIConfig{APIKey: "k", Headers: map[string]string{"X-Run": "1\r\nEvil: 1"}}, want: protocol.CodeInvalidField, wantInErr: "Headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewOpenAI(tt.cfg)
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("NewOpenAI(%+v) = %v, want no error", tt.cfg, err)
				}
				if p.Name() != "openai" {
					t.Errorf("Name() = %q, want openai", p.Name())
				}
				return
			}
			checkCode(t, err, tt.want)
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("NewOpenAI error %q, want it to mention %s", err, tt.wantInErr)
			}
		})
	}
}

// benchTurn is what the benchmark server answers.
var benchTurn = &protocol.Turn{
	Text:         "I'll run the tests.",
	ToolCalls:    []protocol.ToolCall{{ID: "call_1", Name: "exec", Arguments: json.RawMessage(`{"argv":["go","test","./..."]}`)}},
	Model:        "gpt-test",
	FinishReason: "tool_calls",
	Usage:        protocol.Usage{InputTokens: 900, OutputTokens: 30},
}

// BenchmarkOpenAIComplete measures one call through the client against a
// local server that answers at once. Compare with BenchmarkRawHTTP.
func BenchmarkOpenAIComplete(b *testing.B) {
	answer := completionJSON(benchTurn)
	srv, client := benchServer(b, answer)
	p, err := NewOpenAI(OpenAIConfig{APIKey: testKey, BaseURL: srv + "/v1", HTTPClient: client})
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

// BenchmarkRawHTTP posts the bytes the client sends for the same request
// with a bare http.Client and reads the answer, decoding nothing: the floor
// BenchmarkOpenAIComplete is measured against.
func BenchmarkRawHTTP(b *testing.B) {
	answer := completionJSON(benchTurn)
	srv, client := benchServer(b, answer)
	body := sentBody(b, conversation()[2].req)
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, srv+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
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

// benchServer starts a server answering every request with answer at
// once, and returns its URL and a client for it.
func benchServer(b *testing.B, answer []byte) (string, *http.Client) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, answer)
	}))
	b.Cleanup(srv.Close)
	return srv.URL, srv.Client()
}

// sentBody returns the body the OpenAI client sends for req.
func sentBody(b *testing.B, req *protocol.CompletionRequest) []byte {
	var raw []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ = io.ReadAll(r.Body)
		writeJSON(w, http.StatusOK, completionJSON(benchTurn))
	}))
	defer srv.Close()
	p, err := NewOpenAI(OpenAIConfig{APIKey: testKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Complete(b.Context(), req); err != nil {
		b.Fatal(err)
	}
	if len(raw) == 0 {
		b.Fatal("the client sent an empty body")
	}
	return raw
}

// TestOpenAIAnswers checks answers given whole and streamed give the same,
// exact turn.
func TestOpenAIAnswers(t *testing.T) {
	const plain = `{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}`
	turn := func(t protocol.Turn) *protocol.Turn {
		t.Model, t.Served = "m-1", "openai"
		if t.Usage == (protocol.Usage{}) {
			t.Usage = protocol.Usage{InputTokens: 3, OutputTokens: 2}
		}
		return &t
	}
	call := func(id, name, args string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	tests := []answerCase{
		{
			name: "refusal without content",
			body: completionAt(0, `{"role": "assistant", "content": null, "refusal": "I can't help with that."}`, `"stop"`, plain),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "content": "", "refusal": "I can't "}`, `null`),
				chunkAt(0, `{"refusal": "help with that."}`, `"stop"`),
				usageLine(plain),
			},
			want:   turn(protocol.Turn{Text: "I can't help with that.", FinishReason: "refusal"}),
			tokens: []string{"I can't ", "help with that."},
		},
		{
			name: "refusal beside content",
			body: completionAt(0, `{"role": "assistant", "content": "Here is the start.", "refusal": "I can't go on."}`, `"stop"`, plain),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "content": "Here is the start."}`, `null`),
				chunkAt(0, `{"refusal": "I can't go on."}`, `"stop"`),
				usageLine(plain),
			},
			// The refusal makes the finish reason; the content stays the text.
			want:   turn(protocol.Turn{Text: "Here is the start.", FinishReason: "refusal"}),
			tokens: []string{"Here is the start.", "I can't go on."},
		},
		{
			name: "repeated tool call ids",
			body: completionAt(0, `{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.go\"}"}},
				{"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"b.go\"}"}}]}`,
				`"tool_calls"`, plain),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.go\"}"}}]}`, `null`),
				chunkAt(0, `{"tool_calls": [{"index": 1, "id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"b.go\"}"}}]}`, `null`),
				chunkAt(0, `{}`, `"tool_calls"`),
				usageLine(plain),
			},
			want: turn(protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				call("call_0", "read_file", `{"path": "a.go"}`),
				call("call_0_1", "read_file", `{"path": "b.go"}`),
			}}),
		},
		{
			name: "a missing id is one no other call has",
			body: completionAt(0, `{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
				{"type": "function", "function": {"name": "b", "arguments": "{}"}}]}`,
				`"tool_calls"`, plain),
			lines: []string{
				chunkAt(0, `{"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{}"}}]}`, `null`),
				chunkAt(0, `{"tool_calls": [{"index": 1, "type": "function", "function": {"name": "b", "arguments": "{}"}}]}`, `null`),
				chunkAt(0, `{}`, `"tool_calls"`),
				usageLine(plain),
			},
			want: turn(protocol.Turn{FinishReason: "tool_calls", ToolCalls: []protocol.ToolCall{
				call("call_1", "a", `{}`),
				call("call_2", "b", `{}`), // not call_1, the first call's
			}}),
		},
		{
			name: "usage split over two chunks is summed",
			body: completionAt(0, `{"role": "assistant", "content": "Done."}`, `"stop"`,
				`{"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876,
				  "prompt_tokens_details": {"cached_tokens": 512}, "completion_tokens_details": {"reasoning_tokens": 16}}`),
			lines: []string{
				chunkAt(0, `{"role": "assistant", "content": "Done."}`, `"stop"`),
				usageLine(`{"prompt_tokens": 812, "prompt_tokens_details": {"cached_tokens": 512}}`),
				usageLine(`{"completion_tokens": 64, "completion_tokens_details": {"reasoning_tokens": 16}}`),
			},
			want: turn(protocol.Turn{Text: "Done.", FinishReason: "stop",
				Usage: protocol.Usage{InputTokens: 812, OutputTokens: 64, CachedTokens: 512, ReasoningTokens: 16}}),
			tokens: []string{"Done."},
		},
	}
	checkAnswers(t, tests, func(t *testing.T, f *fakeOpenAI) *OpenAI { return f.newClient(t, nil) })
}
