// Command coordinator runs the harness coordinator role against a NATS
// server: it takes contracts from harness.submit and drives their runs.
//
// Usage: coordinator [--nats URL] [--id ID] [--max-runs N] [--redis URL] [--prices FILE] [--metrics ADDR]
// The NATS URL defaults to $NATS_URL, then nats://127.0.0.1:4222; the
// budget ledger is Redis at $REDIS_URL, else a ledger in this process.
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/ledger"
)

func main() {
	natsURL := flag.String("nats", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	id := flag.String("id", os.Getenv("HARNESS_ID"), "coordinator id ($HARNESS_ID; default random)")
	maxRuns := flag.Int("max-runs", 0, "runs driven at once (default 64)")
	redisURL := flag.String("redis", os.Getenv("REDIS_URL"), "Redis URL of the budget ledger shared by every coordinator ($REDIS_URL; default a ledger in this process)")
	pricesFile := flag.String("prices", os.Getenv("HARNESS_PRICES"), "JSON price table each call's cost is recorded from ($HARNESS_PRICES)")
	pools := flag.String("pools", envOr("HARNESS_POOLS", "default"), "worker pools whose consumers coordinators create, for workers that may not ($HARNESS_POOLS, comma-separated)")
	metricsAddr := flag.String("metrics", os.Getenv("HARNESS_METRICS"), "serve Prometheus metrics on http://ADDR/metrics ($HARNESS_METRICS)")
	natsFlags := streams.RoleFlags(flag.CommandLine, os.Getenv)
	flag.Parse()
	if err := fault.Arm(os.Getenv(fault.EnvVar)); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := natsFlags.Options()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(2)
	}
	opts.Pools, opts.Logger = strings.Split(*pools, ","), log
	var prices ledger.Prices
	if *pricesFile != "" {
		var err error
		if prices, err = ledger.LoadPrices(*pricesFile); err != nil {
			fmt.Fprintln(os.Stderr, "coordinator:", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	led, closeLedger, err := ledger.Dial(ctx, *redisURL, ledger.RedisConfig{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
	defer func() { _ = closeLedger() }()
	if *redisURL == "" {
		log.Warn("no REDIS_URL: the budget ledger lives in this process, so tree ceilings hold across this coordinator's runs only")
	}
	reg := prometheus.NewRegistry()
	msrv, err := metrics.ServeRole(*metricsAddr, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(2)
	}
	defer func() { _ = msrv.Close() }()
	if msrv != nil {
		log.Info("serving metrics", "url", msrv.URL())
	}
	if err := run(ctx, log, *natsURL, opts, coordinator.Config{ID: *id, MaxRuns: *maxRuns, Prices: prices, Ledger: led, Logger: log, Metrics: reg}); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, url string, opts streams.Options, cfg coordinator.Config) error {
	nc, js, assets, err := streams.Connect(ctx, url, "harness-coordinator", opts)
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := coordinator.New(nc, js, assets, cfg)
	if err != nil {
		return err
	}
	log.Info("connected", "nats", nc.ConnectedUrlRedacted(), "id", c.ID())
	return c.Run(ctx)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
