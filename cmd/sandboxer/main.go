// Command sandboxer runs the harness sandboxer role against a NATS server:
// it serves the workspaces under its roots, and workspaces carried as
// snapshots, running tools and verification commands for the runs that
// open them.
//
// Usage: sandboxer [--nats URL] [--id ID] [--root DIR]... [--max-concurrent N] [--backends native,docker,floor] [--snapshots DIR] [--metrics ADDR]
// The NATS URL defaults to $NATS_URL, then nats://127.0.0.1:4222; the roots
// default to the working directory.
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

	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/procguard"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/tools"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	// A native sandbox re-executes this binary as its init; that child
	// never goes past this line.
	sandbox.RunShimIfRequested()
	if err := procguard.Protect(); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer:", err)
		os.Exit(1)
	}
	natsURL := flag.String("nats", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	id := flag.String("id", os.Getenv("HARNESS_ID"), "node id ($HARNESS_ID; default random)")
	var roots listFlag
	flag.Var(&roots, "root", "a directory whose workspaces this node serves (repeatable; default the working directory)")
	maxConc := flag.Int("max-concurrent", 0, "operations at once (default 4)")
	backendNames := flag.String("backends", envOr("HARNESS_BACKENDS", "native,floor"), "sandbox backends, best first, of native, docker and floor; those that do not work here are left out ($HARNESS_BACKENDS)")
	allowFloor := flag.Bool("allow-floor", os.Getenv("HARNESS_ALLOW_FLOOR") == "1", "let commands run on the floor backend, unsandboxed, as this process's user, when a contract names it or nothing better works here ($HARNESS_ALLOW_FLOOR=1)")
	allowPermissive := flag.Bool("allow-permissive", os.Getenv("HARNESS_ALLOW_PERMISSIVE") == "1", "serve contracts whose policy allows every command or connection by default ($HARNESS_ALLOW_PERMISSIVE=1)")
	goCache := flag.String("go-cache", os.Getenv("HARNESS_GO_CACHE"), "a Go build cache the native sandboxes read through a private overlay, so builds reuse it without writing to it; its contents become readable to commands ($HARNESS_GO_CACHE; default none)")
	images := flag.Bool("images", false, "offer the view_image tool, for models that take images")
	snapshots := flag.String("snapshots", os.Getenv("HARNESS_SNAPSHOTS"), "where snapshot workspaces are materialised ($HARNESS_SNAPSHOTS; default $TMPDIR/harness-snapshots-ID; give a fixed --id too so a restart finds them)")
	noSnapshots := flag.Bool("no-snapshots", false, "serve only the --root workspaces, no snapshot workspaces")
	keepSnapshots := flag.Bool("keep-snapshots", false, "keep a snapshot workspace after its run's changes are collected")
	metricsAddr := flag.String("metrics", os.Getenv("HARNESS_METRICS"), "serve Prometheus metrics on http://ADDR/metrics ($HARNESS_METRICS)")
	natsFlags := streams.RoleFlags(flag.CommandLine, os.Getenv)
	flag.Parse()
	if err := fault.Arm(os.Getenv(fault.EnvVar)); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := natsFlags.Options()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer:", err)
		os.Exit(2)
	}
	opts.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bs, missing, err := backends.Build(ctx, *backendNames, backends.Options{DockerImage: os.Getenv("HARNESS_DOCKER_IMAGE"), GoCache: *goCache}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer:", err)
		os.Exit(2)
	}
	if *allowFloor {
		log.Warn("the floor backend is allowed: commands may run unsandboxed, as this process's user (--allow-floor)")
	}
	cfg := sandboxer.Config{ID: *id, Roots: roots, MaxConcurrent: *maxConc, Backends: bs, Logger: log,
		AllowFloor: *allowFloor, AllowPermissive: *allowPermissive, Missing: missing,
		SnapshotDir: *snapshots, KeepSnapshots: *keepSnapshots}
	if *images {
		cfg.Tools = tools.BuiltinsWithImages()
	}
	reg := prometheus.NewRegistry()
	msrv, err := metrics.ServeRole(*metricsAddr, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer:", err)
		os.Exit(2)
	}
	defer func() { _ = msrv.Close() }()
	if msrv != nil {
		log.Info("serving metrics", "url", msrv.URL())
	}
	cfg.Metrics = reg
	if err := run(ctx, log, *natsURL, opts, cfg, !*noSnapshots); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, url string, opts streams.Options, cfg sandboxer.Config, snapshots bool) error {
	nc, _, assets, err := streams.Connect(ctx, url, "harness-sandboxer", opts)
	if err != nil {
		return err
	}
	defer nc.Close()
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

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
