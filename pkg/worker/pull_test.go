package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// TestPullAsksForHeartbeats: a worker's pull of its pool's tasks asks the
// server to say every two seconds at most that the pull is still waiting,
// so a pull the server lost (the consumer's leader not yet elected as a
// cluster forms, or moved to another node) is noticed and asked again
// within seconds. With the client's defaults (a heartbeat every 15 s) a
// fresh cluster's first task waited about half a minute.
func TestPullAsksForHeartbeats(t *testing.T) {
	srv := testkit.NATS(t)
	pulls := testkit.WatchPulls(t, srv, wire.StreamSteps, wire.WorkerConsumer("default"))
	nc := testkit.Conn(t, srv)
	js, _ := jetstream.New(nc)
	assets, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(nc, provider.NewScripted(), worker.Config{Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	p := testkit.NextPull(t, pulls)
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if p.Heartbeat <= 0 || p.Heartbeat > 2*time.Second || p.Expires > 10*time.Second {
		t.Errorf("the worker's pull asks for a heartbeat every %v and waits %v; want a heartbeat every 2s at most, and 10s at most", p.Heartbeat, p.Expires)
	}
}
