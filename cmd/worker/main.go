// Command worker runs the harness worker role against a NATS server: it
// takes step tasks from its pools and answers them with its provider.
//
// Usage: worker [--nats URL] [--id ID] [--pool NAME]... [--concurrency N] [--replay CASSETTE] [--metrics ADDR]
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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/procguard"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/worker"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	// The worker holds the provider keys: keep them out of its
	// /proc/PID/environ and out of reach of ptrace.
	if err := procguard.Protect(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	natsURL := flag.String("nats", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	id := flag.String("id", os.Getenv("HARNESS_ID"), "worker id ($HARNESS_ID; default random)")
	var pools listFlag
	flag.Var(&pools, "pool", "a pool to serve (repeatable; default \"default\")")
	conc := flag.Int("concurrency", 0, "provider calls at once (default 8)")
	replay := flag.String("replay", os.Getenv("HARNESS_REPLAY"), "answer from this cassette instead of a live provider ($HARNESS_REPLAY)")
	turnDelay := flag.Duration("turn-delay", durationEnv("HARNESS_TURN_DELAY"), "answer no turn sooner than this after the call began: a cassette that takes as long as a model ($HARNESS_TURN_DELAY)")
	ackWait := flag.Duration("ack-wait", durationEnv("HARNESS_ACK_WAIT"), "how long a step task this worker holds may go unacknowledged before another worker gets it; the worker signals progress every third of it (default 60s) ($HARNESS_ACK_WAIT)")
	metricsAddr := flag.String("metrics", os.Getenv("HARNESS_METRICS"), "serve Prometheus metrics on http://ADDR/metrics ($HARNESS_METRICS)")
	natsFlags := streams.RoleFlags(flag.CommandLine, os.Getenv)
	flag.Parse()
	if err := fault.Arm(os.Getenv(fault.EnvVar)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := natsFlags.Options()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	opts.Logger = log
	p, primary, err := newProvider(*replay)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	if *turnDelay > 0 {
		p = &delayed{p: p, d: *turnDelay}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	msrv, err := metrics.ServeRole(*metricsAddr, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	defer func() { _ = msrv.Close() }()
	if msrv != nil {
		log.Info("serving metrics", "url", msrv.URL())
	}
	if err := run(ctx, log, *natsURL, opts, p, worker.Config{ID: *id, Pools: pools, Concurrency: *conc, AckWait: *ackWait, Primary: primary, Logger: log, Metrics: reg}); err != nil {
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

func run(ctx context.Context, log *slog.Logger, url string, opts streams.Options, p worker.Provider, cfg worker.Config) error {
	nc, js, assets, err := streams.Connect(ctx, url, "harness-worker", opts)
	if err != nil {
		return err
	}
	defer nc.Close()
	w, err := worker.New(nc, js, assets, p, cfg)
	if err != nil {
		return err
	}
	log.Info("connected", "nats", nc.ConnectedUrlRedacted())
	return w.Run(ctx)
}

// durationEnv reads a duration from the environment; zero when unset or
// unreadable, which the flag's default then stands for.
func durationEnv(k string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(k))
	return d
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
