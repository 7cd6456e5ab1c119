// Package streams connects a harness role to NATS: credentials, TLS, the
// flags and environment every role and the CLI share, and Connect, which
// dials, reconnects for ever and ensures (or binds to) the streams of
// pkg/wire, again after every reconnect. The names and topology themselves
// are public, in pkg/wire; this is the plumbing a role's main needs.
package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/wire"
)

// Options configure Connect. The zero value connects without credentials
// and ensures single-node streams, as every role did before there were
// options.
type Options struct {
	// Streams tunes what wire.Ensure creates (the replication factor).
	Streams wire.Config
	// Bind makes the role create nothing: it waits for the coordinators to
	// create the streams, buckets and pool consumers, and binds to them.
	// For roles whose credentials may not manage streams.
	Bind bool
	// BindWait bounds that wait; default wire.DefaultBindWait.
	BindWait time.Duration
	// Pools are the worker pools whose consumers this role creates (and
	// creates again after a NATS restart lost the in-memory steps
	// stream), so that workers which may not create consumers find them.
	// Coordinators are given the pools; ignored with Bind.
	Pools []string
	// Auth holds the credentials and TLS settings.
	Auth Auth
	// Logger receives what the connection goes through; default discard.
	Logger *slog.Logger
	// NATS are further options, applied last.
	NATS []nats.Option
}

// Connect dials NATS for a role named name, reconnecting for ever after a
// loss, and ensures the streams (or, with Options.Bind, binds to them). It
// is what every role's main does first.
//
// Errors: bad credentials (the server's authorization violation, with
// which credentials were offered but never the secret); unreadable
// credential or CA files; a TLS failure, saying which flag or environment
// variable to set (see Auth.ExplainConnect); the server cannot be reached;
// JetStream is not enabled; a *PermissionError when the credentials may
// not do what the role needs.
func Connect(ctx context.Context, url, name string, o Options) (*nats.Conn, jetstream.JetStream, *wire.Assets, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	authOpts, err := o.Auth.options()
	if err != nil {
		return nil, nil, nil, err
	}
	// After a reconnect the streams are ensured again: a restarted server
	// has lost the in-memory steps stream. A bound role leaves that to the
	// coordinators.
	var handle atomic.Pointer[jetstream.JetStream]
	reconnected := func(nc *nats.Conn) {
		log.Info("reconnected to NATS", "nats", nc.ConnectedUrl())
		js := handle.Load()
		if js == nil || o.Bind {
			return
		}
		go func() {
			// A whole cluster that restarted is still electing leaders when
			// the first client is back: keep trying while it forms.
			ctx, cancel := context.WithTimeout(context.Background(), formingWait)
			defer cancel()
			if _, err := ensureWhileForming(ctx, *js, o, log); err != nil {
				log.Warn("ensure streams after reconnecting", "err", err)
			}
		}()
	}
	opts := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// A connection cut off without a reset (a partition, a dropped
		// network) is noticed within about 20 s rather than the client's
		// default of several minutes, and then re-dialled.
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.RetryOnFailedConnect(false),
		nats.ReconnectHandler(reconnected),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Error("the NATS server refused this role's credentials a subject", "err", err)
				return
			}
			log.Warn("NATS", "err", err)
		}),
	}, authOpts...)
	opts = append(opts, o.NATS...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, nil, o.Auth.ExplainConnect(Redact(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	handle.Store(&js)
	var assets *wire.Assets
	if o.Bind {
		assets, err = wire.Bind(ctx, js, o.BindWait)
	} else {
		assets, err = ensureWhileForming(ctx, js, o, log)
	}
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, assets, nil
}

// formingWait bounds how long Connect retries while JetStream cannot
// answer yet: a cluster that is still electing its leaders.
const formingWait = 2 * time.Minute

// ensureWhileForming ensures the streams and pools, trying again while
// the server cannot place them yet (a cluster coming up together with the
// roles), but not after a refusal of permission, which will not change.
func ensureWhileForming(ctx context.Context, js jetstream.JetStream, o Options, log *slog.Logger) (*wire.Assets, error) {
	deadline := time.Now().Add(formingWait)
	waited := false
	for {
		a, err := wire.Ensure(ctx, js, o.Streams)
		if err == nil {
			if err = ensurePools(ctx, a, o.Pools); err == nil {
				if waited {
					log.Info("JetStream is ready: streams and pools ensured")
				}
				return a, nil
			}
		}
		var pe *wire.PermissionError
		if errors.As(err, &pe) || ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
		log.Info("JetStream is not ready; trying again", "err", err)
		waited = true
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

func ensurePools(ctx context.Context, a *wire.Assets, pools []string) error {
	for _, p := range pools {
		if _, err := wire.EnsureWorkerConsumer(ctx, a, p, wire.DefaultWorkerAckWait); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Ready says whether a role's connection can serve: nil while it is
// connected, else the connection's state, for /readyz.
func Ready(nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	return fmt.Errorf("NATS connection %s", strings.ToLower(nc.Status().String()))
}
