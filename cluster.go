package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/worker"
)

// Config configures an embedded cluster. The zero value is not enough: a
// Provider is required.
type Config struct {
	// DataDir holds the JetStream store (the trace, the run index, the
	// blobs). Default DefaultDataDir().
	DataDir string
	// Listen is the host:port NATS listens on for other processes; "" for
	// none (in-process connections only). Port 0 picks a free port. Every
	// connection must authenticate: as OperatorUser, with the password
	// Cluster.Credentials returns, made afresh at every start.
	Listen string
	// Socket is the path of a unix socket NATS is served on for other
	// processes of this user, authenticated as on Listen, with no TCP port
	// at all; "" for none. harness run serves its data directory this way,
	// so nothing a sandboxed command can dial reaches the cluster.
	Socket string
	// Provider answers the worker's step tasks. Required.
	Provider worker.Provider
	// Roots are the directories whose workspaces the sandboxer serves;
	// default the working directory.
	Roots []string
	// Backends run the sandboxer's commands, best first; default the
	// floor alone, which runs nothing without AllowFloor.
	Backends []sandbox.Backend
	// AllowFloor lets the sandboxer run commands on the floor backend:
	// unsandboxed, as this process's user. Without it a contract naming
	// "floor", or one whose "auto" finds nothing better among Backends, is
	// refused before its first step. Default false.
	AllowFloor bool
	// AllowPermissive lets a contract's policy allow every command or
	// connection by default; without it such a contract is refused before
	// its first step. Default false.
	AllowPermissive bool
	// MissingBackends says, by name, why a backend the caller wanted is
	// not among Backends, for the refusals that name what is missing.
	MissingBackends map[string]string
	// Tools are what the sandboxer offers the model; default
	// tools.Builtins() (tools.BuiltinsWithImages() adds view_image). The
	// git tools (tools.Git()) are offered beside them for a workspace that
	// is a git repository.
	Tools *tools.Set
	// WorkerTools are tools of an embedder's that need no workspace,
	// served by the embedded worker to the runs whose contracts name them
	// (worker.Config.Tools).
	WorkerTools []tools.Tool
	// Prices prices each provider call in the trace; default none.
	Prices ledger.Prices
	// Ledger is the budget ledger the coordinator draws on; default one in
	// memory, rebuilt from the trace after a restart.
	Ledger ledger.Ledger
	// Approver answers what the policy asks a person; default durable: the
	// run pauses until someone decides with Client.Decide.
	Approver coordinator.Approver
	// MaxRuns is how many runs the coordinator works on at once (a run
	// waiting on a model, a person, a sub-agent or a timer takes none);
	// default 64.
	MaxRuns int
	// Concurrency is how many provider calls the worker makes at once;
	// default worker.DefaultConcurrency (256).
	Concurrency int
	// Retention is how long a finished run is kept (its trace, index
	// entry, approvals and cancel); default coordinator.DefaultRetention,
	// 30 days; negative keeps runs for ever.
	Retention time.Duration
	// NoTakeover keeps the coordinator to the runs submitted to it and
	// resumed through Cluster.Resume, instead of also taking over every
	// run whose coordinator is gone (which `harness up` does).
	NoTakeover bool
	// SyncInterval is how often JetStream flushes to disk; 0 (the default)
	// means every write is synced before it is acknowledged, so an
	// acknowledged step survives the machine losing power.
	SyncInterval time.Duration
	// MetricsListen is the host:port the cluster serves Prometheus
	// metrics on, at /metrics (port 0 picks a free one): each role's from
	// its own registry, and the process's. "" serves none; Cluster.Metrics
	// gathers them all the same.
	MetricsListen string
	// Logger receives the roles' logs; default discards them.
	Logger *slog.Logger
}

// DefaultDataDir is where the CLI and the Go API keep their data when told
// nothing else: $XDG_DATA_HOME/harness, or ~/.local/share/harness.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "harness")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "harness")
	}
	return filepath.Join(home, ".local", "share", "harness")
}

// Cluster is a whole harness cluster in one process: a NATS server with
// JetStream and one coordinator, worker and sandboxer, each on its own
// in-process connection. It is the same code as a cluster of many
// processes.
type Cluster struct {
	*Client
	srv      *server.Server
	creds    credentials
	sock     *socketProxy // nil without Config.Socket
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	coCancel context.CancelFunc
	coWG     sync.WaitGroup
	conns    []*nats.Conn

	lock    *dirLock // the data directory's, until Close
	regs    registries
	metrics *metrics.Server // nil without MetricsListen

	mu   sync.Mutex
	errs []error
	once sync.Once
}

// Start starts an embedded cluster. Errors: no provider, a data directory
// that cannot be used, or a server or role that does not start.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Provider == nil {
		return nil, errors.New("harness: no provider: pass one in Config.Provider")
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	creds := newCredentials()
	opts, err := serverOptions(cfg.DataDir, cfg.Listen, cfg.SyncInterval)
	if err != nil {
		return nil, err
	}
	opts.Users = creds.users()
	if err := listenFree(cfg.Listen); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(opts)
	if err != nil {
		lock.release()
		return nil, err
	}
	c := &Cluster{srv: srv, creds: creds, regs: newRegistries(), lock: lock}
	connect := func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name(name), creds.option(name))
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", name, err)
		}
		c.conns = append(c.conns, nc)
		return nc, nil
	}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	cnc, err := connect("harness-client")
	if err != nil {
		return fail(err)
	}
	if c.Client, err = NewClient(ctx, cnc); err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel

	nc, err := connect("harness-coordinator")
	if err != nil {
		return fail(err)
	}
	co, err := coordinator.New(nc, coordinator.Config{Logger: cfg.Logger, NoTakeover: cfg.NoTakeover, Approver: cfg.Approver, Prices: cfg.Prices,
		Ledger: cfg.Ledger, Metrics: c.regs.coordinator, Retention: cfg.Retention, MaxRuns: cfg.MaxRuns})
	if err != nil {
		return fail(err)
	}
	if nc, err = connect("harness-worker"); err != nil {
		return fail(err)
	}
	wk, err := worker.New(nc, cfg.Provider, worker.Config{Logger: cfg.Logger, Metrics: c.regs.worker, Concurrency: cfg.Concurrency, Tools: cfg.WorkerTools})
	if err != nil {
		return fail(err)
	}
	if nc, err = connect("harness-sandboxer"); err != nil {
		return fail(err)
	}
	// The sandboxer's id is the same in every process on this data
	// directory, so a resumed run finds the snapshot workspace it left.
	sb, err := sandboxer.New(nc, sandboxer.Config{ID: "sandboxer-local", Roots: cfg.Roots, Reserved: append(Reserved(cfg.DataDir), cfg.Socket), Backends: cfg.Backends, Logger: cfg.Logger, Ops: c.assets.Ops, Tools: cfg.Tools,
		AllowFloor: cfg.AllowFloor, AllowPermissive: cfg.AllowPermissive, Missing: cfg.MissingBackends,
		Workspaces: c.assets.Workspaces, SnapshotDir: filepath.Join(cfg.DataDir, "snapshots"), Metrics: c.regs.sandboxer})
	if err != nil {
		return fail(err)
	}
	roles := []interface {
		Run(context.Context) error
		Ready() <-chan struct{}
	}{sb, wk, co}
	ended := make([]chan error, len(roles))
	cctx, ccancel := context.WithCancel(rctx)
	c.coCancel = ccancel
	for i, role := range roles {
		ended[i] = make(chan error, 1)
		wg, rctx := &c.wg, rctx
		if _, ok := role.(*coordinator.Coordinator); ok {
			wg, rctx = &c.coWG, cctx
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := role.Run(rctx)
			ended[i] <- err
			// An error after Close began is the role being stopped.
			if err != nil && rctx.Err() == nil {
				c.mu.Lock()
				c.errs = append(c.errs, err)
				c.mu.Unlock()
				cfg.Logger.Error("role stopped", "err", err)
			}
		}()
	}
	// Start returns once every role serves, so a request made right after
	// it (a resume, a cancel, a decision over NATS) finds its endpoint.
	for i, role := range roles {
		select {
		case <-role.Ready():
		case err := <-ended[i]:
			return fail(fmt.Errorf("a role did not start: %w", cmp.Or(err, errors.New("it stopped"))))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	if cfg.MetricsListen != "" {
		if c.metrics, err = metrics.Listen(cfg.MetricsListen, c.Metrics()); err != nil {
			return fail(err)
		}
		c.metrics.SetReady(func() error {
			for _, nc := range c.conns {
				if !nc.IsConnected() {
					return fmt.Errorf("the in-process connection %s is %s", nc.Opts.Name, nc.Status())
				}
			}
			return nil
		})
	}
	if cfg.Socket != "" {
		if c.sock, err = serveSocket(cfg.Socket, srv); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// Reserved are the parts of the data directory dataDir no workspace may
// be, lie in or contain: the store, the credentials, the socket. Its
// workspaces/ directory, where harness run --copy puts a private copy, is
// not among them.
func Reserved(dataDir string) []string {
	r := []string{filepath.Join(dataDir, "jetstream"), filepath.Join(dataDir, "server.json"), filepath.Join(dataDir, "nats.env"), filepath.Join(dataDir, "lock")}
	return append(r, SocketPath(dataDir))
}

// Open opens the store of a data directory in this process, with no role
// running, and returns a client on it: for reading runs, their traces and
// their approvals, and recording decisions, while no harness process
// serves the directory (its coordinators carry decided runs on when one
// starts; Resume carries one on at once). Close shuts the store. Errors:
// the directory cannot be used.
//
// Open the directory of a live harness process through that process
// instead (DialSocket, Connect): two servers on one store would corrupt
// it.
func Open(ctx context.Context, dataDir string) (*Client, error) {
	opts, err := serverOptions(dataDir, "", 0)
	if err != nil {
		return nil, err
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(opts)
	if err != nil {
		lock.release()
		return nil, err
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("harness-client"))
	if err != nil {
		srv.Shutdown()
		lock.release()
		return nil, fmt.Errorf("connect to the store of %s: %w", dataDir, err)
	}
	c, err := NewClient(ctx, nc)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		lock.release()
		return nil, err
	}
	c.own = true
	c.onClose = func() { srv.Shutdown(); srv.WaitForShutdown(); lock.release() }
	return c, nil
}

// serverOptions are the options of an embedded server on the data
// directory dir: JetStream on dir/jetstream, no network listener when
// listen is "" (else host:port, port 0 for a free one), every write synced
// when syncInterval is 0.
func serverOptions(dir, listen string, syncInterval time.Duration) (*server.Options, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	opts := &server.Options{
		ServerName: "harness",
		JetStream:  true,
		StoreDir:   filepath.Join(dir, "jetstream"),
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
	}
	if syncInterval == 0 {
		opts.SyncAlways = true
	} else {
		opts.SyncInterval = syncInterval
	}
	if listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("listen address %q: %w", listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	return opts, nil
}

func startServer(opts *server.Options) (*server.Server, error) {
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server did not become ready in 10s")
	}
	return srv, nil
}

// URL is the NATS URL other processes connect to, or "" without a
// listener.
func (c *Cluster) URL() string {
	if c.srv == nil || c.srv.Addr() == nil {
		return ""
	}
	return c.srv.ClientURL()
}

// Credentials returns the user and password other processes authenticate
// with on the cluster's listener and socket. Keep the password from logs
// and from anything a sandboxed command can read.
func (c *Cluster) Credentials() (user, password string) {
	return OperatorUser, c.creds.passwords[OperatorUser]
}

// ConsoleCredentials returns the user and password of the web console
// (ConsoleUser) on the cluster's listener and socket: a user that may do
// only what ConsolePermissions lists, made afresh at every start like the
// operator's.
func (c *Cluster) ConsoleCredentials() (user, password string) {
	return ConsoleUser, c.creds.passwords[ConsoleUser]
}

// ConsoleClient connects a client in-process as the console's user
// (ConsoleUser), bound to the cluster's streams (BindClient): what
// `harness up --console` serves the console with. The caller closes it.
// Errors: the connection or the binding failed.
func (c *Cluster) ConsoleClient(ctx context.Context) (*Client, error) {
	nc, err := nats.Connect("", nats.InProcessServer(c.srv), nats.Name("harness-console"), c.creds.option(ConsoleUser),
		nats.CustomInboxPrefix("_INBOX."+ConsoleUser))
	if err != nil {
		return nil, fmt.Errorf("connect the console: %w", err)
	}
	cl, err := BindClient(ctx, nc, 0)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cl.own = true
	return cl, nil
}

// Socket returns the path of the unix socket the cluster serves NATS on,
// or "" without one.
func (c *Cluster) Socket() string {
	if c.sock == nil {
		return ""
	}
	return c.sock.path
}

// Server returns the embedded NATS server.
func (c *Cluster) Server() *server.Server { return c.srv }

// Close stops the roles (runs in hand stop at a step boundary and stay
// running in the trace, to be picked up again), then the server. It
// returns the roles' errors, if any.
func (c *Cluster) Close() error {
	c.once.Do(func() {
		if c.coCancel != nil {
			c.coCancel()
			c.coWG.Wait()
		}
		if c.cancel != nil {
			c.cancel()
		}
		c.wg.Wait()
		if c.metrics != nil {
			_ = c.metrics.Close()
		}
		if c.sock != nil {
			c.sock.Close()
		}
		for _, nc := range c.conns {
			nc.Close()
		}
		if c.srv != nil {
			c.srv.Shutdown()
			c.srv.WaitForShutdown()
		}
		c.lock.release() // the store is closed: another process may open it
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}
