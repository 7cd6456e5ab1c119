package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/wire"
)

// silentStream is a turns stream whose lookups are never answered: the
// request or its answer was lost while the cluster elected a leader.
type silentStream struct{ jetstream.Stream }

func (silentStream) GetLastMsgForSubject(ctx context.Context, _ string) (*jetstream.RawStreamMsg, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestTurnLookupIsBounded looks up a turn under a context whose deadline is
// an hour away, as a run's is: the lookup gives up after jsTimeout rather
// than waiting for the run's deadline.
func TestTurnLookupIsBounded(t *testing.T) {
	defer func(old time.Duration) { jsTimeout = old }(jsTimeout)
	jsTimeout = 50 * time.Millisecond
	d := &driver{c: &Coordinator{assets: &wire.Assets{Turns: silentStream{}}}, s: &runState{run: "r1"}, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tr := d.turnOf(ctx, 1, 1); tr != nil {
			t.Errorf("turnOf = %+v from a stream that never answers", tr)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("turnOf waited on a lookup nobody answers: a lost answer would hold the run until its deadline")
	}
}
