package streams_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
)

// TestGather asks a subject three responders answer: Gather hands over
// every answer, ends once none has come for its gap, and ends at once
// when the callback has enough.
func TestGather(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	for _, id := range []string{"a", "b", "c"} {
		if _, err := nc.Subscribe("svc.info", func(m *nats.Msg) { _ = m.Respond([]byte(id)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	if err := streams.Gather(t.Context(), nc, "svc.info", 500*time.Millisecond, func(m *nats.Msg) bool {
		seen[string(m.Data)] = true
		return false
	}); err != nil || len(seen) != 3 {
		t.Fatalf("Gather = %v with answers %v, want a, b and c", err, seen)
	}
	n := 0
	if err := streams.Gather(t.Context(), nc, "svc.info", time.Minute, func(*nats.Msg) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("Gather that has enough at the first answer took %d answers, %v", n, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := streams.Gather(ctx, nc, "nobody.listens", time.Minute, func(*nats.Msg) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("Gather on an ended context = %v, want its error", err)
	}
}
