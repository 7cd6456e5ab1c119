package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// waitsOf returns a sleep that waits for nothing and records what it was
// asked to wait, and the record.
func waitsOf() (func(context.Context, time.Duration) error, *[]time.Duration) {
	var waits []time.Duration
	return func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}, &waits
}

// failing is a try that fails n times with errDown, then succeeds; calls
// counts its calls.
func failing(n int, calls *int) func() error {
	return func() error {
		*calls++
		if *calls <= n {
			return errDown
		}
		return nil
	}
}

var errDown = errors.New("down")

const ms = time.Millisecond

// TestRetrySchedules runs each call site's schedule against a try that
// keeps failing, on a clock that only records the waits.
func TestRetrySchedules(t *testing.T) {
	tests := []struct {
		name  string
		b     backoff
		fails int
		want  []time.Duration
		err   error
		calls int
	}{
		{"persist doubles to 5 s", persistBackoff, 9,
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms, 5000 * ms}, nil, 10},
		{"the ledger doubles from 250 ms to 5 s", ledgerBackoff, 7,
			[]time.Duration{250 * ms, 500 * ms, 1000 * ms, 2000 * ms, 4000 * ms, 5000 * ms, 5000 * ms}, nil, 8},
		// Six lookups, each failure waited out, the last's too.
		{"a turn lookup gives up after six", lookupBackoff, 100,
			[]time.Duration{250 * ms, 500 * ms, 1000 * ms, 2000 * ms, 4000 * ms, 8000 * ms}, errDown, 6},
		{"a turn lookup that succeeds last waits no more", lookupBackoff, 5,
			[]time.Duration{250 * ms, 500 * ms, 1000 * ms, 2000 * ms, 4000 * ms}, nil, 6},
		{"open asks again every 250 ms", openBackoff, 3, []time.Duration{250 * ms, 250 * ms, 250 * ms}, nil, 4},
		{"request sends again every 250 ms", requestBackoff, 2, []time.Duration{250 * ms, 250 * ms}, nil, 3},
		{"a step task is published again every second", publishBackoff, 3, []time.Duration{time.Second, time.Second, time.Second}, nil, 4},
		{"success first waits for nothing", persistBackoff, 0, nil, nil, 1},
	}
	for _, tt := range tests {
		b := tt.b
		var waits *[]time.Duration
		b.sleep, waits = waitsOf()
		calls := 0
		err := retrying(t.Context(), b, failing(tt.fails, &calls))
		if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("%s: retry = %v, want %v", tt.name, err, tt.err)
		}
		if calls != tt.calls {
			t.Errorf("%s: %d tries, want %d", tt.name, calls, tt.calls)
		}
		if diff := cmp.Diff(tt.want, *waits); diff != "" {
			t.Errorf("%s: waits (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestRetryAnswers covers what a try can answer: done ends the retry with
// its error (nil too) at once; again tries again after its own wait, or at
// once, without advancing the schedule or counting against its waits.
func TestRetryAnswers(t *testing.T) {
	errFinal := errors.New("final")
	tests := []struct {
		name    string
		b       backoff
		answers []error // one per try; the retry must end with the last
		want    error
		waits   []time.Duration
	}{
		{"done with an error", persistBackoff, []error{errDown, done(errFinal)}, errFinal, []time.Duration{100 * ms}},
		{"done with nil", persistBackoff, []error{errDown, errDown, done(nil)}, nil, []time.Duration{100 * ms, 200 * ms}},
		{"again at once", persistBackoff, []error{again(0), errDown, again(0), errDown, nil}, nil, []time.Duration{100 * ms, 200 * ms}},
		{"again after its own wait", publishBackoff, []error{again(3 * time.Second), errDown, again(ms), nil}, nil,
			[]time.Duration{3 * time.Second, time.Second, ms}},
		{"again does not count against the waits", backoff{wait: ms, waits: 1}, []error{again(0), again(0), errDown}, errDown, []time.Duration{ms}},
	}
	for _, tt := range tests {
		b := tt.b
		var waits *[]time.Duration
		b.sleep, waits = waitsOf()
		n := 0
		err := retrying(t.Context(), b, func() error {
			if n == len(tt.answers) {
				t.Fatalf("%s: tried again after the last answer", tt.name)
			}
			n++
			return tt.answers[n-1]
		})
		if err != tt.want {
			t.Errorf("%s: retry = %v, want %v", tt.name, err, tt.want)
		}
		if n != len(tt.answers) {
			t.Errorf("%s: %d tries, want %d", tt.name, n, len(tt.answers))
		}
		if diff := cmp.Diff(tt.waits, *waits); diff != "" {
			t.Errorf("%s: waits (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestRetryEndsWithContext: a context that ends stops the retry with its
// error, whether it ends during a try (no wait, no other try, at once or
// not) or during a wait.
func TestRetryEndsWithContext(t *testing.T) {
	for _, answer := range []error{errDown, again(0), again(time.Hour)} {
		ctx, cancel := context.WithCancel(t.Context())
		b := persistBackoff
		var waits *[]time.Duration
		b.sleep, waits = waitsOf()
		n := 0
		err := retrying(ctx, b, func() error {
			if n++; n > 1 {
				return done(errors.New("tried again after the context ended"))
			}
			cancel()
			return answer
		})
		if !errors.Is(err, context.Canceled) || n != 1 || len(*waits) != 0 {
			t.Errorf("answer %v: retry = %v after %d tries and waits %v; want context.Canceled after one try, no wait", answer, err, n, *waits)
		}
	}

	// On the real clock: an hour's wait ends when the context does.
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan struct{})
	b := backoff{wait: time.Hour, sleep: func(ctx context.Context, d time.Duration) error {
		close(waiting)
		return sleep(ctx, d)
	}}
	done := make(chan error, 1)
	go func() { done <- retrying(ctx, b, func() error { return errDown }) }()
	<-waiting
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("retry = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("retry went on waiting after its context ended")
	}
}
