package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
)

// advertise writes DIR/server.json naming the URL of this process's NATS
// server, so other harness commands on the same data directory talk to it
// instead of opening the store a second time. The returned func removes it.
func advertise(dir, url string) func() {
	if url == "" {
		return func() {}
	}
	path := filepath.Join(dir, "server.json")
	data, _ := json.Marshal(map[string]any{"url": url, "pid": os.Getpid()})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return func() {}
	}
	return func() { _ = os.Remove(path) }
}

// natsAuth returns the credentials a command connects to a cluster with:
// its flags, else the environment.
func natsAuth(env *environ) (streams.Auth, []nats.Option, error) {
	f := env.nats
	if f == nil {
		f = streams.AuthFlags(flag.NewFlagSet("", flag.ContinueOnError), env.getenv)
	}
	auth, err := f.Auth()
	if err != nil {
		return streams.Auth{}, nil, err
	}
	opts, err := auth.Options()
	return auth, opts, err
}

// client connects to the cluster a command talks to: --nats or $NATS_URL if
// given; else the harness process serving the data directory, if one is
// up; else an embedded server opened on the data directory itself. The
// returned close releases what was opened.
func client(ctx context.Context, env *environ, natsURL, dir string) (*harness.Client, func(), error) {
	c, closeFn, _, err := clientFor(ctx, env, natsURL, dir)
	return c, closeFn, err
}

// clientFor is client, and also says whether it opened the data directory's
// store itself (no cluster is serving it).
func clientFor(ctx context.Context, env *environ, natsURL, dir string) (*harness.Client, func(), bool, error) {
	if natsURL == "" {
		natsURL = env.getenv("NATS_URL")
	}
	if natsURL != "" {
		auth, opts, err := natsAuth(env)
		if err != nil {
			return nil, nil, false, err
		}
		opts = append([]nats.Option{nats.Name("harness-client"), nats.MaxReconnects(-1), nats.Timeout(5 * time.Second)}, opts...)
		nc, err := nats.Connect(natsURL, opts...)
		if err != nil {
			// Which credentials were refused, or which TLS flag to set;
			// never the password.
			return nil, nil, false, auth.ExplainConnect(streams.Redact(natsURL), err)
		}
		c, err := harness.NewClient(ctx, nc)
		if err != nil {
			nc.Close()
			return nil, nil, false, err
		}
		return c, nc.Close, false, nil
	}
	if data, err := os.ReadFile(filepath.Join(dir, "server.json")); err == nil {
		var s struct{ URL string }
		if json.Unmarshal(data, &s) == nil && s.URL != "" {
			if c, err := harness.Connect(ctx, s.URL, nats.Timeout(2*time.Second), nats.MaxReconnects(0)); err == nil {
				return c, c.Close, false, nil
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		return nil, nil, false, fmt.Errorf("no harness data in %s and no cluster to ask (set NATS_URL or pass --nats, or --data DIR)", dir)
	}
	srv, err := harness.StartServer(dir, "", 0)
	if err != nil {
		return nil, nil, false, err
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		srv.Shutdown()
		return nil, nil, false, err
	}
	c, err := harness.NewClient(ctx, nc)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, nil, false, err
	}
	return c, func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown() }, true, nil
}
