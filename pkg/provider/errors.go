package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// failure is everything known about one provider call that did not produce
// a turn. A client fills in what it learned; classify decides the code.
type failure struct {
	provider string      // the provider's Name, for the message
	status   int         // HTTP status of the answer; 0 when none arrived
	header   http.Header // the answer's headers, for Retry-After
	apiCode  string      // the provider's own error code or type ("context_length_exceeded")
	message  string      // the provider's explanation, or the client's
	field    string      // the request field the client refused, if any
	notSent  bool        // the client refused the request before sending it
	bad      bool        // an answer arrived but could not be read as a completion
	inStream bool        // status was not sent as HTTP but read from an error event mid-stream
	err      error       // the underlying error, if any
	now      time.Time   // the time Retry-After dates are measured from; zero for time.Now
}

// maxMessage bounds the provider's text carried in an error message.
const maxMessage = 500

// classify is the one place that turns a failed provider call into a
// *protocol.Error. The HTTP status decides when there is an error status;
// otherwise the error decides: a deadline is a timeout, a cancellation or a
// lost connection is a transport failure, a request the client would not
// send is a request error, and an unreadable answer is malformed.
//
// An account with no quota or credit left is CodeQuotaExhausted whatever
// status it came with (see quotaExhausted): waiting does not help, so it
// is not retried. RetryAfterMS is set whenever the answer carried
// Retry-After or Retry-After-Ms; a rate limit without either takes the
// reset time of its rate-limit headers (see rateLimitResetMS). Retry is
// set when the answer carried x-should-retry, the server's own verdict.
func classify(f failure) *protocol.Error {
	name := f.provider
	if name == "" {
		name = "provider"
	}
	detail := f.message
	if detail == "" && f.err != nil {
		detail = f.err.Error()
	}
	detail = truncate(detail, maxMessage)

	// where says how the provider said what it said: an HTTP status, or
	// an error event in a stream that had begun with 200.
	where := fmt.Sprintf("HTTP %d", f.status)
	if f.inStream {
		where = "error event mid-stream"
	}

	var e *protocol.Error
	switch s := f.status; {
	case quotaExhausted(f):
		e = protocol.FieldError(protocol.CodeQuotaExhausted, "",
			"the provider account has no quota or credit left: add credit or raise the limit at the provider, then resume the run",
			"%s: the account's quota or credit is used up (%s): %s", name, where, detail)
	case s == 0 || s >= 200 && s < 300:
		switch {
		case isTimeout(f.err):
			e = protocol.FieldError(protocol.CodeProviderTimeout, "",
				"try again, or give the provider a longer timeout",
				"%s did not answer in time: %s", name, detail)
		case errors.Is(f.err, context.Canceled):
			e = protocol.FieldError(protocol.CodeProviderTransport, "",
				"the caller cancelled the call; nothing to fix here",
				"%s call cancelled: %s", name, detail)
		case f.notSent:
			e = protocol.FieldError(protocol.CodeProviderRequest, "",
				"change the request or the model; it was never sent",
				"%s client refused the request: %s", name, detail)
		case f.bad:
			e = protocol.FieldError(protocol.CodeProviderMalformed, "",
				"check that the base URL points at the provider's API, then try again",
				"%s answered HTTP %d with no usable completion: %s", name, s, detail)
		default:
			e = protocol.FieldError(protocol.CodeProviderTransport, "",
				"check the worker's network access to the provider, then try again",
				"the connection to %s failed: %s", name, detail)
		}
	case s == http.StatusTooManyRequests:
		e = protocol.FieldError(protocol.CodeRateLimited, "",
			"wait for retry_after_ms, or lower the request rate",
			"%s rate limited the call (%s): %s", name, where, detail)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e = protocol.FieldError(protocol.CodeProviderAuth, "",
			"check the API key the worker uses and that it may use this model",
			"%s refused the credentials (%s): %s", name, where, detail)
	case s >= 500:
		e = protocol.FieldError(protocol.CodeProviderServer, "",
			"the provider failed; try again later or fall back to another provider",
			"%s failed (%s): %s", name, where, detail)
	case s == http.StatusBadRequest && contextOverflow(f.apiCode, f.message):
		e = protocol.FieldError(protocol.CodeContextOverflow, "",
			"shorten the transcript (compact it) or use a model with a larger context window",
			"%s: the request is longer than the model's context window (%s): %s", name, where, detail)
	default:
		e = protocol.FieldError(protocol.CodeProviderRequest, "",
			"the provider refused the request as written; read its message",
			"%s refused the request (%s): %s", name, where, detail)
	}
	e.Field = f.field
	now := f.now
	if now.IsZero() {
		now = time.Now()
	}
	e.RetryAfterMS = retryAfterMS(f.header, now)
	if e.RetryAfterMS == 0 && e.Code == protocol.CodeRateLimited {
		e.RetryAfterMS = rateLimitResetMS(f.header, now)
	}
	e.Retry = shouldRetry(f.header)
	return e
}

// quotaExhausted reports whether a failure says the account has no quota
// or credit left, rather than that it is going too fast: HTTP 402, or an
// error code meaning it (OpenRouter's insufficient credits, Anthropic's
// billing_error, said in a stream as code 402); OpenAI's 429 whose code or
// message says insufficient_quota; and Anthropic's 400 saying the credit
// balance is too low.
func quotaExhausted(f failure) bool {
	if f.notSent {
		return false
	}
	m := strings.ToLower(f.message)
	switch {
	case f.status == http.StatusPaymentRequired:
		return true
	case f.apiCode == "insufficient_quota":
		return true
	case f.status == http.StatusTooManyRequests:
		return strings.Contains(m, "insufficient_quota") || strings.Contains(m, "exceeded your current quota")
	case f.status == http.StatusBadRequest:
		return strings.Contains(m, "credit balance is too low")
	}
	return false
}

// shouldRetry returns the server's x-should-retry verdict ("true" or
// "false"), or nil when it gave none. The OpenAI and Anthropic SDKs obey
// it over their own rules, and so does (*protocol.Error).Retryable.
func shouldRetry(h http.Header) *bool {
	if h == nil {
		return nil
	}
	var v bool
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry"))) {
	case "true":
		v = true
	case "false":
		v = false
	default:
		return nil
	}
	return &v
}

// rateLimits pairs each rate-limit reset header with the header that says
// how much of that limit is left. OpenAI's resets are durations ("6m0s"),
// Anthropic's RFC 3339 times.
var rateLimits = []struct {
	remaining, reset string
	date             bool
}{
	{remaining: "X-Ratelimit-Remaining-Requests", reset: "X-Ratelimit-Reset-Requests"},
	{remaining: "X-Ratelimit-Remaining-Tokens", reset: "X-Ratelimit-Reset-Tokens"},
	{remaining: "Anthropic-Ratelimit-Requests-Remaining", reset: "Anthropic-Ratelimit-Requests-Reset", date: true},
	{remaining: "Anthropic-Ratelimit-Tokens-Remaining", reset: "Anthropic-Ratelimit-Tokens-Reset", date: true},
	{remaining: "Anthropic-Ratelimit-Input-Tokens-Remaining", reset: "Anthropic-Ratelimit-Input-Tokens-Reset", date: true},
	{remaining: "Anthropic-Ratelimit-Output-Tokens-Remaining", reset: "Anthropic-Ratelimit-Output-Tokens-Reset", date: true},
}

// rateLimitResetMS returns, in milliseconds, how long until the limit that
// stopped a call resets, from the rate-limit headers of its answer: the
// reset of a limit with nothing remaining when there is one (the largest,
// if several are spent), else the largest reset given; 0 when the headers
// give none. Anthropic's reset times are measured from now; one already
// past, or a value that does not parse, counts as absent. A wait is capped
// at a day, as retryAfterMS caps it.
func rateLimitResetMS(h http.Header, now time.Time) int64 {
	if h == nil {
		return 0
	}
	var spent, largest int64
	for _, l := range rateLimits {
		v := strings.TrimSpace(h.Get(l.reset))
		if v == "" {
			continue
		}
		var ms int64
		if l.date {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				continue
			}
			d := t.Sub(now)
			if d <= 0 {
				continue
			}
			ms = int64((d + time.Millisecond - 1) / time.Millisecond)
		} else {
			var ok bool
			if ms, ok = resetDurationMS(v); !ok {
				continue
			}
		}
		if ms <= 0 {
			continue
		}
		ms = min(ms, maxRetryAfterMS)
		largest = max(largest, ms)
		if left, err := strconv.ParseFloat(strings.TrimSpace(h.Get(l.remaining)), 64); err == nil && left <= 0 {
			spent = max(spent, ms)
		}
	}
	if spent > 0 {
		return spent
	}
	return largest
}

// durationUnits are the units a reset duration may use, in milliseconds.
var durationUnits = map[string]float64{
	"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "ms": 1,
	"s": 1e3, "m": 60e3, "h": 3600e3, "d": 86400e3,
}

// resetDurationMS parses a rate-limit reset duration as OpenAI writes it
// ("1s", "6m0s", "20ms", "1m30.5s", "0.5s", "2h0m0s") into milliseconds,
// rounded up. It takes Go's duration syntax, which OpenAI's follows, and
// also a day unit ("1d2h") and a bare number of seconds ("12"), which
// OpenAI-compatible servers send. A sign, an unknown unit or anything else
// is not a reset: ok is false.
func resetDurationMS(s string) (ms int64, ok bool) {
	if s == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, false
		}
		return ceilMS(secs * 1000), true
	}
	total := 0.0
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 {
			return 0, false
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, false
		}
		s = s[i:]
		j := 0
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		unit, found := durationUnits[s[:j]]
		if !found {
			return 0, false
		}
		s = s[j:]
		total += n * unit
	}
	return ceilMS(total), true
}

// ceilMS rounds a wait in milliseconds up to a whole millisecond, capped
// at a day.
func ceilMS(ms float64) int64 {
	if ms >= float64(maxRetryAfterMS) {
		return maxRetryAfterMS
	}
	return int64(math.Ceil(ms))
}

// isTimeout reports whether err is a deadline: the context's, the HTTP
// client's, or the network's.
func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// overflowPhrases are the ways servers say the prompt is longer than the
// context window (OpenAI, vLLM, llama.cpp, Anthropic).
var overflowPhrases = []string{
	"context length",
	"context_length",
	"context window",
	"context limit",
	"maximum context",
	"prompt is too long",
	"exceeds the available context",
}

// errorTypeStatus returns the HTTP status a vendor's error type or code
// stands for, so an error reported inside a stream that began with 200 is
// classified as the same error sent as a status would be. It knows
// Anthropic's error types, OpenAI's, OpenRouter's payment_required, and a
// numeric code in the 4xx and 5xx ranges (OpenRouter); anything else is a
// server failure (500): the provider gave up mid-answer.
func errorTypeStatus(typ string) int {
	switch typ {
	case "invalid_request_error", "context_length_exceeded":
		return http.StatusBadRequest
	case "authentication_error", "invalid_api_key":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error", "model_not_found":
		return http.StatusNotFound
	case "billing_error", "payment_required":
		return http.StatusPaymentRequired
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error", "rate_limit_exceeded", "requests", "tokens", "insufficient_quota":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	}
	if n, err := strconv.Atoi(typ); err == nil && n >= 400 && n < 600 {
		return n
	}
	return http.StatusInternalServerError
}

// contextOverflow reports whether a 400's error code or message says the
// context length was exceeded.
func contextOverflow(apiCode, message string) bool {
	if apiCode == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(message)
	for _, p := range overflowPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// maxRetryAfterMS caps a requested wait at a day; a server asking for more
// is treated as asking for a day.
const maxRetryAfterMS = int64(24 * time.Hour / time.Millisecond)

// retryAfterMS returns the wait an answer asked for, in milliseconds, or 0
// when it asked for none. It reads Retry-After-Ms (OpenAI's own header,
// milliseconds) first, then Retry-After as delta-seconds or as an HTTP date
// measured from now. A value that does not parse, or a date already past,
// counts as absent.
func retryAfterMS(h http.Header, now time.Time) int64 {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return min(int64(math.Ceil(ms)), maxRetryAfterMS)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || math.IsNaN(secs) {
			return 0
		}
		ms := math.Ceil(secs * 1000)
		if ms > float64(maxRetryAfterMS) {
			return maxRetryAfterMS
		}
		return int64(ms)
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d <= 0 {
			return 0
		}
		return min(int64((d+time.Millisecond-1)/time.Millisecond), maxRetryAfterMS)
	}
	return 0
}

// truncate returns s cut to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "..."
		}
		i++
	}
	return s
}
