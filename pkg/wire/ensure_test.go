package wire_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/wire"
)

// TestEnsureLeavesUnchangedStreamsAlone ensures the streams twice and
// watches the JetStream API: the second time nothing is created or
// updated. Every role ensures the streams at every start; an update each
// time raced with consumers being created inside the server (a data race
// in its file store) and is needless work besides.
func TestEnsureLeavesUnchangedStreamsAlone(t *testing.T) {
	srv := testkit.NATS(t)
	nc := testkit.Conn(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Ensure(t.Context(), js, wire.Config{}); err != nil {
		t.Fatal(err)
	}

	watch := testkit.Conn(t, srv)
	calls, err := watch.SubscribeSync("$JS.API.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Ensure(t.Context(), js, wire.Config{}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for {
		m, err := calls.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		seen++
		switch s := m.Subject; {
		case strings.HasPrefix(s, "$JS.API.STREAM.UPDATE."), strings.HasPrefix(s, "$JS.API.STREAM.CREATE."):
			t.Errorf("the second Ensure sent %s: a stream that had not changed was written", s)
		}
	}
	if seen == 0 {
		t.Fatal("saw no JetStream API calls at all: the watch is not working")
	}
}

// TestEnsureAddsTheTurnsRepublish: a turns stream made before turns were
// republished once stored (a deployment upgraded under its streams) gets
// the republish at the next Ensure, since a coordinator hears turns only
// there.
func TestEnsureAddsTheTurnsRepublish(t *testing.T) {
	js, err := jetstream.New(testkit.Conn(t, testkit.NATS(t)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	old := a.Turns.CachedInfo().Config
	old.RePublish = nil
	if _, err := js.UpdateStream(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if a, err = wire.Ensure(t.Context(), js, wire.Config{}); err != nil {
		t.Fatal(err)
	}
	info, err := a.Turns.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rp := info.Config.RePublish; rp == nil || rp.Source != wire.TurnsPrefix+">" || rp.Destination != wire.StoredPrefix+">" {
		t.Errorf("the turns stream's republish after Ensure = %+v, want %s> to %s>", rp, wire.TurnsPrefix, wire.StoredPrefix)
	}
}
