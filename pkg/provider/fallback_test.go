package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ioharness/harness/pkg/protocol"
)

// providerFunc is a Provider made of a name and a function, for chains
// whose members must fail in exact ways.
type providerFunc struct {
	name  string
	calls int
	fn    func(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error)
}

func (p *providerFunc) Name() string { return p.name }

func (p *providerFunc) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	p.calls++
	return p.fn(ctx, req)
}

func failing(name string, code protocol.Code) *providerFunc {
	return &providerFunc{name: name, fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
		return nil, protocol.Errorf(code, "%s failed", name)
	}}
}

func answering(name, text string) *providerFunc {
	return &providerFunc{name: name, fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
		return &protocol.Turn{Text: text, Served: name}, nil
	}}
}

// TestFallbackOverHTTP runs a chain of two real clients against servers
// speaking their wire formats: the first, OpenAI, fails, and the second,
// Anthropic, serves or not depending on how the first failed.
func TestFallbackOverHTTP(t *testing.T) {
	tests := []struct {
		name        string
		first       func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest)
		second      func(w http.ResponseWriter, r *http.Request)
		wantServed  string // "" when the chain fails
		wantCode    protocol.Code
		wantSecond  int // requests the second server gets
		wantRetryMS int64
		wantInMsg   string
	}{
		{
			name: "first rate limited, second serves",
			first: func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				w.Header().Set("Retry-After", "20")
				writeAPIError(w, 429, "requests", "rate_limit_exceeded", "slow down")
			},
			second:     answerBody(200, "application/json", anthropicHello),
			wantServed: "anthropic",
			wantSecond: 1,
		},
		{
			name: "first refuses the key: no fallover",
			first: func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				writeAPIError(w, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
			},
			second:     answerBody(200, "application/json", anthropicHello),
			wantCode:   protocol.CodeProviderAuth,
			wantSecond: 0,
			wantInMsg:  "primary",
		},
		{
			name: "both fail: the last error",
			first: func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				writeAPIError(w, 500, "server_error", "", "boom")
			},
			second: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "3")
				answerBody(529, "application/json", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)(w, r)
			},
			wantCode:    protocol.CodeProviderServer,
			wantSecond:  1,
			wantRetryMS: 3000,
			wantInMsg:   "after primary failed with provider_server",
		},
		{
			name: "first fails, second refuses the request: its error",
			first: func(w http.ResponseWriter, r *http.Request, call int, req *wireRequest) {
				writeAPIError(w, 503, "server_error", "", "unavailable")
			},
			second:     answerBody(400, "application/json", `{"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}`),
			wantCode:   protocol.CodeProviderRequest,
			wantSecond: 1,
			wantInMsg:  "anthropic refused",
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+"/"+map[bool]string{false: "plain", true: "streamed"}[stream], func(t *testing.T) {
				first := newFakeOpenAI(t, tt.first)
				second := newFakeAnthropic(t, tt.second)
				chain := NewFallback(
					first.newClient(t, func(c *OpenAIConfig) { c.Name = "primary" }),
					second.newClient(t, nil),
				)
				if chain.Name() != "primary -> anthropic" {
					t.Errorf("Name() = %q, want %q", chain.Name(), "primary -> anthropic")
				}
				var turn *protocol.Turn
				var err error
				if stream {
					turn, err = chain.CompleteStream(t.Context(), simpleRequest(), nil)
				} else {
					turn, err = chain.Complete(t.Context(), simpleRequest())
				}
				if _, bodies := second.requests(); len(bodies) != tt.wantSecond {
					t.Errorf("second provider got %d requests, want %d", len(bodies), tt.wantSecond)
				}
				if tt.wantServed != "" {
					if err != nil {
						t.Fatalf("call: %v", err)
					}
					if turn.Served != tt.wantServed {
						t.Errorf("Served = %q, want %q", turn.Served, tt.wantServed)
					}
					return
				}
				pe := checkCode(t, err, tt.wantCode)
				t.Logf("error: %v", pe)
				if pe.RetryAfterMS != tt.wantRetryMS {
					t.Errorf("RetryAfterMS = %d, want %d", pe.RetryAfterMS, tt.wantRetryMS)
				}
				if !strings.Contains(pe.Message, tt.wantInMsg) {
					t.Errorf("Message = %q, want it to contain %q", pe.Message, tt.wantInMsg)
				}
			})
		}
	}
}

func TestFallbackChains(t *testing.T) {
	t.Run("three members, the third serves", func(t *testing.T) {
		a, b, c := failing("a", protocol.CodeProviderTimeout), failing("b", protocol.CodeProviderMalformed), answering("c", "hi")
		f := NewFallback(a, b, c)
		if f.Name() != "a -> b -> c" {
			t.Errorf("Name() = %q, want a -> b -> c", f.Name())
		}
		turn, err := f.Complete(t.Context(), simpleRequest())
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if turn.Served != "c" || a.calls != 1 || b.calls != 1 || c.calls != 1 {
			t.Errorf("Served = %q, calls %d %d %d; want c, 1 1 1", turn.Served, a.calls, b.calls, c.calls)
		}
	})
	t.Run("nested", func(t *testing.T) {
		f := NewFallback(failing("a", protocol.CodeRateLimited), NewFallback(failing("b", protocol.CodeProviderServer), answering("c", "hi")))
		if f.Name() != "a -> b -> c" {
			t.Errorf("Name() = %q, want a -> b -> c", f.Name())
		}
		turn, err := f.Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "c" {
			t.Errorf("Complete = %+v, %v; want served by c", turn, err)
		}
	})
	t.Run("the first serves: the others are not asked", func(t *testing.T) {
		a, b := answering("a", "hi"), answering("b", "hi")
		turn, err := NewFallback(a, b).Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "a" || b.calls != 0 {
			t.Errorf("Complete = %+v, %v, b asked %d times; want served by a alone", turn, err, b.calls)
		}
	})
	t.Run("a used up quota falls over to the next account", func(t *testing.T) {
		a, b := failing("a", protocol.CodeQuotaExhausted), answering("b", "hi")
		turn, err := NewFallback(a, b).Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "b" {
			t.Errorf("Complete = %+v, %v; want served by b", turn, err)
		}
	})
	t.Run("a server's no-retry verdict is its own: the next member is asked", func(t *testing.T) {
		no := false
		a := &providerFunc{name: "a", fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
			e := protocol.Errorf(protocol.CodeProviderServer, "a failed")
			e.Retry = &no
			return nil, e
		}}
		b := answering("b", "hi")
		turn, err := NewFallback(a, b).Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "b" {
			t.Errorf("Complete = %+v, %v; want served by b", turn, err)
		}
	})
	t.Run("context overflow does not fall over", func(t *testing.T) {
		a, b := failing("a", protocol.CodeContextOverflow), answering("b", "hi")
		_, err := NewFallback(a, b).Complete(t.Context(), simpleRequest())
		checkCode(t, err, protocol.CodeContextOverflow)
		if b.calls != 0 {
			t.Errorf("b asked %d times, want 0", b.calls)
		}
	})
	t.Run("a done context stops the chain", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		a := &providerFunc{name: "a", fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
			cancel()
			return nil, protocol.Errorf(protocol.CodeProviderTransport, "cancelled")
		}}
		b := answering("b", "hi")
		_, err := NewFallback(a, b).Complete(ctx, simpleRequest())
		checkCode(t, err, protocol.CodeProviderTransport)
		if b.calls != 0 {
			t.Errorf("b asked %d times, want 0", b.calls)
		}
	})
	t.Run("a plain error is classified", func(t *testing.T) {
		a := &providerFunc{name: "a", fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
			return nil, errors.New("dial tcp: connection refused")
		}}
		turn, err := NewFallback(a, answering("b", "hi")).Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "b" {
			t.Errorf("Complete = %+v, %v; want a transport failure of a, served by b", turn, err)
		}
	})
	t.Run("Served filled in when a member leaves it empty", func(t *testing.T) {
		a := &providerFunc{name: "a", fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
			return &protocol.Turn{Text: "hi"}, nil
		}}
		turn, err := NewFallback(nil, a).Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "a" {
			t.Errorf("Complete = %+v, %v; want served by a", turn, err)
		}
	})
	t.Run("nil turn", func(t *testing.T) {
		a := &providerFunc{name: "a", fn: func(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) { return nil, nil }}
		turn, err := NewFallback(a, answering("b", "hi")).Complete(t.Context(), simpleRequest())
		if err != nil || turn.Served != "b" {
			t.Errorf("Complete = %+v, %v; want a malformed answer from a, served by b", turn, err)
		}
	})
	t.Run("no members", func(t *testing.T) {
		f := NewFallback()
		if f.Name() != "" {
			t.Errorf("Name() = %q, want empty", f.Name())
		}
		_, err := f.Complete(t.Context(), simpleRequest())
		checkCode(t, err, protocol.CodeProviderRequest)
		_, err = f.CompleteStream(t.Context(), simpleRequest(), nil)
		checkCode(t, err, protocol.CodeProviderRequest)
	})
}

// TestFallbackStreams checks a chain streams through members that stream,
// and hands on the whole text of those that do not.
func TestFallbackStreams(t *testing.T) {
	first := streamServer(t, chunk(`{"content": "Part"}`, `null`)) // cut off: no [DONE]
	second := NewScripted(&protocol.Turn{Text: "Whole answer."})
	chain := NewFallback(first.newClient(t, nil), second)
	var tokens []string
	turn, err := chain.CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
	if err != nil {
		t.Fatalf("CompleteStream: %v", err)
	}
	if turn.Served != "scripted" {
		t.Errorf("Served = %q, want scripted", turn.Served)
	}
	// The first member streamed a piece before it failed; the second's
	// whole text follows.
	if diff := cmp.Diff([]string{"Part", "Whole answer."}, tokens); diff != "" {
		t.Errorf("tokens mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&protocol.Turn{Text: "Whole answer."}, turn, cmpopts.IgnoreFields(protocol.Turn{}, "Served")); diff != "" {
		t.Errorf("turn mismatch (-want +got):\n%s", diff)
	}
}
