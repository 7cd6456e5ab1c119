// Package command is the worker's command line: cmd/worker is Main with
// no tools, and an embedder's worker binary is Main with tools of its own
// that need no workspace, which it advertises to the cluster and serves
// to the runs whose contracts name them (examples/custom-tool/worker).
// The worker runs the harness worker role against a NATS server: it
// takes step tasks from its pools and answers them with its provider.
//
// Usage: worker [--nats URL] [--id ID] [--pool NAME]... [--concurrency N] [--replay CASSETTE] [--metrics ADDR] [--version]
// The provider is --replay CASSETTE, else every vendor whose key is set
// (OPENAI_API_KEY with OPENAI_BASE_URL and OPENAI_MODEL for any
// OpenAI-compatible server, ANTHROPIC_API_KEY, OPENROUTER_API_KEY), chained
// in the order HARNESS_PROVIDERS gives and falling over on retryable
// failures.
package command

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
	"github.com/ioharness/harness/internal/procguard"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/worker"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the role could not start, or failed
	exitUsage = 2 // a bad flag, environment or file named by one
)

// Main runs the worker with extra, an embedder's tools, and exits with its
// exit code. A tool whose name is the harness's own (tools.Reserved) or
// taken, or that declares a read or write of a path, stops it at once,
// saying so.
func Main(extra ...tools.Tool) {
	os.Exit(Run(os.Args, os.Getenv, os.Stdout, os.Stderr, extra...))
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// config is the command line and environment, parsed.
type config struct {
	natsURL     string
	nats        *streams.Flags
	id          string
	pools       listFlag
	concurrency int
	drain       time.Duration
	replay      string
	turnDelay   time.Duration
	ackWait     time.Duration
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
	fs.StringVar(&c.id, "id", getenv("HARNESS_ID"), "worker id ($HARNESS_ID; default random)")
	fs.Var(&c.pools, "pool", "a pool to serve (repeatable; default \"default\")")
	fs.IntVar(&c.concurrency, "concurrency", 0, "provider calls at once (default 256)")
	fs.DurationVar(&c.drain, "drain", durationOr(getenv, "HARNESS_DRAIN", 30*time.Second), "on SIGTERM, take no task and let the calls in flight finish for up to this long before abandoning them ($HARNESS_DRAIN)")
	fs.StringVar(&c.replay, "replay", getenv("HARNESS_REPLAY"), "answer from this cassette instead of a live provider ($HARNESS_REPLAY)")
	fs.DurationVar(&c.turnDelay, "turn-delay", durationEnv(getenv, "HARNESS_TURN_DELAY"), "answer no turn sooner than this after the call began: a cassette that takes as long as a model ($HARNESS_TURN_DELAY)")
	fs.DurationVar(&c.ackWait, "ack-wait", durationEnv(getenv, "HARNESS_ACK_WAIT"), "how long a step task this worker holds may go unacknowledged before another worker gets it; the worker signals progress every third of it (default 60s) ($HARNESS_ACK_WAIT)")
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

// Run is Main's body, the command from its arguments to its exit code:
// it parses args (args[0] is the program's name) and the environment,
// builds the provider and the metrics server, and answers step tasks and
// calls of extra, its tools, until SIGINT or SIGTERM.
func Run(args []string, getenv func(string) string, stdout, stderr io.Writer, extra ...tools.Tool) int {
	// The worker holds the provider keys: keep them out of its
	// /proc/PID/environ and out of reach of ptrace, before anything else.
	if err := procguard.Protect(); err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return exitError
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // the flag package has said why
	}
	if cfg.version {
		fmt.Fprintln(stdout, "worker", version.Get())
		return exitOK
	}
	failed := func(code int, err error) int {
		fmt.Fprintln(stderr, "worker:", err)
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
	opts.Logger = log
	p, primary, err := newProvider(cfg.replay, getenv)
	if err != nil {
		return failed(exitUsage, err)
	}
	if cfg.turnDelay > 0 {
		p = &delayed{p: p, d: cfg.turnDelay}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	msrv, err := metrics.ServeRole(cfg.metricsAddr, reg)
	if err != nil {
		return failed(exitUsage, err)
	}
	defer func() { _ = msrv.Close() }()
	if msrv != nil {
		log.Info("serving metrics", "url", msrv.URL())
	}
	wcfg := worker.Config{ID: cfg.id, Pools: cfg.pools, Concurrency: cfg.concurrency, Drain: cfg.drain, AckWait: cfg.ackWait, Primary: primary, Logger: log, Metrics: reg, Tools: extra}
	if err := serve(ctx, log, msrv, cfg.natsURL, opts, p, wcfg); err != nil {
		return failed(exitError, err)
	}
	return exitOK
}

// newProvider is the cassette at replay, else the vendors whose keys are
// set, else the cassette $HARNESS_REPLAY_FALLBACK names (compose ships the
// example's, so a cluster with no key still runs it).
func newProvider(replay string, getenv func(string) string) (worker.Provider, string, error) {
	if replay != "" {
		r, err := provider.LoadReplay(replay)
		if err != nil {
			return nil, "", err
		}
		return r, r.Name(), nil
	}
	p, primary, err := provider.FromEnv(getenv)
	if err != nil && getenv("HARNESS_REPLAY_FALLBACK") != "" {
		return newProvider(getenv("HARNESS_REPLAY_FALLBACK"), func(string) string { return "" })
	}
	return p, primary, err
}

// serve connects to NATS and runs the worker until ctx ends.
func serve(ctx context.Context, log *slog.Logger, msrv *metrics.Server, url string, opts streams.Options, p worker.Provider, cfg worker.Config) error {
	nc, _, assets, err := streams.Connect(ctx, url, "harness-worker", opts)
	if err != nil {
		return err
	}
	defer nc.Close()
	msrv.SetReady(func() error { return streams.Ready(nc) })
	// --bind-streams: Connect waited for the coordinators' streams, and
	// the worker binds to them and to its pools' consumers the same way.
	cfg.Streams, cfg.Bind, cfg.BindWait, cfg.Assets = opts.Streams, opts.Bind, opts.BindWait, assets
	w, err := worker.New(nc, p, cfg)
	if err != nil {
		return err
	}
	log.Info("connected", "nats", nc.ConnectedUrlRedacted())
	return w.Run(ctx)
}

// durationEnv reads a duration from the environment; zero when unset or
// unreadable, which the flag's default then stands for.
func durationEnv(getenv func(string) string, k string) time.Duration {
	d, _ := time.ParseDuration(getenv(k))
	return d
}

func envOr(getenv func(string) string, k, d string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return d
}

// durationOr is the duration in the environment variable k, or d when it
// is unset or not a duration.
func durationOr(getenv func(string) string, k string, d time.Duration) time.Duration {
	if v, err := time.ParseDuration(getenv(k)); err == nil {
		return v
	}
	return d
}
