// Command fakellm is an OpenAI-compatible chat completions server for the
// e2e suite: every answer is script.Turn of the request, after a fixed
// delay, streamed (SSE) when the request asks for a stream. Workers reach
// it through OPENAI_BASE_URL, so the whole real provider path runs.
//
// Usage: fakellm [--listen :8080] [--delay 200ms]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ioharness/harness/e2e/script"
	"github.com/ioharness/harness/pkg/protocol"
)

type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		ToolCalls []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	delay := flag.Duration("delay", 200*time.Millisecond, "time each answer takes")
	flag.Parse()
	var served atomic.Int64
	http.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		creq := &protocol.CompletionRequest{}
		for _, m := range req.Messages {
			msg := protocol.Message{Role: m.Role}
			if m.Content != nil {
				msg.Content = *m.Content
			}
			creq.Messages = append(creq.Messages, msg)
		}
		turn := script.Turn(creq)
		time.Sleep(time.Until(start.Add(*delay)))
		served.Add(1)
		calls := make([]map[string]any, 0, len(turn.ToolCalls))
		for i, c := range turn.ToolCalls {
			calls = append(calls, map[string]any{"index": i, "id": c.ID, "type": "function",
				"function": map[string]string{"name": c.Name, "arguments": string(c.Arguments)}})
		}
		usage := map[string]int64{"prompt_tokens": turn.Usage.InputTokens, "completion_tokens": turn.Usage.OutputTokens,
			"total_tokens": turn.Usage.Total()}
		finish := "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
		var content any
		if turn.Text != "" {
			content = turn.Text
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			msg := map[string]any{"role": "assistant", "content": content}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion", "created": start.Unix(),
				"model": req.Model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		chunk := func(delta map[string]any, fin any) map[string]any {
			return map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": start.Unix(), "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
		}
		delta := map[string]any{"role": "assistant"}
		if content != nil {
			delta["content"] = content
		}
		if len(calls) > 0 {
			delta["tool_calls"] = calls
		}
		send(chunk(delta, nil))
		send(chunk(map[string]any{}, finish))
		send(map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": start.Unix(), "model": req.Model,
			"choices": []any{}, "usage": usage})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	http.HandleFunc("GET /served", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, served.Load()) })
	log.Printf("fakellm on %s, %s a turn", *listen, *delay)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
