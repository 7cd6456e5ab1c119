package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestClassify(t *testing.T) {
	netTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name string
		f    failure
		want protocol.Code
	}{
		{name: "429", f: failure{status: 429}, want: protocol.CodeRateLimited},
		{name: "401", f: failure{status: 401}, want: protocol.CodeProviderAuth},
		{name: "403", f: failure{status: 403}, want: protocol.CodeProviderAuth},
		{name: "400", f: failure{status: 400, message: "bad role"}, want: protocol.CodeProviderRequest},
		{name: "400 context_length_exceeded code", f: failure{status: 400, apiCode: "context_length_exceeded"}, want: protocol.CodeContextOverflow},
		{name: "400 prompt is too long", f: failure{status: 400, message: "prompt is too long: 210000 tokens > 200000 maximum"}, want: protocol.CodeContextOverflow},
		{name: "400 llama.cpp context", f: failure{status: 400, message: "the request exceeds the available context size"}, want: protocol.CodeContextOverflow},
		{name: "413 is a request error", f: failure{status: 413, message: "context length"}, want: protocol.CodeProviderRequest},
		{name: "404", f: failure{status: 404}, want: protocol.CodeProviderRequest},
		{name: "422", f: failure{status: 422}, want: protocol.CodeProviderRequest},
		{name: "302", f: failure{status: 302}, want: protocol.CodeProviderRequest},
		{name: "500", f: failure{status: 500}, want: protocol.CodeProviderServer},
		{name: "502", f: failure{status: 502}, want: protocol.CodeProviderServer},
		{name: "529", f: failure{status: 529}, want: protocol.CodeProviderServer},
		{name: "200 unreadable", f: failure{status: 200, bad: true, err: io.ErrUnexpectedEOF}, want: protocol.CodeProviderMalformed},
		{name: "200 body cut by a timeout", f: failure{status: 200, err: context.DeadlineExceeded}, want: protocol.CodeProviderTimeout},
		{name: "200 body cut by the network", f: failure{status: 200, err: io.ErrUnexpectedEOF}, want: protocol.CodeProviderTransport},
		{name: "context deadline", f: failure{err: fmt.Errorf("post: %w", context.DeadlineExceeded)}, want: protocol.CodeProviderTimeout},
		{name: "net timeout", f: failure{err: netTimeout}, want: protocol.CodeProviderTimeout},
		{name: "cancelled", f: failure{err: context.Canceled}, want: protocol.CodeProviderTransport},
		{name: "connection refused", f: failure{err: errors.New("dial tcp: connection refused")}, want: protocol.CodeProviderTransport},
		{name: "not sent", f: failure{notSent: true, err: errors.New("unsupported model")}, want: protocol.CodeProviderRequest},
		{name: "not sent, but the deadline passed first", f: failure{notSent: true, err: context.DeadlineExceeded}, want: protocol.CodeProviderTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.provider = "acme"
			got := classify(tt.f)
			if got.Code != tt.want {
				t.Errorf("classify(%+v) = %s, want %s", tt.f, got.Code, tt.want)
			}
			if got.Name != tt.want.String() {
				t.Errorf("classify(%+v).Name = %q, want %q", tt.f, got.Name, tt.want.String())
			}
			if !strings.Contains(got.Message, "acme") {
				t.Errorf("classify(%+v).Message = %q, want it to name the provider", tt.f, got.Message)
			}
			if got.Hint == "" {
				t.Errorf("classify(%+v) has no hint", tt.f)
			}
		})
	}
}

func TestClassifyTruncatesMessage(t *testing.T) {
	e := classify(failure{provider: "p", status: 500, message: strings.Repeat("é", 2*maxMessage)})
	if n := strings.Count(e.Message, "é"); n != maxMessage {
		t.Errorf("message keeps %d characters of the provider's text, want %d", n, maxMessage)
	}
}

func TestRetryAfterMS(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   int64
	}{
		{name: "none", want: 0},
		{name: "seconds", header: map[string]string{"Retry-After": "20"}, want: 20000},
		{name: "fractional seconds", header: map[string]string{"Retry-After": "1.5"}, want: 1500},
		{name: "zero", header: map[string]string{"Retry-After": "0"}, want: 0},
		{name: "negative", header: map[string]string{"Retry-After": "-3"}, want: 0},
		{name: "HTTP date", header: map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:01:30 GMT"}, want: 90000},
		{name: "RFC 850 date", header: map[string]string{"Retry-After": "Sunday, 01-Mar-26 12:00:05 GMT"}, want: 5000},
		{name: "date in the past", header: map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:59:00 GMT"}, want: 0},
		{name: "garbage", header: map[string]string{"Retry-After": "soon"}, want: 0},
		{name: "NaN", header: map[string]string{"Retry-After": "NaN"}, want: 0},
		{name: "huge", header: map[string]string{"Retry-After": "1e300"}, want: maxRetryAfterMS},
		{name: "milliseconds header wins", header: map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, want: 250},
		{name: "bad milliseconds header falls back", header: map[string]string{"Retry-After-Ms": "x", "Retry-After": "1"}, want: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := retryAfterMS(h, now); got != tt.want {
				t.Errorf("retryAfterMS(%v) = %d, want %d", tt.header, got, tt.want)
			}
		})
	}
}

func TestClassifyRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{"Retry-After": {"Sun, 01 Mar 2026 12:00:42 GMT"}}
	e := classify(failure{provider: "p", status: 429, header: h, now: now})
	if e.RetryAfterMS != 42000 {
		t.Errorf("RetryAfterMS = %d, want 42000", e.RetryAfterMS)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{in: "", n: 3, want: ""},
		{in: "abc", n: 3, want: "abc"},
		{in: "abcd", n: 3, want: "abc..."},
		{in: "日本語です", n: 2, want: "日本..."},
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestErrorTypeStatus(t *testing.T) {
	tests := []struct {
		typ  string
		want int
		code protocol.Code
	}{
		{typ: "overloaded_error", want: 529, code: protocol.CodeProviderServer},
		{typ: "api_error", want: 500, code: protocol.CodeProviderServer},
		{typ: "rate_limit_error", want: 429, code: protocol.CodeRateLimited},
		{typ: "rate_limit_exceeded", want: 429, code: protocol.CodeRateLimited},
		{typ: "authentication_error", want: 401, code: protocol.CodeProviderAuth},
		{typ: "permission_error", want: 403, code: protocol.CodeProviderAuth},
		{typ: "invalid_request_error", want: 400, code: protocol.CodeProviderRequest},
		{typ: "request_too_large", want: 413, code: protocol.CodeProviderRequest},
		{typ: "502", want: 502, code: protocol.CodeProviderServer},
		{typ: "429", want: 429, code: protocol.CodeRateLimited},
		{typ: "200", want: 500, code: protocol.CodeProviderServer},
		{typ: "", want: 500, code: protocol.CodeProviderServer},
		{typ: "something_new", want: 500, code: protocol.CodeProviderServer},
	}
	for _, tt := range tests {
		got := errorTypeStatus(tt.typ)
		if got != tt.want {
			t.Errorf("errorTypeStatus(%q) = %d, want %d", tt.typ, got, tt.want)
		}
		e := classify(failure{provider: "p", status: got, inStream: true, message: "m"})
		if e.Code != tt.code {
			t.Errorf("classify(in-stream %q) = %s, want %s", tt.typ, e.Code, tt.code)
		}
		if !strings.Contains(e.Message, "error event mid-stream") || strings.Contains(e.Message, "HTTP") {
			t.Errorf("classify(in-stream %q).Message = %q, want it to say the error came mid-stream", tt.typ, e.Message)
		}
	}
}

func TestClassifyContextLimit(t *testing.T) {
	e := classify(failure{provider: "anthropic", status: 400,
		message: "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000"})
	if e.Code != protocol.CodeContextOverflow {
		t.Errorf("classify(context limit) = %s, want context_overflow", e.Code)
	}
}
