package wire_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/wire"
)

// TestEnsureLeavesUnchangedStreamsAlone ensures the streams twice and
// watches the JetStream API: the second time nothing is created or
// updated. Every role ensures the streams at every start; an update each
// time raced with consumers being created inside the server (a data race
// in its file store) and is needless work besides.
func TestEnsureLeavesUnchangedStreamsAlone(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	srv := startServer(t, opts)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Ensure(t.Context(), js, wire.Config{}); err != nil {
		t.Fatal(err)
	}

	watch, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
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

func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}
