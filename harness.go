package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/worker"
)

// Option configures Run.
type Option func(*Config, *runOptions)

type runOptions struct {
	observer func(*protocol.Event)
	id       string
	policy   *protocol.Policy
}

// WithProvider sets the provider that answers the agent's turns. Required.
func WithProvider(p worker.Provider) Option { return func(c *Config, _ *runOptions) { c.Provider = p } }

// WithObserver calls fn for every live event of the run, in order, on one
// goroutine. A slow observer does not slow the run.
func WithObserver(fn func(*protocol.Event)) Option {
	return func(_ *Config, o *runOptions) { o.observer = fn }
}

// WithDataDir sets the data directory that keeps the trace; default
// DefaultDataDir().
func WithDataDir(dir string) Option { return func(c *Config, _ *runOptions) { c.DataDir = dir } }

// WithLogger sends the roles' logs to l.
func WithLogger(l *slog.Logger) Option { return func(c *Config, _ *runOptions) { c.Logger = l } }

// WithBackends sets the sandbox backends, best first; default the floor,
// which runs nothing without WithAllowFloor.
func WithBackends(b ...sandbox.Backend) Option {
	return func(c *Config, _ *runOptions) { c.Backends = b }
}

// WithAllowFloor lets the sandboxer run commands on the floor backend:
// unsandboxed, as this process's user, seeing what it sees. It is the
// caller's choice as the operator, never a contract's; without it a
// contract naming "floor" is refused, and so is a command that would have
// to fall back to it.
func WithAllowFloor() Option { return func(c *Config, _ *runOptions) { c.AllowFloor = true } }

// WithApprover sets who answers what the policy asks a person; default
// durable: the run pauses with outcome awaiting_approval until a decision
// is recorded (Client.Decide, `harness approve`).
func WithApprover(a coordinator.Approver) Option {
	return func(c *Config, _ *runOptions) { c.Approver = a }
}

// WithPolicy makes Resume carry the run on under this policy instead of the
// one it was started with, and records it in the trace as the run's policy.
func WithPolicy(p *protocol.Policy) Option { return func(_ *Config, o *runOptions) { o.policy = p } }

// WithRunID sets the run's idempotency key, and so its id; default a fresh
// one. Running again with the same id reports that run's outcome.
func WithRunID(id string) Option { return func(_ *Config, o *runOptions) { o.id = id } }

// Run runs one contract to its outcome on the embedded default: a NATS
// server with JetStream on the data directory and one coordinator, worker
// and sandboxer in this process. A relative workspace root is taken from
// the working directory, and the sandboxer serves that workspace only.
//
// Errors: a *protocol.Error for a contract that does not validate (nothing
// runs); a cluster that does not start; the context ending before the run
// does (the run stays in the trace and can be resumed). An outcome other
// than success is not an error: read Result.Outcome.
func Run(ctx context.Context, contract *protocol.Contract, opts ...Option) (*protocol.Result, error) {
	var cfg Config
	var ro runOptions
	for _, o := range opts {
		o(&cfg, &ro)
	}
	c := *contract
	if c.Schema == "" {
		c.Schema = protocol.ContractSchema
	}
	root, err := filepath.Abs(c.Workspace.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	c.Workspace.Root = root
	cfg.Roots = []string{root}
	cfg.NoTakeover = true
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode contract: %w", err)
	}
	if _, err := protocol.DecodeContract(data); err != nil {
		return nil, err
	}
	cl, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.RunContract(ctx, data, ro.id, ro.observer)
}

// Resume carries on a run of the data directory whose process was killed
// or interrupted, from the step after its last committed one, on the
// embedded default, and returns its outcome. The sandboxer serves the
// run's own workspace. A finished run reports its outcome without calling
// the provider.
//
// Errors: protocol.ErrUnknownRun for a run the data directory does not
// hold; protocol.ErrFenced while another live process drives it; a damaged
// or too-new trace as a *protocol.Error.
func Resume(ctx context.Context, run string, opts ...Option) (*protocol.Result, error) {
	return resumeEmbedded(ctx, run, opts, func(cl *Cluster, pol *protocol.Policy) (*protocol.Result, error) {
		return cl.ResumeWith(ctx, run, pol)
	})
}

// resumeEmbedded starts the embedded default on the data directory the
// options name, serving run's own workspace, watches run for the options'
// observer, and carries the run on with carry.
func resumeEmbedded(ctx context.Context, run string, opts []Option, carry func(*Cluster, *protocol.Policy) (*protocol.Result, error)) (*protocol.Result, error) {
	var cfg Config
	var ro runOptions
	for _, o := range opts {
		o(&cfg, &ro)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	c, err := ContractOf(ctx, cfg.DataDir, run)
	if err != nil {
		return nil, err
	}
	cfg.Roots = []string{c.Workspace.Root}
	cfg.NoTakeover = true
	cl, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if ro.observer != nil {
		stop, err := cl.Watch(run, ro.observer)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	return carry(cl, ro.policy)
}

// ContractOf reads the contract a run of the data directory was started
// with, from its trace. Errors: as Client.Trace.
func ContractOf(ctx context.Context, dataDir, run string) (*protocol.Contract, error) {
	srv, err := StartServer(dataDir, "", 0)
	if err != nil {
		return nil, err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	cl, err := Connect(ctx, "", nats.InProcessServer(srv))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	recs, _, err := cl.trace.Read(ctx, run)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || recs[0].Contract == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "no run %s in %s", run, dataDir)
	}
	return recs[0].Contract, nil
}

// RunContract submits an encoded contract to the cluster, delivers its
// events to observer (nil for none) in order, and waits for its outcome.
// Errors: as Client.Submit and Client.Wait.
func (c *Client) RunContract(ctx context.Context, contract []byte, id string, observer func(*protocol.Event)) (*protocol.Result, error) {
	if id == "" {
		id = NewRunID()
	}
	run := protocol.RunIDFor(id)
	if observer != nil {
		events := make(chan *protocol.Event, 1024)
		quit, done := make(chan struct{}), make(chan struct{})
		stop, err := c.Watch(run, func(ev *protocol.Event) {
			select {
			case events <- ev:
			case <-quit:
			default: // a stalled observer loses events, never the run
			}
		})
		if err != nil {
			return nil, err
		}
		go func() {
			defer close(done)
			for {
				select {
				case ev := <-events:
					observer(ev)
				case <-quit:
					for {
						select {
						case ev := <-events:
							observer(ev)
						default:
							return
						}
					}
				}
			}
		}()
		defer func() {
			_ = c.nc.Flush()
			stop()
			close(quit)
			<-done
		}()
	}
	if _, err := c.Submit(ctx, contract, id); err != nil {
		return nil, err
	}
	return c.Wait(ctx, run)
}
