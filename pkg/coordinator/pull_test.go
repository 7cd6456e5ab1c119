package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/wire"
)

// TestPullAsksForHeartbeats: a coordinator's pull of the submitted
// contracts asks the server to say every two seconds at most that the pull
// is still waiting, so a pull the server lost (the consumer's leader not
// yet elected as a cluster forms, or moved to another node) is noticed and
// asked again within seconds, not the half minute of the client's defaults.
func TestPullAsksForHeartbeats(t *testing.T) {
	srv := testkit.NATS(t)
	pulls := testkit.WatchPulls(t, srv, wire.StreamSubmit, wire.ConsumerCoordinators)
	co, err := coordinator.New(testkit.Conn(t, srv), coordinator.Config{ID: "c1", NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- co.Run(ctx) }()
	p := testkit.NextPull(t, pulls)
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if p.Heartbeat <= 0 || p.Heartbeat > 2*time.Second || p.Expires > 10*time.Second {
		t.Errorf("the coordinator's pull asks for a heartbeat every %v and waits %v; want a heartbeat every 2s at most, and 10s at most", p.Heartbeat, p.Expires)
	}
}
