package harness

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// OperatorUser is the NATS user of the operator's connections to an
// embedded cluster: the harness and nats command lines, through its TCP
// listener or its unix socket. Its password is made afresh at every start
// (Cluster.Credentials) and is never logged.
const OperatorUser = "admin"

// credentials are the users of an embedded server: one per in-process
// role, whose password never leaves this process's memory, and the
// operator's. A command the sandboxer runs cannot present any of them, so
// it cannot connect at all: not to submit, not to decide an approval.
type credentials struct {
	passwords map[string]string // by user
}

// inProcessUsers are the users of the in-process connections.
var inProcessUsers = []string{"harness-client", "harness-coordinator", "harness-worker", "harness-sandboxer"}

// ConsoleUser is the NATS user the web console connects as: to an
// embedded cluster (Cluster.ConsoleClient, Cluster.ConsoleCredentials),
// and in deploy/nats/auth.conf. It may do exactly what ConsolePermissions
// lists, and nothing else.
const ConsoleUser = "console"

// ConsolePermissions returns what the console's user may publish and
// subscribe to: read the run index, the traces and their blobs, the
// approvals and the live events; ask the roles' micro services for their
// info and stats and the steps stream for its pools' queues; decide
// approvals (harness.decide.>) and cancel runs (harness.cancel.*). It
// creates nothing and writes no bucket directly: a decision and a cancel
// go through the coordinators, which check them. deploy/nats/auth.conf's
// console user has exactly these (a test compares them). Its replies come
// to _INBOX.console.
func ConsolePermissions() (publish, subscribe []string) {
	publish = []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.*",
		"$JS.API.STREAM.MSG.GET.HARNESS_TRACE", "$JS.API.DIRECT.GET.HARNESS_TRACE.>",
		"$JS.API.CONSUMER.CREATE.HARNESS_TRACE.>", "$JS.API.CONSUMER.MSG.NEXT.HARNESS_TRACE.>", "$JS.API.CONSUMER.DELETE.HARNESS_TRACE.>",
		"$JS.API.STREAM.MSG.GET.KV_harness-runs", "$JS.API.DIRECT.GET.KV_harness-runs.>",
		"$JS.API.CONSUMER.CREATE.KV_harness-runs.>", "$JS.API.CONSUMER.DELETE.KV_harness-runs.>", "$JS.FC.KV_harness-runs.>",
		"$JS.API.STREAM.MSG.GET.KV_harness-approvals", "$JS.API.DIRECT.GET.KV_harness-approvals.>",
		"$JS.API.CONSUMER.CREATE.KV_harness-approvals.>", "$JS.API.CONSUMER.DELETE.KV_harness-approvals.>", "$JS.FC.KV_harness-approvals.>",
		"$JS.API.STREAM.MSG.GET.OBJ_harness-blobs", "$JS.API.DIRECT.GET.OBJ_harness-blobs.>",
		"$JS.API.CONSUMER.CREATE.OBJ_harness-blobs.>", "$JS.API.CONSUMER.DELETE.OBJ_harness-blobs.>", "$JS.FC.OBJ_harness-blobs.>",
		"$JS.API.CONSUMER.LIST.HARNESS_STEPS", "$JS.API.CONSUMER.INFO.HARNESS_STEPS.*",
		"$SRV.INFO.harness-coordinator", "$SRV.INFO.harness-worker", "$SRV.INFO.harness-sandboxer",
		"$SRV.STATS.harness-coordinator", "$SRV.STATS.harness-worker", "$SRV.STATS.harness-sandboxer",
		"harness.coordinator.*.status",
		"harness.decide.>", "harness.cancel.*",
	}
	subscribe = []string{"_INBOX." + ConsoleUser + ".>", "harness.events.>"}
	return publish, subscribe
}

func newCredentials() credentials {
	c := credentials{passwords: make(map[string]string)}
	for _, u := range append([]string{OperatorUser, ConsoleUser}, inProcessUsers...) {
		c.passwords[u] = randomSecret()
	}
	return c
}

func (c credentials) users() []*server.User {
	users := make([]*server.User, 0, len(c.passwords))
	for u, p := range c.passwords {
		user := &server.User{Username: u, Password: p}
		if u == ConsoleUser {
			pub, sub := ConsolePermissions()
			user.Permissions = &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: pub},
				Subscribe: &server.SubjectPermission{Allow: sub},
			}
		}
		users = append(users, user)
	}
	return users
}

// option is the nats option that authenticates as user.
func (c credentials) option(user string) nats.Option {
	return nats.UserInfo(user, c.passwords[user])
}

// shortHash names a long path briefly.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

func randomSecret() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// socketProxy serves a NATS server on a unix socket: each connection
// accepted there is joined to an in-process connection of the server, so
// other processes of this user reach it with no TCP port open for anything
// else to dial. The server still authenticates every connection.
type socketProxy struct {
	path string
	ln   net.Listener
	srv  *server.Server
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

// maxSocketPath is the longest unix socket path Linux takes (sun_path is
// 108 bytes, one for the NUL).
const maxSocketPath = 107

// SocketPath returns where the unix socket of the data directory dir
// lives (Config.Socket): dir/nats.sock, or, when that path is too long for
// a socket, a name in the temporary directory made from dir's.
func SocketPath(dir string) string {
	p := filepath.Join(dir, "nats.sock")
	if len(p) <= maxSocketPath {
		return p
	}
	return filepath.Join(os.TempDir(), "harness-"+shortHash(dir)+".sock")
}

func serveSocket(path string, srv *server.Server) (*socketProxy, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("serve NATS on %s: a file that is not a socket is in the way", path)
		}
		// A socket a killed process left: nothing answers it any more.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("serve NATS on %s: another harness process serves this data directory", path)
		}
		_ = os.Remove(path)
	}
	// Only this user may connect: the socket is 0600, in the data
	// directory, itself 0700 (a socket in the temporary directory has only
	// its own mode).
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("serve NATS on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("serve NATS on %s: %w", path, err)
	}
	p := &socketProxy{path: path, ln: ln, srv: srv, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *socketProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		in, err := p.srv.InProcessConn()
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, in) {
			c.Close()
			in.Close()
			return
		}
		p.wg.Add(2)
		go p.pipe(c, in)
		go p.pipe(in, c)
	}
}

// pipe copies from src to dst until either ends, then closes both.
func (p *socketProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *socketProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// Close stops accepting, ends every joined connection, removes the socket
// and waits for the copies to end.
func (p *socketProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	_ = os.Remove(p.path)
}

// SocketDialer dials the unix socket of an embedded cluster whatever
// address the NATS client asks for; pass it with nats.SetCustomDialer and
// any URL.
type SocketDialer struct {
	// Path is the socket's path (Cluster.Socket).
	Path string
}

// Dial connects to the socket.
func (d SocketDialer) Dial(_, _ string) (net.Conn, error) {
	return net.DialTimeout("unix", d.Path, 5*time.Second)
}

// DialSocket connects a client to the embedded cluster serving the unix
// socket at path, as user with password. Errors: the socket does not
// answer, the credentials are refused, or JetStream is not available.
func DialSocket(ctx context.Context, path, user, password string, opts ...nats.Option) (*Client, error) {
	opts = append([]nats.Option{nats.SetCustomDialer(SocketDialer{Path: path}), nats.UserInfo(user, password)}, opts...)
	c, err := Connect(ctx, "nats://localhost", opts...)
	if err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) {
			return nil, fmt.Errorf("connect to the harness process at %s: %w", path, err)
		}
		return nil, err
	}
	return c, nil
}
