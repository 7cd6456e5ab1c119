// Command coordinator runs the harness coordinator role against a NATS
// server: it takes contracts from harness.submit and drives their runs.
//
// Usage: coordinator [--nats URL] [--id ID] [--max-runs N] [--redis URL] [--prices FILE] [--metrics ADDR] [--version]
// The NATS URL defaults to $NATS_URL, then nats://127.0.0.1:4222; the
// budget ledger is Redis at $REDIS_URL, else a ledger in this process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/ledger"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the role could not start, or failed
	exitUsage = 2 // a bad flag, environment or file named by one
)

func main() { os.Exit(run(os.Args, os.Getenv, os.Stdout, os.Stderr)) }

// config is the command line and environment, parsed.
type config struct {
	natsURL     string
	nats        *streams.Flags
	id          string
	maxRuns     int
	retention   time.Duration
	redisURL    string
	pricesFile  string
	pools       string
	metricsAddr string
	version     bool
}

// parseConfig reads the flags in args (args[0] is the program's name) and
// the environment. Errors: the flag package's, flag.ErrHelp for -h.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	fs.StringVar(&c.natsURL, "nats", envOr(getenv, "NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	fs.StringVar(&c.id, "id", getenv("HARNESS_ID"), "coordinator id ($HARNESS_ID; default random)")
	fs.IntVar(&c.maxRuns, "max-runs", 0, "runs at work at once; a run waiting on a model, a person, a sub-agent or a timer takes none (default 64)")
	fs.DurationVar(&c.retention, "retention", retentionEnv(getenv), "how long a finished run's trace, index entry, approvals and cancel are kept; negative keeps them for ever (default 720h, 30 days) ($HARNESS_RETENTION)")
	fs.StringVar(&c.redisURL, "redis", getenv("REDIS_URL"), "Redis URL of the budget ledger shared by every coordinator ($REDIS_URL; default a ledger in this process)")
	fs.StringVar(&c.pricesFile, "prices", getenv("HARNESS_PRICES"), "JSON price table each call's cost is recorded from ($HARNESS_PRICES)")
	fs.StringVar(&c.pools, "pools", envOr(getenv, "HARNESS_POOLS", "default"), "worker pools whose consumers coordinators create, for workers that may not ($HARNESS_POOLS, comma-separated)")
	fs.StringVar(&c.metricsAddr, "metrics", getenv("HARNESS_METRICS"), "serve Prometheus metrics on http://ADDR/metrics ($HARNESS_METRICS)")
	fs.BoolVar(&c.version, "version", false, "print the module, version, revision and Go version of this build, and exit")
	c.nats = streams.RoleFlags(fs, getenv)
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if err := streams.FlagsOnly(fs, stderr); err != nil {
		return nil, err
	}
	return c, nil
}

// run is the command from its arguments to its exit code: it parses the
// configuration, builds the ledger, the price table and the metrics
// server, and drives runs until SIGINT or SIGTERM.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // the flag package has said why
	}
	if cfg.version {
		fmt.Fprintln(stdout, "coordinator", version.Get())
		return exitOK
	}
	failed := func(code int, err error) int {
		fmt.Fprintln(stderr, "coordinator:", err)
		return code
	}
	if err := fault.Arm(getenv(fault.EnvVar)); err != nil {
		return failed(exitUsage, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts, err := cfg.nats.Options()
	if err != nil {
		return failed(exitUsage, err)
	}
	opts.Pools, opts.Logger = strings.Split(cfg.pools, ","), log
	var prices ledger.Prices
	if cfg.pricesFile != "" {
		if prices, err = ledger.LoadPrices(cfg.pricesFile); err != nil {
			return failed(exitUsage, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	led, closeLedger, err := ledger.Dial(ctx, cfg.redisURL, ledger.RedisConfig{})
	if err != nil {
		return failed(exitError, err)
	}
	defer func() { _ = closeLedger() }()
	if cfg.redisURL == "" {
		log.Warn("no REDIS_URL: the budget ledger lives in this process, so tree ceilings hold across this coordinator's runs only")
	}
	reg := prometheus.NewRegistry()
	msrv, err := metrics.ServeRole(cfg.metricsAddr, reg)
	if err != nil {
		return failed(exitUsage, err)
	}
	defer func() { _ = msrv.Close() }()
	if msrv != nil {
		log.Info("serving metrics", "url", msrv.URL())
	}
	ccfg := coordinator.Config{ID: cfg.id, MaxRuns: cfg.maxRuns, Retention: cfg.retention, Prices: prices, Ledger: led, Logger: log, Metrics: reg}
	if err := serve(ctx, log, msrv, cfg.natsURL, opts, ccfg); err != nil {
		return failed(exitError, err)
	}
	return exitOK
}

// serve connects to NATS and runs the coordinator until ctx ends.
func serve(ctx context.Context, log *slog.Logger, msrv *metrics.Server, url string, opts streams.Options, cfg coordinator.Config) error {
	nc, _, assets, err := streams.Connect(ctx, url, "harness-coordinator", opts)
	if err != nil {
		return err
	}
	defer nc.Close()
	msrv.SetReady(func() error { return streams.Ready(nc) })
	cfg.Streams, cfg.Assets = opts.Streams, assets // ensured once, by Connect
	c, err := coordinator.New(nc, cfg)
	if err != nil {
		return err
	}
	log.Info("connected", "nats", nc.ConnectedUrlRedacted(), "id", c.ID())
	return c.Run(ctx)
}

func envOr(getenv func(string) string, k, d string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return d
}

// retentionEnv reads $HARNESS_RETENTION; zero (the default's) when unset
// or not a duration.
func retentionEnv(getenv func(string) string) time.Duration {
	d, _ := time.ParseDuration(getenv("HARNESS_RETENTION"))
	return d
}
