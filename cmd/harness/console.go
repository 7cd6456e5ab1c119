package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/console"
	"github.com/ioharness/harness/internal/streams"
)

const consoleAbout = `The console is a web server for the people who watch runs and decide
approvals: the runs (live), a run's story (its trace as a timeline, its
sub-agents, what the model was sent), the approvals waiting for a person,
and the fleet. Everyone signs in with a token from --token-file, one line
per person:

    alice:TOKEN           may read, decide approvals and cancel runs
    bob:TOKEN:viewer      may read only

(make a token with: openssl rand -hex 32; the file must be chmod 600).
Decisions and cancels are recorded as console:NAME. The console listens on
loopback unless --listen names another address; give it --tls-cert and
--tls-key before you do.`

// consoleFlags are the console's flags, on harness console and (with
// --console for the address) on harness up.
type consoleFlags struct {
	tokenFile, cert, key *string
}

func addConsoleFlags(fs *flag.FlagSet) consoleFlags {
	return consoleFlags{
		tokenFile: fs.String("token-file", "", "the console's login tokens, one NAME:TOKEN (or NAME:TOKEN:viewer) line per person; required, there is no default password"),
		cert:      fs.String("tls-cert", "", "serve the console over HTTPS with this PEM certificate (and --tls-key)"),
		key:       fs.String("tls-key", "", "the console certificate's key"),
	}
}

// load reads the token file; a console never starts without one.
func (f consoleFlags) load() (*console.Tokens, error) {
	if (*f.cert == "") != (*f.key == "") {
		return nil, errors.New("give both --tls-cert and --tls-key, or neither")
	}
	return console.LoadTokens(*f.tokenFile)
}

func cmdConsole(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "console", "[flags]", `Serves the web console of a cluster: --nats URL (or $NATS_URL) with the
console's own NATS credentials (--nats-user console and $NATS_PASSWORD on
a cluster using deploy/nats/auth.conf), or the harness up serving --data
DIR, as its console user.

`+consoleAbout)
	listen := fs.String("listen", console.DefaultListen, "host:port the console listens on (port 0 for a free one); loopback unless you say otherwise")
	natsURL := fs.String("nats", "", "NATS URL of the cluster (default $NATS_URL)")
	env.nats = streams.AuthFlags(fs, env.getenv)
	data := fs.String("data", "", "data directory of a harness up to serve the console of")
	verbose := fs.Bool("v", false, "log what the console does to stderr")
	cf := addConsoleFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) > 0 {
		fail(env.stderr, "console takes no arguments")
		return exitUsage
	}
	tokens, err := cf.load()
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	c, closeFn, err := consoleClient(ctx, env, *natsURL, dataDir(env, *data))
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	defer closeFn()
	return serveConsole(ctx, env, c, tokens, *listen, cf, logger(env, *verbose))
}

// consoleClient connects the console to its cluster with the console's
// credentials, binding to the streams (it may create none): those the
// flags or environment give for a NATS URL, else the console user of the
// harness up serving dir, which server.json holds.
func consoleClient(ctx context.Context, env *environ, natsURL, dir string) (*harness.Client, func(), error) {
	if natsURL == "" {
		natsURL = env.getenv("NATS_URL")
	}
	auth := streams.Auth{}
	opts := []nats.Option{nats.Name("harness-console"), nats.MaxReconnects(-1), nats.Timeout(5 * time.Second)}
	switch sf, ok := readServerFile(dir); {
	case natsURL != "":
		var more []nats.Option
		var err error
		if auth, more, err = natsAuth(env); err != nil {
			return nil, nil, err
		}
		opts = append(opts, more...)
	case ok && sf.ConsolePassword != "":
		auth = streams.Auth{User: sf.ConsoleUser, Password: sf.ConsolePassword}
		more, err := auth.Options()
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, more...)
		natsURL = sf.URL
		if sf.Socket != "" {
			natsURL = "nats://localhost"
			opts = append(opts, nats.SetCustomDialer(harness.SocketDialer{Path: sf.Socket}))
		}
	default:
		return nil, nil, fmt.Errorf("no cluster to serve the console of: give --nats URL (or $NATS_URL) with the console's credentials, or --data DIR of a running harness up (none serves %s)", dir)
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		return nil, nil, auth.ExplainConnect(streams.Redact(natsURL), err)
	}
	c, err := harness.BindClient(ctx, nc, 0)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc.Close, nil
}

// serveConsole serves the console until ctx ends.
func serveConsole(ctx context.Context, env *environ, c *harness.Client, tokens *console.Tokens, listen string, cf consoleFlags, log *slog.Logger) int {
	srv, err := console.New(console.Config{Client: c, Tokens: tokens, CertFile: *cf.cert, KeyFile: *cf.key, Logger: log})
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	defer srv.Close()
	ln, err := console.Listen(listen)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	scheme := "http"
	if *cf.cert != "" {
		scheme = "https"
	}
	fmt.Fprintf(env.stdout, "console:  %s://%s (sign in with a token from %s)\n", scheme, ln.Addr(), *cf.tokenFile)
	if !console.Loopback(ln.Addr()) && *cf.cert == "" {
		fmt.Fprintf(env.stderr, "harness: the console listens on %s, beyond this machine, without TLS: tokens and pages cross the network in the clear; give --tls-cert and --tls-key\n", ln.Addr())
	}
	if err := srv.Serve(ctx, ln); err != nil {
		fail(env.stderr, "console: %v", err)
		return exitError
	}
	return exitOK
}

func logger(env *environ, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
}
