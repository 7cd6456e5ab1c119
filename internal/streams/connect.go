package streams

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connect dials NATS for a role named name, reconnecting for ever after a
// loss, and ensures the streams. It is what every role's main does first.
// Errors: the server cannot be reached, or JetStream is not enabled.
func Connect(ctx context.Context, url, name string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, *Assets, error) {
	// After a reconnect the streams are ensured again: a restarted server
	// has lost the in-memory steps stream.
	var handle atomic.Pointer[jetstream.JetStream]
	reconnected := func(*nats.Conn) {
		if js := handle.Load(); js != nil {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _ = Ensure(ctx, *js, Config{})
			}()
		}
	}
	opts = append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.ReconnectHandler(reconnected),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	handle.Store(&js)
	assets, err := Ensure(ctx, js, Config{})
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, assets, nil
}
