// Command worker runs the harness worker role against a NATS server: it
// takes step tasks from its pools and answers them with its provider.
//
// Usage: worker [--nats URL] [--id ID] [--pool NAME]... [--concurrency N] [--replay CASSETTE]
// The provider is --replay CASSETTE, else every vendor whose key is set
// (OPENAI_API_KEY with OPENAI_BASE_URL and OPENAI_MODEL for any
// OpenAI-compatible server, ANTHROPIC_API_KEY, OPENROUTER_API_KEY), chained
// in the order HARNESS_PROVIDERS gives and falling over on retryable
// failures.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/worker"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	natsURL := flag.String("nats", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	id := flag.String("id", os.Getenv("HARNESS_ID"), "worker id ($HARNESS_ID; default random)")
	var pools listFlag
	flag.Var(&pools, "pool", "a pool to serve (repeatable; default \"default\")")
	conc := flag.Int("concurrency", 0, "provider calls at once (default 8)")
	replay := flag.String("replay", "", "answer from this cassette instead of a live provider")
	flag.Parse()
	if err := fault.Arm(os.Getenv(fault.EnvVar)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p, primary, err := newProvider(*replay)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *natsURL, p, worker.Config{ID: *id, Pools: pools, Concurrency: *conc, Primary: primary, Logger: log}); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func newProvider(replay string) (worker.Provider, string, error) {
	if replay != "" {
		r, err := provider.LoadReplay(replay)
		if err != nil {
			return nil, "", err
		}
		return r, r.Name(), nil
	}
	return provider.FromEnv(os.Getenv)
}

func run(ctx context.Context, log *slog.Logger, url string, p worker.Provider, cfg worker.Config) error {
	nc, js, assets, err := streams.Connect(ctx, url, "harness-worker")
	if err != nil {
		return err
	}
	defer nc.Close()
	w, err := worker.New(nc, js, assets, p, cfg)
	if err != nil {
		return err
	}
	log.Info("connected", "nats", nc.ConnectedUrl())
	return w.Run(ctx)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
