package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestScriptedOrderAndExhaustion(t *testing.T) {
	turns := []*protocol.Turn{
		{Text: "one"},
		{ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "exec", Arguments: json.RawMessage(`{"argv":["ls"]}`)}}},
		{Text: "three", Served: "someone else"},
	}
	p := NewScripted(turns...)
	turns[0].Text = "changed after NewScripted"
	for i, want := range []string{"one", "", "three"} {
		got, err := p.Complete(t.Context(), simpleRequest())
		if err != nil {
			t.Fatalf("call %d: Complete: %v", i+1, err)
		}
		if got.Text != want || got.Served != "scripted" {
			t.Errorf("call %d: got text %q served by %q, want %q served by scripted", i+1, got.Text, got.Served, want)
		}
	}
	for _, n := range []int{4, 5} {
		_, err := p.Complete(t.Context(), simpleRequest())
		pe := checkCode(t, err, protocol.CodeProviderRequest)
		if want := fmt.Sprintf("scripted provider has no turn %d", n); !strings.Contains(pe.Message, want) {
			t.Errorf("Message = %q, want it to say %q", pe.Message, want)
		}
		if pe.Retryable() {
			t.Errorf("an exhausted script is retryable, want not")
		}
	}
	if got := p.Calls(); got != 5 {
		t.Errorf("Calls() = %d, want 5", got)
	}
}

func TestScriptedNilTurn(t *testing.T) {
	p := NewScripted(nil)
	_, err := p.Complete(t.Context(), simpleRequest())
	checkCode(t, err, protocol.CodeProviderMalformed)
}

func TestScriptedFunc(t *testing.T) {
	rateLimited := &protocol.Error{Code: protocol.CodeRateLimited, Name: "rate_limited", Message: "slow down", RetryAfterMS: 500}
	p := NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch call {
		case 1:
			return &protocol.Turn{Text: "you said " + req.Messages[0].Content}, nil
		case 2:
			return nil, rateLimited
		case 3:
			return nil, errors.New("plain failure")
		case 4:
			return nil, fmt.Errorf("slow: %w", context.DeadlineExceeded)
		}
		return nil, nil
	})
	got, err := p.Complete(t.Context(), simpleRequest())
	if err != nil {
		t.Fatalf("call 1: Complete: %v", err)
	}
	if diff := cmp.Diff(&protocol.Turn{Text: "you said Hello", Served: "scripted"}, got); diff != "" {
		t.Errorf("call 1: turn mismatch (-want +got):\n%s", diff)
	}
	_, err = p.Complete(t.Context(), simpleRequest())
	if pe := checkCode(t, err, protocol.CodeRateLimited); pe.RetryAfterMS != 500 {
		t.Errorf("call 2: RetryAfterMS = %d, want the function's 500", pe.RetryAfterMS)
	}
	_, err = p.Complete(t.Context(), simpleRequest())
	checkCode(t, err, protocol.CodeProviderTransport)
	_, err = p.Complete(t.Context(), simpleRequest())
	checkCode(t, err, protocol.CodeProviderTimeout)
	_, err = p.Complete(t.Context(), simpleRequest())
	checkCode(t, err, protocol.CodeProviderMalformed)
}

func TestScriptedFuncNumbersConcurrentCalls(t *testing.T) {
	const n = 50
	p := NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: fmt.Sprint(call)}, nil
	})
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			got, err := p.Complete(t.Context(), simpleRequest())
			if err != nil {
				t.Errorf("Complete: %v", err)
				return
			}
			mu.Lock()
			seen[got.Text] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	for i := 1; i <= n; i++ {
		if !seen[fmt.Sprint(i)] {
			t.Errorf("no call was numbered %d", i)
		}
	}
}
