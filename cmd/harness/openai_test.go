package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestRunDrivesAnOpenAICompatibleServer is the README's first command with
// OPENAI_API_KEY and OPENAI_BASE_URL set: the run is driven by whatever
// answers the OpenAI chat completions API there, here a local server that
// speaks its wire format.
func TestRunDrivesAnOpenAICompatibleServer(t *testing.T) {
	var mu sync.Mutex
	var models, auths []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Stream   bool   `json:"stream"`
			Model    string `json:"model"`
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Tools) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls++
		n := calls
		models = append(models, req.Model)
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		msg := map[string]any{"role": "assistant", "content": "Fixing Add."}
		finish := "stop"
		if n == 1 {
			finish = "tool_calls"
			msg["tool_calls"] = []map[string]any{{"id": "call_1", "type": "function", "function": map[string]any{
				"name": "edit_file", "arguments": `{"path":"calc.go","search":"return a - b","replace":"return a + b"}`}}}
		}
		usage := map[string]any{"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
		if req.Stream {
			// The streamed form: the role, the text, the tool call, the
			// finish, the usage, then [DONE].
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := func(delta map[string]any, finish any, usage any) {
				choices := []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}
				if delta == nil {
					choices = []map[string]any{}
				}
				b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": req.Model, "choices": choices, "usage": usage})
				_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
			}
			chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
			chunk(map[string]any{"content": msg["content"]}, nil, nil)
			if calls, ok := msg["tool_calls"].([]map[string]any); ok {
				call := calls[0]
				call["index"] = 0
				chunk(map[string]any{"tool_calls": []map[string]any{call}}, nil, nil)
			}
			chunk(map[string]any{}, finish, nil)
			chunk(nil, nil, usage)
			_, _ = w.Write([]byte("data: [DONE]\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
	}))
	defer srv.Close()

	vars := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_MODEL": "local-model"}
	code, out, errOut := cli(t, t.Context(), vars, "run", "--copy", "--data", t.TempDir(), example)
	if code != exitOK || !strings.Contains(out, "outcome success after 1 step(s), 320 tokens") {
		t.Fatalf("run against the OpenAI-compatible server = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "provider  openai ("+srv.URL) {
		t.Errorf("progress does not name the provider: %s", errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 || models[0] != "local-model" || auths[0] != "Bearer sk-test" {
		t.Errorf("server saw %d calls, models %v, auth %v; want one call for local-model with the key", calls, models, auths)
	}
}
