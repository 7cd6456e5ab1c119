// Package command is the sandboxer's command line: cmd/sandboxer is Main
// with no extra tools, and an embedder's sandboxer binary is Main with
// its own, which it advertises to the cluster and offers to the runs
// whose contracts name them (examples/custom-tool).
//
// Usage: sandboxer [--nats URL] [--id ID] [--root DIR]... [--max-concurrent N] [--backends native,docker,floor] [--snapshots DIR] [--metrics ADDR] [--version]
// The NATS URL defaults to $NATS_URL, then nats://127.0.0.1:4222; the roots
// default to the working directory.
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

	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/procguard"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/sandbox/native"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/tools"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the role could not start, or failed
	exitUsage = 2 // a bad flag, environment or backend list
)

// Main runs the sandboxer with the built-in tools and extra, an
// embedder's, and exits with its exit code. It is a binary's whole main:
// a native sandbox re-executes the binary as its init, which Main turns
// into before anything else. An extra tool whose name is the harness's
// own (tools.Reserved) or taken stops it at once, saying so.
func Main(extra ...tools.Tool) {
	native.RunShimIfRequested() // the re-executed child never goes past this line
	documents.RunChildIfRequested()
	documents.Isolate(true) // a hostile document exhausts a child, not the sandboxer
	os.Exit(Run(os.Args, os.Getenv, os.Stdout, os.Stderr, extra...))
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// config is the command line and environment, parsed.
type config struct {
	natsURL         string
	nats            *streams.Flags
	id              string
	roots           listFlag
	maxConcurrent   int
	drain           time.Duration
	backends        string
	dockerImage     string
	allowFloor      bool
	allowPermissive bool
	goCache         string
	images          bool
	snapshots       string
	noSnapshots     bool
	keepSnapshots   bool
	metricsAddr     string
	version         bool
}

// parseConfig reads the flags in args (args[0] is the program's name) and
// the environment. Errors: the flag package's, flag.ErrHelp for -h.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{dockerImage: getenv("HARNESS_DOCKER_IMAGE")}
	fs.StringVar(&c.natsURL, "nats", envOr(getenv, "NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	fs.StringVar(&c.id, "id", getenv("HARNESS_ID"), "node id ($HARNESS_ID; default random)")
	fs.Var(&c.roots, "root", "a directory whose workspaces this node serves (repeatable; default the working directory)")
	fs.IntVar(&c.maxConcurrent, "max-concurrent", 0, "operations that run commands or servers at once (default 4)")
	fs.DurationVar(&c.drain, "drain", 30*time.Second, "on SIGTERM, take no operation and let those in flight finish for up to this long before cutting them off")
	fs.StringVar(&c.backends, "backends", envOr(getenv, "HARNESS_BACKENDS", "native,floor"), "sandbox backends, best first, of native, docker and floor; those that do not work here are left out ($HARNESS_BACKENDS)")
	fs.BoolVar(&c.allowFloor, "allow-floor", getenv("HARNESS_ALLOW_FLOOR") == "1", "let commands run on the floor backend, unsandboxed, as this process's user, when a contract names it or nothing better works here ($HARNESS_ALLOW_FLOOR=1)")
	fs.BoolVar(&c.allowPermissive, "allow-permissive", getenv("HARNESS_ALLOW_PERMISSIVE") == "1", "serve contracts whose policy allows every command or connection by default ($HARNESS_ALLOW_PERMISSIVE=1)")
	fs.StringVar(&c.goCache, "go-cache", getenv("HARNESS_GO_CACHE"), "a Go build cache the native sandboxes read through a private overlay, so builds reuse it without writing to it; its contents become readable to commands ($HARNESS_GO_CACHE; default none)")
	fs.BoolVar(&c.images, "images", false, "offer the view_image tool, for models that take images")
	fs.StringVar(&c.snapshots, "snapshots", getenv("HARNESS_SNAPSHOTS"), "where snapshot workspaces are materialised ($HARNESS_SNAPSHOTS; default $TMPDIR/harness-snapshots-ID; give a fixed --id too so a restart finds them)")
	fs.BoolVar(&c.noSnapshots, "no-snapshots", false, "serve only the --root workspaces, no snapshot workspaces")
	fs.BoolVar(&c.keepSnapshots, "keep-snapshots", false, "keep a snapshot workspace after its run's changes are collected")
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

// Run is the command from its arguments to its exit code: it parses the
// configuration, builds the backends that work here and the metrics
// server, and serves workspaces, with extra tools beside the built-ins,
// until SIGINT or SIGTERM.
func Run(args []string, getenv func(string) string, stdout, stderr io.Writer, extra ...tools.Tool) int {
	// Before anything else: keep this process's secrets out of what a
	// floor command could read of it.
	if err := procguard.Protect(); err != nil {
		fmt.Fprintln(stderr, "sandboxer:", err)
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
		fmt.Fprintln(stdout, "sandboxer", version.Get())
		return exitOK
	}
	failed := func(code int, err error) int {
		fmt.Fprintln(stderr, "sandboxer:", err)
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bs, missing, err := backends.Build(ctx, cfg.backends, backends.Options{DockerImage: cfg.dockerImage, GoCache: cfg.goCache}, log)
	if err != nil {
		return failed(exitUsage, err)
	}
	if cfg.allowFloor {
		log.Warn("the floor backend is allowed: commands may run unsandboxed, as this process's user (--allow-floor)")
	}
	scfg := sandboxer.Config{ID: cfg.id, Roots: cfg.roots, MaxConcurrent: cfg.maxConcurrent, Drain: cfg.drain, Backends: bs, Logger: log,
		AllowFloor: cfg.allowFloor, AllowPermissive: cfg.allowPermissive, Missing: missing,
		SnapshotDir: cfg.snapshots, KeepSnapshots: cfg.keepSnapshots}
	base := tools.Builtins()
	if cfg.images {
		base = tools.BuiltinsWithImages()
	}
	if base, err = tools.WithDocuments(base, documents.Tools()...); err != nil {
		return failed(exitError, err)
	}
	if scfg.Tools, err = tools.Extend(base, extra...); err != nil {
		return failed(exitUsage, err)
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
	scfg.Metrics = reg
	if err := serve(ctx, log, msrv, cfg.natsURL, opts, scfg, !cfg.noSnapshots); err != nil {
		return failed(exitError, err)
	}
	return exitOK
}

// serve connects to NATS and runs the sandboxer until ctx ends; it serves
// snapshot workspaces when snapshots is set.
func serve(ctx context.Context, log *slog.Logger, msrv *metrics.Server, url string, opts streams.Options, cfg sandboxer.Config, snapshots bool) error {
	nc, _, assets, err := streams.Connect(ctx, url, "harness-sandboxer", opts)
	if err != nil {
		return err
	}
	defer nc.Close()
	msrv.SetReady(func() error { return streams.Ready(nc) })
	cfg.Ops = assets.Ops
	if snapshots {
		cfg.Workspaces = assets.Workspaces
	}
	s, err := sandboxer.New(nc, cfg)
	if err != nil {
		return err
	}
	log.Info("connected", "nats", nc.ConnectedUrlRedacted(), "id", s.ID())
	return s.Run(ctx)
}

func envOr(getenv func(string) string, k, d string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return d
}
