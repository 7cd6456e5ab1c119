package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// newFlags returns a flag set for a command whose --help prints the
// command's synopsis and flags.
func newFlags(env *environ, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: harness %s %s\n\n%s\n\nFlags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags placed anywhere among the positional arguments, and
// returns the positionals. It returns flag.ErrHelp for --help.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// exitForParse maps a flag parse error to an exit code.
func exitForParse(err error) int {
	if err == flag.ErrHelp {
		return exitOK
	}
	return exitUsage
}

// dataDir returns the data directory: the flag, $HARNESS_DATA, or the
// default.
func dataDir(env *environ, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if d := env.getenv("HARNESS_DATA"); d != "" {
		return d
	}
	if d := env.getenv("XDG_DATA_HOME"); d != "" {
		return d + "/harness"
	}
	return harness.DefaultDataDir()
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

func fail(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "harness: "+format+"\n", args...)
}

// failErr says what went wrong, and for a run that is not there how to
// find the right id.
func failErr(w io.Writer, err error) {
	if errors.Is(err, protocol.ErrUnknownRun) && !strings.Contains(err.Error(), "harness ls") {
		fail(w, "%v: check the id (harness ls lists the runs)", err)
		return
	}
	fail(w, "%v", err)
}

// roleFlags are the flags of the commands that run roles in this process
// (run, up): the price table and the sandbox backends.
type roleFlags struct {
	prices, backends, metrics   *string
	allowFloor, allowPermissive *bool
}

func clusterFlags(env *environ, fs *flag.FlagSet) roleFlags {
	return roleFlags{
		prices: fs.String("prices", env.getenv("HARNESS_PRICES"), "JSON price table each call's cost is recorded from ($HARNESS_PRICES)"),
		backends: fs.String("backends", orDefault(env.getenv("HARNESS_BACKENDS"), "native,floor"),
			"sandbox backends, best first, of native, docker and floor; those that do not work here are left out ($HARNESS_BACKENDS)"),
		metrics: fs.String("metrics", env.getenv("HARNESS_METRICS"), "serve the roles' Prometheus metrics on http://ADDR/metrics ($HARNESS_METRICS)"),
		allowFloor: fs.Bool("allow-floor", env.getenv("HARNESS_ALLOW_FLOOR") == "1",
			"let commands run on the floor backend, unsandboxed, as this process's user, when a contract names it or nothing better works here ($HARNESS_ALLOW_FLOOR=1)"),
		allowPermissive: fs.Bool("allow-permissive", env.getenv("HARNESS_ALLOW_PERMISSIVE") == "1",
			"run contracts whose policy allows every command or connection by default ($HARNESS_ALLOW_PERMISSIVE=1)"),
	}
}

// build loads the price table, if any, and the backends that work here,
// and sets them and the operator's allowances on cfg. Errors: an
// unreadable price table, or no backend left.
func (r roleFlags) build(ctx context.Context, env *environ, log *slog.Logger, cfg *harness.Config) error {
	if *r.prices != "" {
		prices, err := ledger.LoadPrices(*r.prices)
		if err != nil {
			return err
		}
		cfg.Prices = prices
	}
	// On a person's own machine the native sandboxes reuse their Go build
	// cache, read-only, so a verification's go test does not compile the
	// standard library afresh each time; HARNESS_GO_CACHE=off (or a
	// directory) says otherwise.
	goCache := env.getenv("HARNESS_GO_CACHE")
	switch goCache {
	case "":
		goCache = backends.UserGoCache(env.getenv)
	case "off":
		goCache = ""
	}
	bs, missing, err := backends.Build(ctx, *r.backends, backends.Options{DockerImage: env.getenv("HARNESS_DOCKER_IMAGE"), GoCache: goCache}, log)
	if err != nil {
		return err
	}
	cfg.Backends, cfg.MissingBackends = bs, missing
	cfg.AllowFloor, cfg.AllowPermissive = *r.allowFloor, *r.allowPermissive
	if cfg.AllowFloor {
		fmt.Fprintln(env.stderr, "harness: the floor backend is allowed: commands may run unsandboxed, as your user (--allow-floor)")
	}
	return nil
}

// option is build as the harness.Option of the calls that start the
// embedded cluster themselves (harness.Resume): resume, and approve or
// deny carrying a run on, get the sandboxes and allowances run has.
func (r roleFlags) option(ctx context.Context, env *environ, log *slog.Logger) (harness.Option, error) {
	var built harness.Config
	if err := r.build(ctx, env, log, &built); err != nil {
		return nil, err
	}
	return func(c *harness.Config) {
		c.Prices, c.Backends, c.MissingBackends = built.Prices, built.Backends, built.MissingBackends
		c.AllowFloor, c.AllowPermissive, c.MetricsListen = built.AllowFloor, built.AllowPermissive, *r.metrics
	}, nil
}

// target is where a command finds the cluster: --nats (or $NATS_URL,
// with the credential flags) or --data.
type target struct{ natsURL, data *string }

// targetFlags registers a command's --nats, credential and --data flags.
func targetFlags(env *environ, fs *flag.FlagSet) target {
	t := target{natsURL: fs.String("nats", "", "NATS URL of the cluster (default $NATS_URL)")}
	env.nats = streams.AuthFlags(fs, env.getenv)
	t.data = fs.String("data", "", "data directory")
	return t
}

// connect returns a client of the target, and the function that closes
// it; on failure it says why on stderr and returns the exit code.
func (t target) connect(ctx context.Context, env *environ) (*harness.Client, func(), int) {
	c, closeFn, err := client(ctx, env, *t.natsURL, dataDir(env, *t.data))
	if err != nil {
		fail(env.stderr, "%v", err)
		return nil, nil, exitError
	}
	return c, closeFn, exitOK
}
