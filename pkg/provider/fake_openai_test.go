package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// testKey is the API key the fake server accepts.
const testKey = "sk-test-key"

// The chat completions request as it travels, written from the API
// reference rather than from go-openai's types, so the tests check the wire
// format and not the library's idea of it. Unknown fields are refused.
type wireRequest struct {
	Model               string        `json:"model"`
	Messages            []wireMessage `json:"messages"`
	Tools               []wireTool    `json:"tools,omitempty"`
	MaxTokens           int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Reasoning is OpenRouter's unified reasoning parameter.
	Reasoning *wireReasoning `json:"reasoning,omitempty"`
}

type wireReasoning struct {
	Effort    string `json:"effort,omitempty"`
	MaxTokens int    `json:"max_tokens,omitempty"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string          `json:"type"`
	Function wireFunctionDef `json:"function"`
}

type wireFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// fakeCall is one request the fake server received.
type fakeCall struct {
	header http.Header
	body   wireRequest
	raw    []byte
}

// answerFunc answers the call-th request (1 for the first) of a fake server.
type answerFunc func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest)

// fakeOpenAI is an httptest server speaking the chat completions API: POST
// /v1/chat/completions with a bearer key and a JSON body.
type fakeOpenAI struct {
	t      *testing.T
	srv    *httptest.Server
	answer answerFunc

	mu    sync.Mutex
	calls []fakeCall
}

func newFakeOpenAI(t *testing.T, answer answerFunc) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{t: t, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, format string, args ...any) {
		f.t.Errorf("fake OpenAI server: "+format, args...)
		writeAPIError(w, status, "invalid_request_error", "", "harness test server refused the request")
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		refuse(http.StatusNotFound, "got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		refuse(http.StatusUnauthorized, "Authorization = %q, want the bearer key", got)
		return
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		refuse(http.StatusBadRequest, "Content-Type = %q, want application/json", got)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		refuse(http.StatusBadRequest, "read body: %v", err)
		return
	}
	var body wireRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		refuse(http.StatusBadRequest, "decode body %s: %v", raw, err)
		return
	}
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{header: r.Header.Clone(), body: body, raw: raw})
	n := len(f.calls)
	f.mu.Unlock()
	f.answer(w, r, n, &body)
}

// received returns the requests received so far.
func (f *fakeOpenAI) received() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

// newClient returns an OpenAI provider pointed at the fake server; edit, if
// not nil, changes the config first.
func (f *fakeOpenAI) newClient(t *testing.T, edit func(*OpenAIConfig)) *OpenAI {
	t.Helper()
	cfg := OpenAIConfig{
		APIKey:     testKey,
		BaseURL:    f.srv.URL + "/v1",
		HTTPClient: f.srv.Client(),
		Timeout:    10 * time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	return p
}

// answerTurns answers the n-th request with the chat completion of turns[n-1].
func answerTurns(turns ...*protocol.Turn) answerFunc {
	return func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
		if call > len(turns) {
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "", "no answer scripted")
			return
		}
		if req.Stream {
			writeStream(w, turns[call-1])
			return
		}
		writeJSON(w, http.StatusOK, completionJSON(turns[call-1]))
	}
}

// writeStream writes the chat completion chunks answering with t: the
// text in two pieces, each tool call whole, the finish reason, the usage
// and [DONE].
func writeStream(w http.ResponseWriter, t *protocol.Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	data := func(v map[string]any) {
		v["id"], v["object"], v["model"] = "chatcmpl-test", "chat.completion.chunk", t.Model
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		w.Write([]byte("data: " + string(b) + "\n\n"))
	}
	delta := func(d map[string]any, finish any) {
		data(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}})
	}
	half := len(t.Text) / 2
	for _, piece := range []string{t.Text[:half], t.Text[half:]} {
		if piece != "" {
			delta(map[string]any{"content": piece}, nil)
		}
	}
	for i, c := range t.ToolCalls {
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}}}}, nil)
	}
	finish := any(nil)
	if t.FinishReason != "" {
		finish = t.FinishReason
	}
	delta(map[string]any{}, finish)
	var body map[string]any
	json.Unmarshal(completionJSON(t), &body)
	data(map[string]any{"choices": []any{}, "usage": body["usage"]})
	w.Write([]byte("data: [DONE]\n\n"))
}

// completionJSON is the chat completion answering with t, as the API
// writes it: content null when there is no text, arguments as a string.
func completionJSON(t *protocol.Turn) []byte {
	msg := map[string]any{"role": "assistant", "content": nil}
	if t.Text != "" {
		msg["content"] = t.Text
	}
	if len(t.ToolCalls) > 0 {
		var calls []map[string]any
		for _, c := range t.ToolCalls {
			calls = append(calls, map[string]any{
				"id":       c.ID,
				"type":     "function",
				"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)},
			})
		}
		msg["tool_calls"] = calls
	}
	finish := any(nil)
	if t.FinishReason != "" {
		finish = t.FinishReason
	}
	body := map[string]any{
		"id":      "chatcmpl-test",
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   t.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": map[string]any{
			"prompt_tokens":             t.Usage.InputTokens,
			"completion_tokens":         t.Usage.OutputTokens,
			"total_tokens":              t.Usage.Total(),
			"prompt_tokens_details":     map[string]any{"cached_tokens": t.Usage.CachedTokens, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": t.Usage.ReasoningTokens, "audio_tokens": 0},
		},
		"system_fingerprint": "fp_test",
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// writeAPIError writes an error the way the API does.
func writeAPIError(w http.ResponseWriter, status int, typ, code, message string) {
	e := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	writeJSON(w, status, b)
}

// answerCase is one answer, given whole and streamed, and the turn both
// must give.
type answerCase struct {
	name   string
	body   string   // the chat completion
	lines  []string // the same answer as stream data lines; [DONE] is added
	want   *protocol.Turn
	tokens []string // the pieces onToken is given of the stream
}

// checkAnswers serves each case whole to Complete and streamed to
// CompleteStream, through a client newClient points at the server, and
// checks both give the case's turn.
func checkAnswers(t *testing.T, tests []answerCase, newClient func(*testing.T, *fakeOpenAI) *OpenAI) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				if !req.Stream {
					writeJSON(w, http.StatusOK, []byte(tt.body))
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for _, l := range tt.lines {
					io.WriteString(w, l+"\n\n")
				}
				io.WriteString(w, "data: [DONE]\n\n")
			})
			p := newClient(t, f)
			got, err := p.Complete(t.Context(), simpleRequest())
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Complete turn mismatch (-want +got):\n%s", diff)
			}
			var tokens []string
			got, err = p.CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
			if err != nil {
				t.Fatalf("CompleteStream: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CompleteStream turn mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.tokens, tokens); diff != "" {
				t.Errorf("CompleteStream tokens mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// completionAt is a chat completion of model m-1 whose one choice, at
// index, has the given message object, finish reason and usage object
// (all JSON).
func completionAt(index int, message, finish, usage string) string {
	return `{"id": "gen-1", "object": "chat.completion", "created": 1700000000, "model": "m-1",
		"choices": [{"index": ` + strconv.Itoa(index) + `, "message": ` + message + `, "finish_reason": ` + finish + `, "logprobs": null}],
		"usage": ` + usage + `}`
}

// chunkAt is a stream data line (one line: delta must be too) of model m-1 whose one choice, at index,
// has the given delta object and finish reason (JSON).
func chunkAt(index int, delta, finish string) string {
	return `data: {"id": "gen-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m-1", ` +
		`"choices": [{"index": ` + strconv.Itoa(index) + `, "delta": ` + delta + `, "finish_reason": ` + finish + `}]}`
}

// usageLine is a stream data line with no choices and the given usage
// object (JSON).
func usageLine(usage string) string {
	return `data: {"id": "gen-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m-1", "choices": [], "usage": ` + usage + `}`
}
