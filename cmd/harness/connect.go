package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
)

// serverFile is DIR/server.json: how other harness commands on the same
// data directory reach the harness process serving it, instead of opening
// the store a second time. It holds the operator's password, so it is
// written 0600 in the 0700 data directory, and removed when the process
// ends.
type serverFile struct {
	URL      string `json:"url,omitempty"`    // the TCP listener (harness up)
	Socket   string `json:"socket,omitempty"` // the unix socket (harness run)
	User     string `json:"user"`
	Password string `json:"password"`
	// ConsoleUser and ConsolePassword are the web console's credentials
	// (harness.ConsoleUser), which harness console --data DIR connects
	// with: they may do only what the console needs.
	ConsoleUser     string `json:"console_user,omitempty"`
	ConsolePassword string `json:"console_password,omitempty"`
	PID             int    `json:"pid"`
}

// advertise writes DIR/server.json for cl, and for a TCP listener
// DIR/nats.env, the same credentials as environment variables the nats
// and harness command lines read (NATS_URL, NATS_USER, NATS_PASSWORD).
// The returned func removes them.
func advertise(dir string, cl *harness.Cluster) func() {
	user, password := cl.Credentials()
	cuser, cpassword := cl.ConsoleCredentials()
	sf := serverFile{URL: cl.URL(), Socket: cl.Socket(), User: user, Password: password, ConsoleUser: cuser, ConsolePassword: cpassword, PID: os.Getpid()}
	if sf.URL == "" && sf.Socket == "" {
		return func() {}
	}
	path := filepath.Join(dir, "server.json")
	data, _ := json.Marshal(sf)
	if err := writePrivate(path, data); err != nil {
		return func() {}
	}
	paths := []string{path}
	if sf.URL != "" {
		envPath := filepath.Join(dir, "nats.env")
		env := fmt.Sprintf("NATS_URL=%s\nNATS_USER=%s\nNATS_PASSWORD=%s\n", sf.URL, user, password)
		if writePrivate(envPath, []byte(env)) == nil {
			paths = append(paths, envPath)
		}
	}
	return func() {
		// Only if still ours: another process on this directory may have
		// written its own since (and then nats.env with it).
		if b, err := os.ReadFile(path); err != nil || string(b) != string(data) {
			return
		}
		for _, p := range paths {
			_ = os.Remove(p)
		}
	}
}

// writePrivate writes data to path readable by this user alone, replacing
// any file there.
func writePrivate(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // an older tmp file keeps its mode
		return err
	}
	return os.Rename(tmp, path)
}

// readServerFile reads DIR/server.json; ok is false when there is none.
func readServerFile(dir string) (serverFile, bool) {
	var sf serverFile
	data, err := os.ReadFile(filepath.Join(dir, "server.json"))
	if err != nil || json.Unmarshal(data, &sf) != nil || (sf.URL == "" && sf.Socket == "") {
		return serverFile{}, false
	}
	return sf, true
}

// sameURL reports whether two NATS URLs name the same server: equal once
// a missing scheme is taken as nats://, or the first of a list of URLs.
func sameURL(a, b string) bool {
	norm := func(u string) string {
		u, _, _ = strings.Cut(u, ",")
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		return strings.TrimSuffix(u, "/")
	}
	return a != "" && norm(a) == norm(b)
}

// natsAuth returns the credentials a command connects to a cluster with:
// its flags, else the environment.
func natsAuth(env *environ) (streams.Auth, []nats.Option, error) {
	f := env.nats
	if f == nil {
		f = streams.AuthFlags(flag.NewFlagSet("", flag.ContinueOnError), env.getenv)
	}
	auth, err := f.Auth()
	if err != nil {
		return streams.Auth{}, nil, err
	}
	opts, err := auth.Options()
	return auth, opts, err
}

// client connects to the cluster a command talks to: --nats or $NATS_URL if
// given; else the harness process serving the data directory, if one is
// up; else an embedded server opened on the data directory itself. The
// returned close releases what was opened.
func client(ctx context.Context, env *environ, natsURL, dir string) (*harness.Client, func(), error) {
	c, closeFn, _, err := clientFor(ctx, env, natsURL, dir)
	return c, closeFn, err
}

// clientFor is client, and also says whether it opened the data directory's
// store itself (no cluster is serving it).
func clientFor(ctx context.Context, env *environ, natsURL, dir string) (*harness.Client, func(), bool, error) {
	if natsURL == "" {
		natsURL = env.getenv("NATS_URL")
	}
	if natsURL != "" {
		auth, opts, err := natsAuth(env)
		if err != nil {
			return nil, nil, false, err
		}
		if sf, ok := readServerFile(dir); ok && auth.User == "" && auth.CredsFile == "" && auth.NKeyFile == "" && sameURL(sf.URL, natsURL) {
			// The harness process serving the data directory, named by its
			// URL: its credentials are beside it.
			auth = streams.Auth{User: sf.User, Password: sf.Password}
			if opts, err = auth.Options(); err != nil {
				return nil, nil, false, err
			}
		}
		opts = append([]nats.Option{nats.Name("harness-client"), nats.MaxReconnects(-1), nats.Timeout(5 * time.Second)}, opts...)
		nc, err := nats.Connect(natsURL, opts...)
		if err != nil {
			// Which credentials were refused, or which TLS flag to set;
			// never the password.
			return nil, nil, false, auth.ExplainConnect(streams.Redact(natsURL), err)
		}
		c, err := harness.NewClient(ctx, nc)
		if err != nil {
			nc.Close()
			return nil, nil, false, err
		}
		return c, nc.Close, false, nil
	}
	if sf, ok := readServerFile(dir); ok {
		var c *harness.Client
		var err error
		if sf.Socket != "" {
			c, err = harness.DialSocket(ctx, sf.Socket, sf.User, sf.Password, nats.Timeout(2*time.Second), nats.MaxReconnects(0))
		} else {
			c, err = harness.Connect(ctx, sf.URL, nats.UserInfo(sf.User, sf.Password), nats.Timeout(2*time.Second), nats.MaxReconnects(0))
		}
		if err == nil {
			return c, c.Close, false, nil
		}
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, nil, false, fmt.Errorf("the harness process serving %s refused the credentials in its server.json: %w", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		return nil, nil, false, fmt.Errorf("no harness data in %s and no cluster to ask (set NATS_URL or pass --nats, or --data DIR)", dir)
	}
	c, err := harness.Open(ctx, dir)
	if err != nil {
		return nil, nil, false, err
	}
	return c, c.Close, true, nil
}
