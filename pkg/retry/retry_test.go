package retry

import (
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestPolicyNext(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	server := protocol.Errorf(protocol.CodeProviderServer, "down")
	limited := func(ms int64) *protocol.Error {
		e := protocol.Errorf(protocol.CodeRateLimited, "slow down")
		e.RetryAfterMS = ms
		return e
	}
	tests := []struct {
		name      string
		policy    Policy
		attempt   int
		err       *protocol.Error
		deadline  time.Time
		wantWait  time.Duration
		wantRetry bool
	}{
		{name: "first retry waits Base", attempt: 1, err: server, wantWait: 500 * time.Millisecond, wantRetry: true},
		{name: "second retry doubles", attempt: 2, err: server, wantWait: time.Second, wantRetry: true},
		{name: "past MaxRetries", attempt: 3, err: server},
		{name: "attempt 0 counts as 1", attempt: 0, err: server, wantWait: 500 * time.Millisecond, wantRetry: true},
		{name: "back-off capped at Max", policy: Policy{Base: time.Second, Max: 5 * time.Second, MaxRetries: 10},
			attempt: 4, err: server, wantWait: 5 * time.Second, wantRetry: true},
		{name: "huge attempt does not overflow", policy: Policy{MaxRetries: 1000},
			attempt: 900, err: server, wantWait: 30 * time.Second, wantRetry: true},
		{name: "custom base", policy: Policy{Base: 100 * time.Millisecond}, attempt: 2, err: server,
			wantWait: 200 * time.Millisecond, wantRetry: true},
		{name: "Retry-After honoured", attempt: 1, err: limited(7000), wantWait: 7 * time.Second, wantRetry: true},
		{name: "Retry-After above Max honoured as is", attempt: 1, err: limited(90_000), wantWait: 90 * time.Second, wantRetry: true},
		{name: "rate limit without Retry-After backs off", attempt: 2, err: limited(0), wantWait: time.Second, wantRetry: true},
		{name: "negative MaxRetries: none", policy: Policy{MaxRetries: -1}, attempt: 1, err: server},
		{name: "auth is not retried", attempt: 1, err: protocol.Errorf(protocol.CodeProviderAuth, "bad key")},
		{name: "request is not retried", attempt: 1, err: protocol.Errorf(protocol.CodeProviderRequest, "bad role")},
		{name: "context overflow is not retried", attempt: 1, err: protocol.Errorf(protocol.CodeContextOverflow, "too long")},
		{name: "unrecorded is not retried", attempt: 1, err: protocol.Errorf(protocol.CodeUnrecorded, "no")},
		{name: "nil error", attempt: 1},
		{name: "timeout is retried", attempt: 1, err: protocol.Errorf(protocol.CodeProviderTimeout, "slow"),
			wantWait: 500 * time.Millisecond, wantRetry: true},
		{name: "malformed is retried", attempt: 1, err: protocol.Errorf(protocol.CodeProviderMalformed, "junk"),
			wantWait: 500 * time.Millisecond, wantRetry: true},
		{name: "wait ends before the deadline", attempt: 1, err: limited(7000),
			deadline: now.Add(8 * time.Second), wantWait: 7 * time.Second, wantRetry: true},
		{name: "wait would outlast the deadline: escalate now", attempt: 1, err: limited(7000),
			deadline: now.Add(6 * time.Second), wantWait: 7 * time.Second},
		{name: "wait ending at the deadline leaves no time", attempt: 1, err: limited(7000),
			deadline: now.Add(7 * time.Second), wantWait: 7 * time.Second},
		{name: "back-off past the deadline", attempt: 2, err: server,
			deadline: now.Add(999 * time.Millisecond), wantWait: time.Second},
		{name: "deadline already past", attempt: 1, err: server,
			deadline: now.Add(-time.Second), wantWait: 500 * time.Millisecond},
		{name: "negative durations count as defaults", policy: Policy{Base: -1, Max: -1}, attempt: 1, err: server,
			wantWait: 500 * time.Millisecond, wantRetry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, retry := tt.policy.Next(tt.attempt, tt.err, now, tt.deadline)
			if wait != tt.wantWait || retry != tt.wantRetry {
				t.Errorf("%+v.Next(%d, %v, now, %v) = %v, %v; want %v, %v",
					tt.policy, tt.attempt, tt.err, tt.deadline, wait, retry, tt.wantWait, tt.wantRetry)
			}
		})
	}
}

// TestPolicySchedule walks a whole retry schedule with a clock that
// only the test moves: the waits double up to Max, and the run's deadline
// ends it early.
func TestPolicySchedule(t *testing.T) {
	p := Policy{Base: time.Second, Max: 4 * time.Second, MaxRetries: 6}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	deadline := start.Add(10 * time.Second)
	err := protocol.Errorf(protocol.CodeProviderTimeout, "slow")
	now := start
	var waits []time.Duration
	for attempt := 1; ; attempt++ {
		wait, retry := p.Next(attempt, err, now, deadline)
		if !retry {
			break
		}
		waits = append(waits, wait)
		now = now.Add(wait) // the wait, and a call that fails at once
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} // at 7s, a 4s wait would end past the deadline
	if len(waits) != len(want) {
		t.Fatalf("waits = %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("waits = %v, want %v", waits, want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		policy Policy
		field  string
	}{
		{policy: Policy{}},
		{policy: Policy{Base: time.Second, Max: time.Minute, MaxRetries: -1}},
		{policy: Policy{Base: -time.Second}, field: "Base"},
		{policy: Policy{Max: -time.Second}, field: "Max"},
	}
	for _, tt := range tests {
		err := tt.policy.Validate()
		if tt.field == "" {
			if err != nil {
				t.Errorf("%+v.Validate() = %v, want nil", tt.policy, err)
			}
			continue
		}
		if pe := protocol.AsError(err); pe == nil || pe.Code != protocol.CodeInvalidField || pe.Field != tt.field {
			t.Errorf("%+v.Validate() = %v, want CodeInvalidField on %s", tt.policy, err, tt.field)
		}
	}
}
