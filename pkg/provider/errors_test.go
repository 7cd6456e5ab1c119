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

func TestClassifyQuotaExhausted(t *testing.T) {
	tests := []struct {
		name string
		f    failure
		want protocol.Code
	}{
		{name: "OpenAI 429 insufficient_quota code",
			f: failure{status: 429, apiCode: "insufficient_quota",
				message: "You exceeded your current quota, please check your plan and billing details. (insufficient_quota)"},
			want: protocol.CodeQuotaExhausted},
		{name: "OpenAI 429 with the type only, in the message",
			f:    failure{status: 429, message: "You exceeded your current quota, please check your plan and billing details."},
			want: protocol.CodeQuotaExhausted},
		{name: "OpenAI insufficient_quota in a stream",
			f:    failure{status: errorTypeStatus("insufficient_quota"), inStream: true, apiCode: "insufficient_quota", message: "quota"},
			want: protocol.CodeQuotaExhausted},
		{name: "OpenAI 429 rate limit is not quota",
			f:    failure{status: 429, apiCode: "rate_limit_exceeded", message: "Rate limit reached for gpt-4o on tokens per min (TPM)"},
			want: protocol.CodeRateLimited},
		{name: "OpenRouter HTTP 402",
			f:    failure{status: 402, apiCode: "402", message: "Insufficient credits. Add more using https://openrouter.ai/credits (402)"},
			want: protocol.CodeQuotaExhausted},
		{name: "OpenRouter code 402 in a stream",
			f:    failure{status: errorTypeStatus("402"), inStream: true, apiCode: "402", message: "Insufficient credits"},
			want: protocol.CodeQuotaExhausted},
		{name: "OpenRouter payment_required in a stream",
			f:    failure{status: errorTypeStatus("payment_required"), inStream: true, message: "Insufficient credits"},
			want: protocol.CodeQuotaExhausted},
		{name: "Anthropic billing_error event",
			f:    failure{status: errorTypeStatus("billing_error"), inStream: true, apiCode: "billing_error", message: "billing (billing_error)"},
			want: protocol.CodeQuotaExhausted},
		{name: "Anthropic credit balance too low",
			f: failure{status: 400, apiCode: "invalid_request_error",
				message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits. (invalid_request_error)"},
			want: protocol.CodeQuotaExhausted},
		{name: "Anthropic other 400",
			f:    failure{status: 400, apiCode: "invalid_request_error", message: "messages.0.content.1: unexpected `tool_use_id`"},
			want: protocol.CodeProviderRequest},
		{name: "not sent is never quota",
			f:    failure{notSent: true, status: 0, message: "exceeded your current quota"},
			want: protocol.CodeProviderRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.provider = "acme"
			got := classify(tt.f)
			if got.Code != tt.want {
				t.Fatalf("classify(%+v) = %s, want %s", tt.f, got.Code, tt.want)
			}
			if tt.want != protocol.CodeQuotaExhausted {
				return
			}
			if got.Retryable() {
				t.Errorf("classify(%+v).Retryable() = true, want false", tt.f)
			}
			if !strings.Contains(got.Hint, "credit") || !strings.Contains(got.Hint, "resume") {
				t.Errorf("classify(%+v).Hint = %q, want it to say to add credit and resume", tt.f, got.Hint)
			}
			if !strings.Contains(got.Message, "acme") {
				t.Errorf("classify(%+v).Message = %q, want it to name the provider", tt.f, got.Message)
			}
		})
	}
}

func TestClassifyShouldRetry(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name   string
		status int
		header string // x-should-retry; "" for none
		want   *bool
		retry  bool // Retryable()
	}{
		{name: "none on a 429", status: 429, want: nil, retry: true},
		{name: "false on a 429", status: 429, header: "false", want: &no, retry: false},
		{name: "true on a 400", status: 400, header: "true", want: &yes, retry: true},
		{name: "false on a 500", status: 500, header: "false", want: &no, retry: false},
		{name: "true on a 529", status: 529, header: "true", want: &yes, retry: true},
		{name: "case and space", status: 400, header: " TRUE ", want: &yes, retry: true},
		{name: "garbage is none", status: 400, header: "maybe", want: nil, retry: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("x-should-retry", tt.header)
			}
			e := classify(failure{provider: "p", status: tt.status, header: h, message: "m"})
			switch {
			case (e.Retry == nil) != (tt.want == nil):
				t.Errorf("classify(%d, x-should-retry %q).Retry = %v, want %v", tt.status, tt.header, e.Retry, tt.want)
			case e.Retry != nil && *e.Retry != *tt.want:
				t.Errorf("classify(%d, x-should-retry %q).Retry = %v, want %v", tt.status, tt.header, *e.Retry, *tt.want)
			}
			if got := e.Retryable(); got != tt.retry {
				t.Errorf("classify(%d, x-should-retry %q).Retryable() = %v, want %v", tt.status, tt.header, got, tt.retry)
			}
		})
	}
}

func TestResetDurationMS(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{in: "1s", want: 1000, ok: true},
		{in: "6m0s", want: 360000, ok: true},
		{in: "20ms", want: 20, ok: true},
		{in: "1m30.5s", want: 90500, ok: true},
		{in: "0.5s", want: 500, ok: true},
		{in: "2h0m0s", want: 7200000, ok: true},
		{in: "1h2m3.5s", want: 3723500, ok: true},
		{in: "120ms", want: 120, ok: true},
		{in: "1.5ms", want: 2, ok: true},
		{in: "900us", want: 1, ok: true},
		{in: "900µs", want: 1, ok: true},
		{in: "0.5d", want: 43200000, ok: true},
		{in: "1d2h", want: maxRetryAfterMS, ok: true},
		{in: "12", want: 12000, ok: true},
		{in: "0", want: 0, ok: true},
		{in: "3d", want: maxRetryAfterMS, ok: true},
		{in: "", ok: false},
		{in: "-1s", ok: false},
		{in: "1x", ok: false},
		{in: "s", ok: false},
		{in: "1s2", ok: false},
		{in: "1..2s", ok: false},
		{in: "soon", ok: false},
		{in: "NaN", ok: false},
	}
	for _, tt := range tests {
		got, ok := resetDurationMS(tt.in)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("resetDurationMS(%q) = %d, %v, want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRateLimitResetMS(t *testing.T) {
	now := time.Date(2026, 2, 25, 20, 2, 30, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   int64
	}{
		{name: "none", want: 0},
		{name: "OpenAI largest reset when nothing is spent",
			header: map[string]string{"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
				"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984"},
			want: 360000},
		{name: "OpenAI the spent limit wins over a longer one",
			header: map[string]string{"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "6m0s",
				"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "12"},
			want: 20},
		{name: "OpenAI resets without remaining headers",
			header: map[string]string{"x-ratelimit-reset-requests": "1m30.5s", "x-ratelimit-reset-tokens": "0.5s"},
			want:   90500},
		{name: "OpenAI bad reset ignored",
			header: map[string]string{"x-ratelimit-reset-requests": "soon", "x-ratelimit-reset-tokens": "8ms"},
			want:   8},
		{name: "Anthropic spent tokens limit",
			header: map[string]string{
				"anthropic-ratelimit-requests-remaining": "49", "anthropic-ratelimit-requests-reset": "2026-02-25T20:02:32Z",
				"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2026-02-25T20:02:36Z",
				"anthropic-ratelimit-input-tokens-remaining": "28000", "anthropic-ratelimit-input-tokens-reset": "2026-02-25T20:02:37Z",
			},
			want: 6000},
		{name: "Anthropic largest reset when nothing is spent",
			header: map[string]string{
				"anthropic-ratelimit-requests-remaining": "49", "anthropic-ratelimit-requests-reset": "2026-02-25T20:02:32Z",
				"anthropic-ratelimit-input-tokens-remaining": "28000", "anthropic-ratelimit-input-tokens-reset": "2026-02-25T20:02:37Z",
				"anthropic-ratelimit-output-tokens-remaining": "8000", "anthropic-ratelimit-output-tokens-reset": "2026-02-25T20:02:36Z",
			},
			want: 7000},
		{name: "Anthropic two spent limits take the later",
			header: map[string]string{
				"anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": "2026-02-25T20:02:37Z",
				"anthropic-ratelimit-output-tokens-remaining": "0", "anthropic-ratelimit-output-tokens-reset": "2026-02-25T20:03:30Z",
				"anthropic-ratelimit-requests-remaining": "3", "anthropic-ratelimit-requests-reset": "2026-02-25T21:00:00Z",
			},
			want: 60000},
		{name: "Anthropic fractional seconds",
			header: map[string]string{"anthropic-ratelimit-tokens-reset": "2026-02-25T20:02:30.25Z"},
			want:   250},
		{name: "Anthropic reset already past",
			header: map[string]string{"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2026-02-25T20:02:00Z"},
			want:   0},
		{name: "Anthropic reset not RFC 3339",
			header: map[string]string{"anthropic-ratelimit-tokens-reset": "Wed, 25 Feb 2026 20:03:00 GMT"},
			want:   0},
		{name: "capped at a day",
			header: map[string]string{"anthropic-ratelimit-requests-reset": "2026-03-05T00:00:00Z"},
			want:   maxRetryAfterMS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := rateLimitResetMS(h, now); got != tt.want {
				t.Errorf("rateLimitResetMS(%v) = %d, want %d", tt.header, got, tt.want)
			}
		})
	}
}

func TestClassifyRateLimitReset(t *testing.T) {
	now := time.Date(2026, 2, 25, 20, 2, 30, 0, time.UTC)
	reset := http.Header{"X-Ratelimit-Reset-Requests": {"1s"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}}
	tests := []struct {
		name   string
		f      failure
		header http.Header
		want   int64
	}{
		{name: "429 without Retry-After takes the reset", f: failure{status: 429}, header: reset, want: 360000},
		{name: "Retry-After wins over the reset", f: failure{status: 429},
			header: http.Header{"Retry-After": {"2"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}}, want: 2000},
		{name: "Retry-After-Ms wins over the reset", f: failure{status: 429},
			header: http.Header{"Retry-After-Ms": {"250"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}}, want: 250},
		{name: "in-stream rate limit takes the reset", f: failure{status: errorTypeStatus("rate_limit_error"), inStream: true},
			header: http.Header{"Anthropic-Ratelimit-Tokens-Remaining": {"0"}, "Anthropic-Ratelimit-Tokens-Reset": {"2026-02-25T20:02:36Z"}},
			want:   6000},
		{name: "a 500 does not read the reset", f: failure{status: 500}, header: reset, want: 0},
		{name: "quota exhausted does not read the reset", f: failure{status: 429, apiCode: "insufficient_quota"}, header: reset, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.provider, tt.f.header, tt.f.now = "p", tt.header, now
			if got := classify(tt.f).RetryAfterMS; got != tt.want {
				t.Errorf("classify(%+v).RetryAfterMS = %d, want %d", tt.f, got, tt.want)
			}
		})
	}
}
