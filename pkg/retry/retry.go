// Package retry decides whether, and after how long, a failed provider
// call is tried again: a value with no clock and no I/O, shared by the
// worker, which retries its own calls, and the coordinator, which retries
// a turn whose worker reported a retryable failure. It imports nothing
// but the protocol, so the coordinator, which never holds a provider key,
// links no provider SDK for it.
package retry

import (
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Defaults of Policy, as io-harness 0.17 has them.
const (
	// DefaultBase is the wait before the first retry.
	DefaultBase = 500 * time.Millisecond
	// DefaultMax caps the doubled wait.
	DefaultMax = 30 * time.Second
	// DefaultMaxRetries is how many retries one call gets.
	DefaultMaxRetries = 2
)

// maxBackoffShift caps the exponent of the back-off, so a large attempt
// number cannot overflow: Base·2^16 is past any sensible Max.
const maxBackoffShift = 16

// Policy decides whether, and after how long, a failed provider call
// is tried again. It is a value with no clock and no I/O: the caller says
// what time it is and acts on the answer (sleeps, or redelivers a task
// with a delay, or escalates). The zero value is the defaults.
type Policy struct {
	// Base is the wait before the first retry when the provider asked
	// for none; each later retry waits twice as long as the one before.
	// Default DefaultBase, 500ms.
	Base time.Duration
	// Max caps the doubled wait. It does not cap a wait the provider asked
	// for with Retry-After. Default DefaultMax, 30s.
	Max time.Duration
	// MaxRetries is how many times one call is retried after its first
	// failure. Default DefaultMaxRetries, 2; negative for none.
	MaxRetries int
}

// Validate checks the policy. It returns a *protocol.Error with
// CodeInvalidField naming Base or Max when either is negative.
func (p Policy) Validate() error {
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
func (p Policy) Next(attempt int, err *protocol.Error, now time.Time, deadline time.Time) (wait time.Duration, retry bool) {
	if err == nil || !err.Retryable() {
		return 0, false
	}
	attempt = max(attempt, 1)
	maxRetries := p.MaxRetries
	if maxRetries == 0 {
		maxRetries = DefaultMaxRetries
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
func (p Policy) backoff(attempt int) time.Duration {
	base, ceiling := p.Base, p.Max
	if base <= 0 {
		base = DefaultBase
	}
	if ceiling <= 0 {
		ceiling = DefaultMax
	}
	shift := min(attempt-1, maxBackoffShift)
	if base > ceiling>>shift {
		return ceiling
	}
	return base << shift
}
