// Package testkit is what the module's tests share: an embedded NATS
// server with JetStream, a connection to it, and the one polling helper.
// Only tests and test-support packages import it.
//
// A test starts a server, connects and waits on a condition:
//
//	srv := testkit.NATS(t)
//	nc := testkit.Conn(t, srv)
//	testkit.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error { ... })
//
// Everything it starts stops when the test ends.
package testkit

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ready is how long NATS waits for a started server to take connections.
const ready = 10 * time.Second

// NATS starts an embedded nats-server with JetStream, its store in
// t.TempDir(), on no port (connect with Conn), without logs or signal
// handlers, and shuts it down when t ends, waiting until it has. opts
// change the options in order before the server starts: Config reads a
// configuration file, Listen gives the server a port. NATS fails t if the
// options are refused or the server is not ready within ten seconds.
func NATS(t testing.TB, opts ...func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true, NoLog: true, NoSigs: true}
	for _, opt := range opts {
		opt(o)
	}
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	srv.Start()
	if !srv.ReadyForConnections(ready) {
		t.Fatalf("nats server not ready for connections after %v", ready)
	}
	return srv
}

// Listen is an option of NATS that gives the server a free client port on
// 127.0.0.1, for a client that dials a URL (srv.ClientURL()).
func Listen(o *server.Options) {
	o.DontListen, o.Host, o.Port = false, "127.0.0.1", server.RANDOM_PORT
}

// Config returns an option of NATS that takes the settings of the
// configuration file at path, as nats-server -c does, in place of those
// before it, keeping what makes the server a test's: JetStream on with its
// store in t.TempDir(), no port (give one with Listen after it), no
// monitoring port, no logs and no signal handlers. Environment variables
// the file names must be set before Config is called. Config fails t if
// the file does not parse.
func Config(t testing.TB, path string) func(*server.Options) {
	t.Helper()
	file, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats config %s: %v", path, err)
	}
	return func(o *server.Options) {
		store := o.StoreDir
		*o = *file.Clone()
		o.JetStream, o.StoreDir, o.DontListen, o.HTTPPort, o.NoLog, o.NoSigs = true, store, true, 0, true, true
	}
}

// Conn connects to srv in-process and closes the connection when t ends.
// It fails t if the connection is refused.
func Conn(t testing.TB, srv *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("", append([]nats.Option{nats.InProcessServer(srv)}, opts...)...)
	if err != nil {
		t.Fatalf("connect to the nats server in-process: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// CheckFor calls f every poll until it returns nil, and fails t with f's
// last error once wait has passed (nats-server's checkFor).
func CheckFor(t testing.TB, wait, poll time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", wait, err)
			return
		}
		time.Sleep(poll)
	}
}

// Until checks cond every ten milliseconds until it holds, and fails t
// once wait has passed. Prefer CheckFor when the failure can say what was
// seen.
func Until(t testing.TB, wait time.Duration, cond func() bool) {
	t.Helper()
	CheckFor(t, wait, 10*time.Millisecond, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = errors.New("the condition does not hold")
