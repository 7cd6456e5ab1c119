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
