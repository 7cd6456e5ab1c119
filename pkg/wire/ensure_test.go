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
