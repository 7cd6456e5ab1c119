package provider

import (
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Defaults of RetryPolicy, as io-harness 0.17 has them.
const (
	// DefaultRetryBase is the wait before the first retry.
	DefaultRetryBase = 500 * time.Millisecond
	// DefaultRetryMax caps the doubled wait.
	DefaultRetryMax = 30 * time.Second
	// DefaultRetryMaxRetries is how many retries one call gets.
	DefaultRetryMaxRetries = 2
)

// maxBackoffShift caps the exponent of the back-off, so a large attempt
// number cannot overflow: Base·2^16 is past any sensible Max.
const maxBackoffShift = 16

// RetryPolicy decides whether, and after how long, a failed provider call
// is tried again. It is a value with no clock and no I/O: the caller says
// what time it is and acts on the answer (sleeps, or redelivers a task
// with a delay, or escalates). The zero value is the defaults.
type RetryPolicy struct {
	// Base is the wait before the first retry when the provider asked
	// for none; each later retry waits twice as long as the one before.
	// Default DefaultRetryBase, 500ms.
	Base time.Duration
	// Max caps the doubled wait. It does not cap a wait the provider asked
	// for with Retry-After. Default DefaultRetryMax, 30s.
	Max time.Duration
	// MaxRetries is how many times one call is retried after its first
	// failure. Default DefaultRetryMaxRetries, 2; negative for none.
	MaxRetries int
}

// Validate checks the policy. It returns a *protocol.Error with
// CodeInvalidField naming Base or Max when either is negative.
func (p RetryPolicy) Validate() error {
	if p.Base < 0 {
		return protocol.FieldError(protocol.CodeInvalidField, "Base",
			"use a positive duration, or zero for 500ms", "retry base is negative")
	}
	if p.Max < 0 {
		return protocol.FieldError(protocol.CodeInvalidField, "Max",
			"use a positive duration, or zero for 30s", "retry max is negative")
	}
	return nil
}

// Next decides about the call that just failed with err, the attempt-th
// failure of that call (1 after the first try failed). now is the current
// time and deadline when the run's time budget runs out (zero for none).
//
// It returns retry false, and wait 0, when err is nil, when err's code is
// not retryable (an auth or request error, context overflow, an
// unrecorded request), or when the call has already been retried
// MaxRetries times (attempt > MaxRetries). Otherwise the wait is
// err.RetryAfterMS when the provider asked for one, as it asked even when
// above Max, and else min(Base·2^(attempt−1), Max). A wait that would not
// end before the deadline is not taken: Next returns that wait with retry
// false at once, so the caller escalates now instead of sleeping into the
// end of its budget.
//
// Negative Base or Max (see Validate) count as their defaults; an attempt
// below 1 counts as 1.
func (p RetryPolicy) Next(attempt int, err *protocol.Error, now time.Time, deadline time.Time) (wait time.Duration, retry bool) {
	if err == nil || !err.Retryable() {
		return 0, false
	}
	attempt = max(attempt, 1)
	maxRetries := p.MaxRetries
	if maxRetries == 0 {
		maxRetries = DefaultRetryMaxRetries
	}
	if attempt > maxRetries {
		return 0, false
	}
	if err.RetryAfterMS > 0 {
		wait = time.Duration(err.RetryAfterMS) * time.Millisecond
	} else {
		wait = p.backoff(attempt)
	}
	if !deadline.IsZero() && !now.Add(wait).Before(deadline) {
		return wait, false
	}
	return wait, true
}

// backoff is min(Base·2^(attempt−1), Max) for attempt ≥ 1.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	base, ceiling := p.Base, p.Max
	if base <= 0 {
		base = DefaultRetryBase
	}
	if ceiling <= 0 {
		ceiling = DefaultRetryMax
	}
	shift := min(attempt-1, maxBackoffShift)
	if base > ceiling>>shift {
		return ceiling
	}
	return base << shift
}
