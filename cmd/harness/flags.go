package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/sandbox"
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

// roleFlags are the flags of the commands that run roles in this process
// (run, up): the price table and the sandbox backends.
type roleFlags struct {
	prices, backends, metrics *string
}

func clusterFlags(env *environ, fs *flag.FlagSet) roleFlags {
	return roleFlags{
		prices: fs.String("prices", env.getenv("HARNESS_PRICES"), "JSON price table each call's cost is recorded from ($HARNESS_PRICES)"),
		backends: fs.String("backends", orDefault(env.getenv("HARNESS_BACKENDS"), "native,floor"),
			"sandbox backends, best first, of native, docker and floor; those that do not work here are left out ($HARNESS_BACKENDS)"),
		metrics: fs.String("metrics", env.getenv("HARNESS_METRICS"), "serve the roles' Prometheus metrics on http://ADDR/metrics ($HARNESS_METRICS)"),
	}
}

// build loads the price table, if any, and the backends that work here.
// Errors: an unreadable price table, or no backend left.
func (r roleFlags) build(ctx context.Context, env *environ, log *slog.Logger) (ledger.Prices, []sandbox.Backend, error) {
	var prices ledger.Prices
	if *r.prices != "" {
		var err error
		if prices, err = ledger.LoadPrices(*r.prices); err != nil {
			return nil, nil, err
		}
	}
	bs, err := backends.Build(ctx, *r.backends, env.getenv("HARNESS_DOCKER_IMAGE"), log)
	return prices, bs, err
}
