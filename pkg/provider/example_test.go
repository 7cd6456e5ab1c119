package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

func ExampleNewOpenAI() {
	// A stand-in for api.openai.com answering every call with one tool call.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1",
			"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
				"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "exec", "arguments": "{\"argv\":[\"go\",\"test\"]}"}}]}}],
			"usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138}}`)
	}))
	defer srv.Close()

	p, err := provider.NewOpenAI(provider.OpenAIConfig{
		APIKey:  "sk-example", // main reads OPENAI_API_KEY
		BaseURL: srv.URL + "/v1",
	})
	if err != nil {
		log.Fatal(err)
	}
	turn, err := p.Complete(context.Background(), &protocol.CompletionRequest{
		Model:    "gpt-4.1",
		System:   "You fix code.",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Make the tests pass."}},
		Tools: []protocol.ToolSpec{{Name: "exec", Description: "Run a command.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"}}}}`)}},
	})
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Retryable() {
			log.Printf("retry in %dms", pe.RetryAfterMS)
		}
		log.Fatal(err)
	}
	fmt.Println(turn.Served, turn.FinishReason, turn.ToolCalls[0].Name, string(turn.ToolCalls[0].Arguments), turn.Usage.Total())
	// Output: openai tool_calls exec {"argv":["go","test"]} 138
}

func ExampleNewScripted() {
	p := provider.NewScripted(
		&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"go.mod"}`)}}},
		&protocol.Turn{Text: "Done."},
	)
	req := &protocol.CompletionRequest{Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Go."}}}
	for range 3 {
		turn, err := p.Complete(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %d tool calls, text %q\n", turn.Served, len(turn.ToolCalls), turn.Text)
	}
	// Output:
	// scripted: 1 tool calls, text ""
	// scripted: 0 tool calls, text "Done."
	// provider_request: scripted provider has no turn 3: it was given 2 (script one turn for every call the test makes)
}

func ExampleNewScriptedFunc() {
	p := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		last := req.Messages[len(req.Messages)-1]
		return &protocol.Turn{Text: fmt.Sprintf("call %d heard %q", call, last.Content)}, nil
	})
	turn, _ := p.Complete(context.Background(), &protocol.CompletionRequest{
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "ping"}},
	})
	fmt.Println(turn.Text)
	// Output: call 1 heard "ping"
}

func ExampleNewRecord() {
	dir, err := os.MkdirTemp("", "cassette")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.cassette.json")
	req := &protocol.CompletionRequest{
		Model:    "gpt-4.1",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "What is 2+2?"}},
	}

	// Record: forward to the real provider (here a scripted one) and save.
	rec := provider.NewRecord(provider.NewScripted(&protocol.Turn{Text: "4"}))
	if _, err := rec.Complete(context.Background(), req); err != nil {
		log.Fatal(err)
	}
	if err := rec.Save(path); err != nil {
		log.Fatal(err)
	}

	// Replay: answer the same request from the file, with no provider.
	rp, err := provider.LoadReplay(path)
	if err != nil {
		log.Fatal(err)
	}
	turn, err := rp.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(turn.Served, turn.Text)

	// A request that was not recorded is refused, and not worth retrying.
	other := &protocol.CompletionRequest{Model: "gpt-4.1",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "What is 3+3?"}}}
	_, err = rp.Complete(context.Background(), other)
	fmt.Println(errors.Is(err, protocol.ErrUnrecorded), protocol.AsError(err).Retryable())
	// Output:
	// replay 4
	// true false
}

func ExampleRequestKey() {
	a := &protocol.CompletionRequest{Messages: []protocol.Message{{Role: protocol.RoleAssistant,
		ToolCalls: []protocol.ToolCall{{ID: "c", Name: "exec", Arguments: json.RawMessage(`{"argv": ["ls"]}`)}}}}}
	b := &protocol.CompletionRequest{Messages: []protocol.Message{{Role: protocol.RoleAssistant,
		ToolCalls: []protocol.ToolCall{{ID: "c", Name: "exec", Arguments: json.RawMessage("{\n  \"argv\": [\"ls\"]\n}")}}}}}
	fmt.Println(provider.RequestKey(a) == provider.RequestKey(b))
	// Output: true
}

func ExampleNewAnthropic() {
	// A stand-in for api.anthropic.com streaming one short answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, data := range []string{
			`{"type": "message_start", "message": {"type": "message", "model": "claude-sonnet-4-5", "content": [], "usage": {"input_tokens": 90, "cache_read_input_tokens": 30, "output_tokens": 1}}}`,
			`{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`,
			`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "All tests "}}`,
			`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "pass."}}`,
			`{"type": "content_block_stop", "index": 0}`,
			`{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}`,
			`{"type": "message_stop"}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", data)
		}
	}))
	defer srv.Close()

	p, err := provider.NewAnthropic(provider.AnthropicConfig{
		APIKey:  "sk-ant-example", // main reads ANTHROPIC_API_KEY
		BaseURL: srv.URL,
	})
	if err != nil {
		log.Fatal(err)
	}
	turn, err := p.CompleteStream(context.Background(), &protocol.CompletionRequest{
		Model:    "claude-sonnet-4-5",
		System:   "You fix code.",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Are we done?"}},
	}, func(text string) { fmt.Printf("token %q\n", text) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(turn.Served, turn.FinishReason, turn.Text, turn.Usage.InputTokens, turn.Usage.CachedTokens, turn.Usage.OutputTokens)
	// Output:
	// token "All tests "
	// token "pass."
	// anthropic end_turn All tests pass. 120 30 5
}

func ExampleNewOpenRouter() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Println("X-Title:", r.Header.Get("X-Title"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id": "gen-1", "object": "chat.completion", "model": "anthropic/claude-sonnet-4",
			"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done."}}],
			"usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}}`)
	}))
	defer srv.Close()

	p, err := provider.NewOpenRouter(provider.OpenRouterConfig{
		APIKey:  "sk-or-example",     // main reads OPENROUTER_API_KEY
		BaseURL: srv.URL + "/api/v1", // default https://openrouter.ai/api/v1
		Referer: "https://github.com/ioharness/harness",
		Title:   "harness",
	})
	if err != nil {
		log.Fatal(err)
	}
	turn, err := p.Complete(context.Background(), &protocol.CompletionRequest{
		Model:    "anthropic/claude-sonnet-4",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Finish."}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(turn.Served, turn.Model, turn.Text)
	// Output:
	// X-Title: harness
	// openrouter anthropic/claude-sonnet-4 Done.
}

func ExampleNewFallback() {
	// The first provider is rate limited, so the second serves.
	limited := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return nil, &protocol.Error{Code: protocol.CodeRateLimited, Message: "slow down", RetryAfterMS: 20000}
	})
	req := &protocol.CompletionRequest{Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Go."}}}
	backup, err := provider.NewReplay(&provider.Cassette{Format: provider.CassetteFormat,
		Exchanges: []provider.Exchange{{Request: req, Turn: &protocol.Turn{Text: "Served by the backup."}}}})
	if err != nil {
		log.Fatal(err)
	}
	chain := provider.NewFallback(limited, backup)
	turn, err := chain.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(chain.Name())
	fmt.Println(turn.Served, turn.Text)
	// Output:
	// scripted -> replay
	// replay Served by the backup.
}

func ExampleRetryPolicy_Next() {
	policy := provider.RetryPolicy{} // 500ms doubling to 30s, 2 retries
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Minute) // the run's time budget
	overloaded := protocol.Errorf(protocol.CodeProviderServer, "overloaded")
	limited := &protocol.Error{Code: protocol.CodeRateLimited, RetryAfterMS: 90_000}

	for attempt := 1; attempt <= 3; attempt++ {
		wait, retry := policy.Next(attempt, overloaded, now, deadline)
		fmt.Println("server failure", attempt, wait, retry)
	}
	wait, retry := policy.Next(1, limited, now, deadline)
	fmt.Println("rate limited for 90s", wait, retry) // past the deadline: escalate now
	_, retry = policy.Next(1, protocol.Errorf(protocol.CodeProviderAuth, "bad key"), now, deadline)
	fmt.Println("auth", retry)
	// Output:
	// server failure 1 500ms true
	// server failure 2 1s true
	// server failure 3 0s false
	// rate limited for 90s 1m30s false
	// auth false
}

func ExampleStream() {
	// Stream works with any provider: a Streamer streams, others hand over
	// their whole text at once.
	p := provider.NewScripted(&protocol.Turn{Text: "Hello."})
	turn, err := provider.Stream(context.Background(), p, &protocol.CompletionRequest{
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Hi"}},
	}, func(text string) { fmt.Printf("token %q\n", text) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(turn.Text)
	// Output:
	// token "Hello."
	// Hello.
}
