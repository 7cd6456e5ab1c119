package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ioharness/harness/pkg/protocol"
)

// The checks in this file hold for every Provider, HTTP or not. The HTTP
// clients also pass providertest.Run, which checks their wire formats and
// failures (providertest_test.go).

// scriptStep is one call the conformance suite makes: the request it sends
// and the turn the provider under test must answer it with.
type scriptStep struct {
	req  *protocol.CompletionRequest
	turn *protocol.Turn
}

// newProviderFunc builds the provider under test so that it answers the
// script's requests, sent in order, with the script's turns.
type newProviderFunc func(t *testing.T, script []scriptStep) Provider

// runConformance runs the checks every Provider must pass.
func runConformance(t *testing.T, newProvider newProviderFunc) {
	t.Run("AnswersInOrder", func(t *testing.T) {
		script := conversation()
		p := newProvider(t, script)
		if p.Name() == "" {
			t.Errorf("Name() = %q, want a name", p.Name())
		}
		for i, step := range script {
			got, err := p.Complete(t.Context(), step.req)
			if err != nil {
				t.Fatalf("call %d: Complete: %v", i+1, err)
			}
			checkTurn(t, p, got, step.turn)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		script := conversation()[:1]
		p := newProvider(t, script)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := p.Complete(ctx, script[0].req)
		checkCode(t, err, protocol.CodeProviderTransport)
		// The cancelled call used up nothing: the next one is answered.
		got, err := p.Complete(t.Context(), script[0].req)
		if err != nil {
			t.Fatalf("Complete after a cancelled call: %v", err)
		}
		checkTurn(t, p, got, script[0].turn)
	})

	t.Run("DeadlinePassed", func(t *testing.T) {
		script := conversation()[:1]
		p := newProvider(t, script)
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := p.Complete(ctx, script[0].req)
		checkCode(t, err, protocol.CodeProviderTimeout)
	})

	t.Run("Concurrent", func(t *testing.T) {
		const n = 8
		step := conversation()[1]
		script := make([]scriptStep, n)
		for i := range script {
			script[i] = step
		}
		p := newProvider(t, script)
		var wg sync.WaitGroup
		turns := make([]*protocol.Turn, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { turns[i], errs[i] = p.Complete(t.Context(), step.req) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Errorf("call %d: Complete: %v", i, errs[i])
				continue
			}
			checkTurn(t, p, turns[i], step.turn)
		}
	})

	t.Run("LeavesRequestAlone", func(t *testing.T) {
		script := conversation()
		p := newProvider(t, script)
		for i, step := range script {
			before := cloneRequest(step.req)
			if _, err := p.Complete(t.Context(), step.req); err != nil {
				t.Fatalf("call %d: Complete: %v", i+1, err)
			}
			if diff := cmp.Diff(before, step.req); diff != "" {
				t.Errorf("call %d: Complete changed the request (-before +after):\n%s", i+1, diff)
			}
		}
	})

	t.Run("Streams", func(t *testing.T) {
		// Through Stream, as a worker calls it: the same turns, and the
		// pieces of text join to each turn's text.
		script := conversation()
		p := newProvider(t, script)
		for i, step := range script {
			var tokens []string
			got, err := Stream(t.Context(), p, step.req, func(s string) { tokens = append(tokens, s) })
			if err != nil {
				t.Fatalf("call %d: Stream: %v", i+1, err)
			}
			checkTurn(t, p, got, step.turn)
			if joined := strings.Join(tokens, ""); joined != step.turn.Text {
				t.Errorf("call %d: pieces join to %q, want %q", i+1, joined, step.turn.Text)
			}
		}
	})

	t.Run("CallerOwnsTurn", func(t *testing.T) {
		step := conversation()[1]
		p := newProvider(t, []scriptStep{step, step})
		first, err := p.Complete(t.Context(), step.req)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		first.Text = "changed"
		first.ToolCalls[0].Arguments[0] = '['
		second, err := p.Complete(t.Context(), step.req)
		if err != nil {
			t.Fatalf("second Complete: %v", err)
		}
		checkTurn(t, p, second, step.turn)
	})
}

// checkTurn checks got is want as served by p.
func checkTurn(t *testing.T, p Provider, got, want *protocol.Turn) {
	t.Helper()
	if got == nil {
		t.Fatalf("Complete returned a nil turn and no error")
	}
	if got.Served != p.Name() {
		t.Errorf("turn.Served = %q, want the provider's name %q", got.Served, p.Name())
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(protocol.Turn{}, "Served")); diff != "" {
		t.Errorf("turn mismatch (-want +got):\n%s", diff)
	}
}

// checkCode checks err is a *protocol.Error of the given code, and that
// errors.Is finds it by code.
func checkCode(t *testing.T, err error, want protocol.Code) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v (%T), want a *protocol.Error %s", err, err, want)
	}
	if pe.Code != want {
		t.Fatalf("error code = %s, want %s; error: %v", pe.Code, want, pe)
	}
	if !errors.Is(err, &protocol.Error{Code: want}) {
		t.Errorf("errors.Is(err, code %s) = false", want)
	}
	if pe.Name != want.String() {
		t.Errorf("error Name = %q, want %q", pe.Name, want.String())
	}
	return pe
}

// conversation is three steps of one run: the task, a tool call, its
// result and the final answer.
func conversation() []scriptStep {
	tools := []protocol.ToolSpec{{
		Name:        "read_file",
		Description: "Read a file of the workspace.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	}}
	user := protocol.Message{Role: protocol.RoleUser, Content: "Why does the test fail?"}
	call := protocol.ToolCall{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main_test.go"}`)}
	return []scriptStep{
		{
			req: &protocol.CompletionRequest{
				Model: "gpt-test", System: "You fix code.", Tools: tools, MaxOutputTokens: 512,
				Messages: []protocol.Message{user},
			},
			turn: &protocol.Turn{
				Text: "Let me look.", Model: "gpt-test", FinishReason: "stop",
				Usage: protocol.Usage{InputTokens: 40, OutputTokens: 4},
			},
		},
		{
			req: &protocol.CompletionRequest{
				Model: "gpt-test", System: "You fix code.", Tools: tools, MaxOutputTokens: 512,
				Messages: []protocol.Message{user, {Role: protocol.RoleAssistant, Content: "Let me look."},
					{Role: protocol.RoleUser, Content: "Go on."}},
			},
			turn: &protocol.Turn{
				ToolCalls: []protocol.ToolCall{call}, Model: "gpt-test", FinishReason: "tool_calls",
				Usage: protocol.Usage{InputTokens: 52, OutputTokens: 12, CachedTokens: 40},
			},
		},
		{
			req: &protocol.CompletionRequest{
				Model: "gpt-test", System: "You fix code.", Tools: tools, MaxOutputTokens: 512,
				Messages: []protocol.Message{user, {Role: protocol.RoleAssistant, Content: "Let me look."},
					{Role: protocol.RoleUser, Content: "Go on."},
					{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{call}},
					{Role: protocol.RoleTool, ToolCallID: "call_1", Content: "func TestAdd(t *testing.T) { ... }"}},
			},
			turn: &protocol.Turn{
				Text: "The test expects 3 but Add returns 4.", Model: "gpt-test", FinishReason: "stop",
				Usage: protocol.Usage{InputTokens: 90, OutputTokens: 11, CachedTokens: 52, ReasoningTokens: 7},
			},
		},
	}
}

func TestConformanceScripted(t *testing.T) {
	runConformance(t, func(t *testing.T, script []scriptStep) Provider {
		turns := make([]*protocol.Turn, len(script))
		for i, s := range script {
			turns[i] = s.turn
		}
		return NewScripted(turns...)
	})
}

func TestConformanceOpenAI(t *testing.T) {
	runConformance(t, func(t *testing.T, script []scriptStep) Provider {
		turns := make([]*protocol.Turn, len(script))
		for i, s := range script {
			turns[i] = s.turn
		}
		f := newFakeOpenAI(t, answerTurns(turns...))
		return f.newClient(t, nil)
	})
}

func TestConformanceRecord(t *testing.T) {
	runConformance(t, func(t *testing.T, script []scriptStep) Provider {
		turns := make([]*protocol.Turn, len(script))
		for i, s := range script {
			turns[i] = s.turn
		}
		return NewRecord(NewScripted(turns...))
	})
}

func TestConformanceReplay(t *testing.T) {
	runConformance(t, func(t *testing.T, script []scriptStep) Provider {
		c := &Cassette{Format: CassetteFormat}
		for _, s := range script {
			c.Exchanges = append(c.Exchanges, Exchange{Request: s.req, Turn: s.turn})
		}
		// Through a file, as a replayed run reads it.
		path := t.TempDir() + "/run.cassette.json"
		if err := c.Save(path); err != nil {
			t.Fatalf("Save: %v", err)
		}
		p, err := LoadReplay(path)
		if err != nil {
			t.Fatalf("LoadReplay: %v", err)
		}
		return p
	})
}

func TestConformanceFallback(t *testing.T) {
	runConformance(t, func(t *testing.T, script []scriptStep) Provider {
		turns := make([]*protocol.Turn, len(script))
		for i, s := range script {
			turns[i] = s.turn
		}
		return NewFallback(NewScripted(turns...))
	})
}
