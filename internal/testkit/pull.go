package testkit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Pull is what a client's pull request on a consumer asks of the server.
type Pull struct {
	Expires   time.Duration `json:"expires"`
	Batch     int           `json:"batch"`
	Heartbeat time.Duration `json:"idle_heartbeat"`
}

// WatchPulls subscribes, on a connection of its own to srv, to the pull
// requests of stream's consumer, from now on; NextPull reads them.
func WatchPulls(t testing.TB, srv *server.Server, stream, consumer string) *nats.Subscription {
	t.Helper()
	nc := Conn(t, srv)
	sub, err := nc.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// NextPull waits on sub, a subscription to a consumer's pull subject
// ($JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>), for the next pull
// request, and returns what it asks; it fails t after thirty seconds.
func NextPull(t testing.TB, sub *nats.Subscription) Pull {
	t.Helper()
	m, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no pull request on %s: %v", sub.Subject, err)
	}
	var p Pull
	if err := json.Unmarshal(m.Data, &p); err != nil {
		t.Fatalf("pull request %s: %v", m.Data, err)
	}
	return p
}
