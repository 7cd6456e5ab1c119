// Package sandboxer holds workspaces for harness. A sandboxer answers
// harness.sandbox.open for the workspace roots it is configured to serve,
// then takes a run's operations on its own subject
// (harness.sandbox.<node>.op): tool calls, run by the tools package inside
// the workspace, and the contract's verification, run inside a sandbox.
// It also holds the run's MCP servers (mcp.go): a stdio server started in
// the run's sandbox, an HTTP server dialled under the policy's net rules,
// their tools offered as mcp__<server>__<tool>, one session per agent
// tree, closed with the tree's last run.
//
// It resolves every path itself, whatever the coordinator decided: a path
// that climbs out of the workspace, is absolute, or resolves through a
// symlink to outside is refused here, and a path is judged by the run's
// policy on its name and on every link target along its resolution,
// strictest wins. It serves no workspace that is /, a system directory or
// the data directory, runs nothing on the floor backend unless its
// operator allows it (Config.AllowFloor), and refuses a contract whose
// policy allows every command by default unless its operator allows that
// (Config.AllowPermissive). Each operation carries an op id, and an
// operation repeated with the same id is answered from the first result
// instead of running again.
//
// Sandboxers hold workspaces and sandboxes, never provider keys or run
// state. To embed (with your own tools, say): connect to NATS, then New and
// Run.
package sandboxer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/documents"
	_ "github.com/ioharness/harness/pkg/documents/formats" // the formats the build tags ask for
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/wire"
)

// Config configures a sandboxer. The zero value means the defaults.
type Config struct {
	// ID names the node; its operations subject is harness.sandbox.<ID>.op.
	// Default "sandboxer-<random>".
	ID string
	// Roots are the directories whose workspaces this node serves: a
	// workspace must be one of them or lie beneath one. Default: the
	// working directory.
	Roots []string
	// Base is what a relative workspace root is resolved against; default
	// the first root.
	Base string
	// Reserved are directories no workspace may be, lie in or contain,
	// whatever Roots say: the data directory of the process (its trace
	// store, its credentials). The file system's root and the system
	// directories are always refused (see RefuseRoot), and so are the
	// directories of the programs a backend runs outside every sandbox
	// (sandbox.ProgramRunner: the native backend's harness-sandbox-init).
	Reserved []string
	// MaxConcurrent bounds the operations running at once that run
	// commands or servers or unpack archives (tool calls, verifications,
	// collections, and opens that start MCP servers or materialise a
	// snapshot); default 4. A plain open or a close takes no slot: a new
	// run's workspace opens while other runs' commands hold them all. Nor
	// does a call of a file tool (tools.InProcess) or a skill's read: a
	// run reads and edits while other runs' commands hold them all.
	MaxConcurrent int
	// MaxQueued bounds the operations admitted beyond the MaxConcurrent
	// running; default 16 times MaxConcurrent. Operations come on a NATS
	// subscription that delivers them one at a time, so the sandboxer
	// never waits there for a slot (every later operation, repeats
	// included, would wait behind it): an operation beyond
	// MaxConcurrent+MaxQueued is left unanswered, and its coordinator,
	// which asks again while an operation is unanswered, sends it again
	// later; an open is answered at once with a retryable unavailable,
	// which its coordinator asks again after a short backoff. A repeat of
	// an operation admitted here takes no place.
	MaxQueued int
	// Drain is how long Run, once its context ends, lets the operations in
	// flight finish (and answers them) before it cuts them off; it takes
	// no new one meanwhile. 0 cuts them off at once. The sandboxer binary
	// drains for 30 s on SIGTERM.
	Drain time.Duration
	// Backends run commands, best first: a contract's "auto" takes the
	// first that isolates its commands, a named backend ("native",
	// "docker", "floor") the one of that name. Default: the floor alone,
	// which runs nothing unless AllowFloor is set.
	Backends []sandbox.Backend
	// AllowFloor lets commands run on the floor backend: a plain child
	// process of the sandboxer, as its own user, with no isolation (it can
	// read what the sandboxer can, its environment and /proc included).
	// It is the operator's choice, never a contract's: without it a
	// contract naming "floor", or one whose "auto" would fall back to the
	// floor, is refused when its workspace opens, saying why. Default
	// false.
	AllowFloor bool
	// AllowPermissive lets a contract's policy allow every command or
	// every connection by default (defaults.exec or defaults.net
	// "allow"). Without it such a contract is refused when its workspace
	// opens: what may run is the contract's to list, rule by rule, and a
	// blanket allow is the operator's to permit. Default false.
	AllowPermissive bool
	// Missing says, by backend name, why a backend the operator asked for
	// is not among Backends (internal/backends.Probe's reasons), so a
	// refusal can say what this node lacks. Optional.
	Missing map[string]string
	// Tools are the tools offered; default tools.Builtins().
	Tools *tools.Set
	// GitTools are offered beside Tools for a workspace that is a git
	// repository of its own: a root workspace with a .git directory at its
	// root, or a snapshot that carried one (not one the harness made for
	// workspace.commit). A name Tools has already is not offered twice.
	// Default tools.Git(); an empty set (tools.NewSet()) offers none.
	GitTools *tools.Set
	// CmdEnv is the whole environment commands see; default
	// sandbox.MinimalEnv(). The sandboxer's own environment never leaks.
	CmdEnv []string
	// RememberOps is how many completed op results are kept in memory to
	// answer a repeated op id; default 4096.
	RememberOps int
	// Ops, when set, keeps every operation's start and result in a
	// key-value bucket, so a repeated op id is answered from its first
	// result even after this node restarts, and a tool call the node died
	// under is reported as indeterminate instead of run again.
	Ops jetstream.KeyValue
	// Workspaces is the object store of snapshots and patches
	// (harness-workspaces). With it the node also serves snapshot
	// workspaces: it takes opens on harness.sandbox.snapshot, materialises
	// the snapshot, and when the run ends stores its changes as a patch.
	// Without it, only Roots are served.
	Workspaces jetstream.ObjectStore
	// SnapshotDir is where snapshot workspaces are materialised, one
	// directory per run; default $TMPDIR/harness-snapshots-<ID>. A root
	// workspace that reaches into it, or contains it, is refused.
	SnapshotDir string
	// SnapshotLimits bound a snapshot this node materialises; zero fields
	// take the snapshot package's defaults (64 MiB compressed, 512 MiB
	// unpacked, 100000 entries).
	SnapshotLimits snapshot.Limits
	// KeepSnapshots keeps a materialised workspace after its run's changes
	// are collected, for inspection; by default the close that follows
	// removes it.
	KeepSnapshots bool
	// CommitAuthor and CommitEmail sign the commits a contract asks for
	// (workspace.commit, and a snapshot's first commit) when it names no
	// git.author; default "harness" and "harness@localhost". git_commit
	// signs with git.author alone.
	CommitAuthor, CommitEmail string
	// Metrics is the registry the sandboxer's Prometheus metrics are
	// registered on (operations, commands and their caps, snapshots; see
	// internal/metrics); default none: they are counted and not served.
	Metrics prometheus.Registerer
	// Logger receives structured logs; default discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.ID == "" {
		c.ID = "sandboxer-" + randomHex(4)
	}
	if len(c.Roots) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("sandboxer roots: %w", err)
		}
		c.Roots = []string{wd}
	}
	// A copy: the caller's slice stays as it gave it.
	roots := make([]string, len(c.Roots))
	for i, r := range c.Roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return fmt.Errorf("sandboxer root %q: %w", r, err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		roots[i] = abs
	}
	c.Roots = roots
	// The directories of the programs a backend runs outside every
	// sandbox (the native backend's init): a workspace holding one would
	// let an agent rewrite it.
	c.Reserved = append(slices.Clone(c.Reserved), ProgramDirs(c.Backends)...)
	reserved := make([]string, 0, len(c.Reserved))
	for _, r := range c.Reserved {
		if r == "" {
			continue // not a directory: made absolute it would be the working directory
		}
		abs, err := filepath.Abs(r)
		if err != nil {
			return fmt.Errorf("sandboxer reserved directory %q: %w", r, err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		reserved = append(reserved, abs)
	}
	c.Reserved = reserved
	if err := CheckRoots(c.Roots, c.Reserved); err != nil {
		return err
	}
	if c.Base == "" {
		c.Base = c.Roots[0]
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 4
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = 16 * c.MaxConcurrent
	}
	// Copies of the caller's slices and map, as of Roots and Reserved: a
	// caller that changes its own afterwards changes nothing here.
	c.Backends = slices.Clone(c.Backends)
	if len(c.Backends) == 0 {
		c.Backends = []sandbox.Backend{floor.New()}
	}
	c.Missing = maps.Clone(c.Missing)
	if c.Tools == nil {
		c.Tools = withDocuments(tools.Builtins())
	}
	if c.GitTools == nil {
		c.GitTools = tools.Git()
	}
	c.CmdEnv = slices.Clone(c.CmdEnv)
	if c.CmdEnv == nil {
		c.CmdEnv = sandbox.MinimalEnv()
	}
	if c.RememberOps == 0 {
		c.RememberOps = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c.snapshotDefaults()
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.ID != "" && !protocol.ValidToken(c.ID) {
		return fmt.Errorf("sandboxer id %q: use letters, digits, '-' and '_'", c.ID)
	}
	if c.MaxConcurrent < 0 {
		return errors.New("sandboxer: MaxConcurrent must not be negative")
	}
	if c.MaxQueued < 0 {
		return errors.New("sandboxer: MaxQueued must not be negative")
	}
	return nil
}

// Sandboxer serves workspace operations. Create it with New.
type Sandboxer struct {
	cfg Config
	nc  *nats.Conn
	log *slog.Logger
	// policies are the runs' policies, decoded and compiled once.
	policies policies
	// admitted holds a place for each operation with a goroutine, running
	// or waiting for a slot: MaxConcurrent+MaxQueued in all. slots holds
	// one for each running: MaxConcurrent.
	admitted chan struct{}
	slots    chan struct{}

	inflight  atomic.Int64
	failed    atomic.Int64  // operations answered with an error after their handler returned
	draining  atomic.Bool   // Run's context ended: nothing new, the operations in flight finish
	ready     chan struct{} // closed once Run serves
	readyOnce sync.Once
	wg        sync.WaitGroup
	stopMu    sync.Mutex // guards stopping and every wg.Add
	stopping  bool

	// snapLocks serialise materialising and removing one run's snapshot
	// workspace (different runs' go side by side: a burst of runs on one
	// snapshot fetches and unpacks it for each at once), skillsMu
	// unpacking and removing skills snapshots (a snapshot workspace's open
	// unpacks its run's skills holding its run's lock). The order is a
	// run's lock, skillsMu, mu: none is taken while a later one is held.
	snapLocks runLocks
	skillsMu  sync.Mutex
	m         *metrics.Sandboxer

	mu         sync.Mutex            // guards workspaces, byDir, skillSets, ops (and their entries' reply and waiters) and opOrder
	workspaces map[string]*workspace // by run
	byDir      map[string]*workspace // by directory: the one a new run on it joins
	skillSets  map[string]*skillSet  // the runs' skills snapshots, by run
	ops        map[string]*opEntry   // the op journal (journal.go)
	opOrder    []string

	running running // the operations in progress, by run, for OpStop

	mcp mcpSessions // the MCP sessions of the runs held here (mcp.go)
}

// New returns a sandboxer. It keeps copies of cfg's slices and map, so the
// caller's Config stays its own. Errors: an invalid Config or an unusable
// root.
func New(nc *nats.Conn, cfg Config) (*Sandboxer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Sandboxer{
		cfg:        cfg,
		nc:         nc,
		log:        cfg.Logger.With("sandboxer", cfg.ID),
		ready:      make(chan struct{}),
		admitted:   make(chan struct{}, cfg.MaxConcurrent+cfg.MaxQueued),
		slots:      make(chan struct{}, cfg.MaxConcurrent),
		workspaces: make(map[string]*workspace),
		byDir:      make(map[string]*workspace),
		skillSets:  make(map[string]*skillSet),
		ops:        make(map[string]*opEntry),
		// The opens' stamps go on from the clock rather than from one, so
		// a close naming an open of this node's last life never names one
		// of this life's (running.closing).
		running: running{next: uint64(time.Now().UnixNano())},
	}
	s.m = metrics.NewSandboxer(cfg.Metrics, s.openWorkspaces)
	return s, nil
}

// ID returns the node's id.
func (s *Sandboxer) ID() string { return s.cfg.ID }

// Run serves operations until ctx ends, then waits for those in flight.
// Errors: the micro service could not be set up.
func (s *Sandboxer) Run(ctx context.Context) error {
	// Operations run on a context of their own, which ends Drain after
	// ctx does (or at once without Drain), so a stopping node finishes
	// what it holds instead of cutting it off.
	ops, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        "harness-sandboxer",
		Version:     version.Semver(),
		Description: "workspaces, tools and sandboxed commands for harness runs",
		Metadata: map[string]string{"id": s.cfg.ID, "backends": strings.Join(s.backendNames(), ","), "roots": strings.Join(s.cfg.Roots, ":"),
			"tools": strings.Join(s.cfg.Tools.Names(), ","), "documents": strings.Join(documents.Tags(), ",")},
		StatsHandler: func(*micro.Endpoint) any {
			return map[string]any{"inflight": s.inflight.Load(), "capacity": s.cfg.MaxConcurrent, "backends": s.backendNames(), "draining": s.draining.Load(),
				"errors": s.failed.Load(), "workspaces": int(s.openWorkspaces())}
		},
	})
	if err != nil {
		return fmt.Errorf("register micro service: %w", err)
	}
	defer svc.Stop()
	// Every sandboxer hears every open and answers only for the roots it
	// serves, so the open must not go through a queue group.
	if err := svc.AddEndpoint("open", micro.HandlerFunc(func(r micro.Request) { s.handle(ops, r, true) }),
		micro.WithEndpointSubject(wire.SandboxOpenSubject), micro.WithEndpointQueueGroupDisabled()); err != nil {
		return fmt.Errorf("register open endpoint: %w", err)
	}
	if err := svc.AddEndpoint("op", micro.HandlerFunc(func(r micro.Request) { s.handle(ops, r, false) }),
		micro.WithEndpointSubject(wire.SandboxOps(s.cfg.ID))); err != nil {
		return fmt.Errorf("register op endpoint: %w", err)
	}
	if s.cfg.Workspaces != nil {
		// One sandboxer of the queue group takes each snapshot's open.
		if err := svc.AddEndpoint("snapshot", micro.HandlerFunc(func(r micro.Request) { s.handle(ops, r, false) }),
			micro.WithEndpointSubject(wire.SandboxSnapshotSubject)); err != nil {
			return fmt.Errorf("register snapshot endpoint: %w", err)
		}
	}
	// Containers a previous life of this node left behind go first, and
	// skills snapshots it unpacked (a run reading a skill unpacks its own
	// again).
	s.reconcile(ctx)
	s.closeAllSkills()

	s.log.Info("sandboxer started", "roots", s.cfg.Roots, "backends", s.backendNames())
	s.readyOnce.Do(func() { close(s.ready) })
	<-ctx.Done()
	if err := svc.Stop(); err != nil {
		s.log.Warn("stop micro service", "err", err)
	}
	// No operation may start once we wait for those in flight.
	s.stopMu.Lock()
	s.stopping = true
	s.stopMu.Unlock()
	s.draining.Store(true)
	drained := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(drained)
	}()
	t := time.NewTimer(s.cfg.Drain)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		if n := s.inflight.Load(); n > 0 {
			s.log.Warn("drain time is up; cutting off the operations in flight", "ops", n)
		}
		abandon()
		<-drained
	}
	// The servers go before the backends that hold them.
	s.closeAllMCP()
	s.closeBackends()
	s.closeWorkspaces()
	s.closeAllSkills()
	return nil
}

// handle takes one operation from the micro service. It runs on the
// goroutine of the endpoint's subscription, which delivers the endpoint's
// requests one at a time: whatever handle waited for, every request after
// this one would wait for too, repeats that could be answered at once
// included, and beyond the subscription's pending limits they would be
// dropped. So handle never waits. It decodes the operation, answers a
// repeat of an operation admitted here from that operation (at once, or
// when it ends), and gives a new one a goroutine of its own, where it
// waits for one of the MaxConcurrent slots if it takes one (slotted),
// only while fewer than MaxConcurrent+MaxQueued have one; beyond that the
// operation is left unanswered, and its coordinator asks again (an open
// is told at once to ask again).
func (s *Sandboxer) handle(ctx context.Context, r micro.Request, open bool) {
	op, ok := s.decode(r, open)
	if !ok {
		return
	}
	if op.Kind == protocol.OpStop {
		// At once, before any slot: the commands it stops may hold them.
		if n := s.running.stop(op.Run); n > 0 {
			s.log.Info("stopped the run's operations in progress", "run", op.Run, "ops", n)
		}
		s.respond(r, &protocol.SandboxReply{OpID: op.OpID})
		return
	}
	if op.Kind == protocol.OpClose && s.running.closingNow(op.Run) {
		// Asked again while the first waits for the run's operations:
		// that one carries the close out, and this one holds no place.
		s.respond(r, &protocol.SandboxReply{OpID: op.OpID})
		return
	}
	e, first := s.entry(op)
	if !first {
		// A repeat (its coordinator asked again, its first answer lost or
		// slow): no slot, no goroutine, no place among the admitted.
		s.await(r, e)
		return
	}
	select {
	case s.admitted <- struct{}{}:
	default:
		s.finish(op, e, nil) // not admitted: the next ask is a new op
		if op.Kind == protocol.OpOpen {
			// Said at once: the coordinator asks again after a short
			// backoff, where an open left unanswered waits out its
			// request (seconds) first, and so does its run.
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.Errorf(protocol.CodeUnavailable,
				"the sandboxer %s has %d operations running or waiting, its bound; ask again", s.cfg.ID, s.cfg.MaxConcurrent+s.cfg.MaxQueued)})
			return
		}
		s.log.Warn("too many operations waiting; this one is left for its coordinator to ask again",
			"run", op.Run, "op", op.OpID, "running", s.cfg.MaxConcurrent, "waiting", s.cfg.MaxQueued)
		return
	}
	s.stopMu.Lock()
	if s.stopping {
		s.stopMu.Unlock()
		<-s.admitted
		s.finish(op, e, nil)
		return
	}
	s.wg.Add(1)
	s.stopMu.Unlock()
	// Registered here, in the order the ops came, not once the op has a
	// slot: a close that came after it waits for it (serve).
	var ended func()
	var cl closing
	var stamp uint64
	if op.Kind == protocol.OpClose {
		var ok bool
		if cl, ok = s.running.closing(op.Run, op.Opened); !ok {
			// The close of an open that a later open of the run followed
			// here: the run is held again, by whoever opened it since.
			<-s.admitted
			s.wg.Done()
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID})
			return
		}
	} else {
		if op.Kind == protocol.OpOpen {
			stamp = s.running.opened(op.Run)
		}
		ended = s.running.admit(op.Run)
	}
	go s.serve(ctx, r, op, e, ended, cl, stamp)
}

// decode reads an operation, and for an open that came to every sandboxer
// (open) resolves its workspace root among the roots this node serves.
// It answers what it refuses, except an open of a root that is not ours,
// which another sandboxer may serve, and reports whether to go on.
func (s *Sandboxer) decode(r micro.Request, open bool) (*protocol.SandboxOp, bool) {
	// The policy is decoded on its own, from the cache of those decoded
	// before (policies): the field below hides the op's own.
	var in struct {
		protocol.SandboxOp
		Policy json.RawMessage `json:"policy,omitempty"`
	}
	err := wirejson.Unmarshal(r.Data(), &in)
	op := in.SandboxOp
	if err == nil {
		op.Policy, err = s.policies.decode(in.Policy)
	}
	if err != nil || op.OpID == "" || !protocol.ValidToken(op.Run) {
		s.respond(r, &protocol.SandboxReply{Error: protocol.Errorf(protocol.CodeMalformed, "undecodable sandbox operation")})
		return nil, false
	}
	if open {
		dir, err := s.resolveRoot(op.Workspace)
		if errors.Is(err, protocol.ErrWorkspaceRefused) {
			return nil, false // not ours: another sandboxer may serve it
		}
		if err != nil {
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.AsError(err)})
			return nil, false
		}
		op.Workspace = dir
	}
	if op.Kind == protocol.OpOpen {
		if kind := documentKind(op.Verification); kind != "" && !documents.Holds(kind) {
			if open {
				return nil, false // another sandboxer may read it
			}
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.FieldError(protocol.CodeUnsupported, "verification.document_contains",
				"start a sandboxer built with -tags "+kind+" (or -tags documents)", "the sandboxer %s cannot read %s documents", s.cfg.ID, kind)})
			return nil, false
		}
		if missing := s.cfg.Tools.Missing(op.Tools); len(missing) > 0 {
			if open {
				return nil, false // another sandboxer may have them
			}
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.FieldError(protocol.CodeUnsupported, "tools",
				"start a sandboxer built with them, or leave them out of the contract's tools", "the sandboxer %s offers no tool %s", s.cfg.ID, strings.Join(missing, ", "))})
			return nil, false
		}
		if err := s.admit(&op); err != nil {
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.AsError(err)})
			return nil, false
		}
	}
	return &op, true
}

// serve runs an admitted operation on its own goroutine, so that a long
// command does not hold up the others: it waits for a slot (a close
// first waits for the run's operations that came before it), runs the
// operation (a journaled one at most once, see durably), and answers it
// and the repeats that came meanwhile. ended, when not nil, is called
// once it is over; cl is, for a close, what it came to (running.closing);
// opened is, for an open, its stamp (running.opened), which its reply
// carries.
func (s *Sandboxer) serve(ctx context.Context, r micro.Request, op *protocol.SandboxOp, e *opEntry, ended func(), cl closing, opened uint64) {
	defer s.wg.Done()
	if ended != nil {
		// After the answer: a close of the run that waits for this op is
		// answered after it.
		defer ended()
	}
	// The place and the slot the op holds are given back before it is
	// answered: its coordinator's next op, sent on the answer, finds
	// them, rather than all places taken and no answer.
	var slot, freed bool
	free := func() {
		if freed {
			return
		}
		freed = true
		if slot {
			<-s.slots
		}
		<-s.admitted
	}
	defer free()
	if op.Kind == protocol.OpClose {
		// The run's ops that came before the close end first, holding
		// their slots, and the close takes none while it waits. Opened
		// again meanwhile (its coordinator let go of it, and another
		// took it over), the run is the new coordinator's: the close is
		// answered and not carried out.
		cl.settle(ctx)
		if !s.running.closed(op.Run, cl) {
			s.log.Info("a close that waited for the run's operations was not carried out: the run was opened again meanwhile", "run", op.Run)
			free()
			s.respondLater(r, &protocol.SandboxReply{OpID: op.OpID})
			return
		}
	}
	if s.slotted(op) {
		select {
		case s.slots <- struct{}{}:
			slot = true
		case <-ctx.Done():
			s.finish(op, e, nil)
			return
		}
	}
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if op.Kind == protocol.OpTool || op.Kind == protocol.OpVerify {
		var end func()
		ctx, end = s.running.track(ctx, op.Run)
		defer end()
	}
	var reply *protocol.SandboxReply
	if journaled(op.Kind) {
		reply = s.durably(ctx, op)
	} else {
		reply = s.do(ctx, op)
	}
	repeats := s.finish(op, e, reply)
	if reply == nil {
		return // not run: the coordinator asks again
	}
	if opened != 0 {
		reply.Opened = opened // an open's reply is its own, answering no repeat
	}
	s.m.Op(op.Kind, reply.Error != nil)
	free()
	s.respondLater(r, reply)
	for _, w := range repeats {
		s.respondLater(w, reply)
	}
}

// slotted reports whether op takes one of the MaxConcurrent slots, which
// bound the work that runs commands or servers or unpacks archives: tool
// calls, verifications, collections, and the opens that start MCP servers
// or materialise a snapshot. A plain open or a close takes none, so that
// a new run's first step never waits behind other runs' long commands;
// nor does a call of a tool that works on files in this process alone
// (tools.InProcess: read_file, write_file, edit_file, grep, find,
// view_image) or the read of a skill, so that no run's read or edit waits
// behind them either.
func (s *Sandboxer) slotted(op *protocol.SandboxOp) bool {
	switch op.Kind {
	case protocol.OpOpen:
		return op.MCP != nil || op.Snapshot != ""
	case protocol.OpClose:
		return false
	case protocol.OpTool:
		return op.Call == nil || op.Call.Name != readSkillTool && !s.cfg.Tools.InProcess(op.Call.Name)
	}
	return true
}

// respond answers r with reply, naming this node in it.
func (s *Sandboxer) respond(r micro.Request, reply *protocol.SandboxReply) {
	s.answer(r, reply, false)
}

// respondLater is respond from a goroutine of the op's own, after the
// endpoint's handler returned (see wire.RespondLater): its failures are
// counted in the endpoint's stats data ("errors") instead.
func (s *Sandboxer) respondLater(r micro.Request, reply *protocol.SandboxReply) {
	s.answer(r, reply, true)
}

func (s *Sandboxer) answer(r micro.Request, reply *protocol.SandboxReply, later bool) {
	if reply.Node == "" { // set when an open was passed on to the node holding the run
		// A copy: one reply may answer an op and its repeats at once.
		named := *reply
		named.Node = s.cfg.ID
		reply = &named
	}
	data, err := wirejson.MarshalReply(reply)
	if err != nil {
		s.log.Error("encode reply", "err", err)
		return
	}
	// A failed operation is a service error, which `nats micro stats`
	// counts; the body is the reply all the same.
	switch {
	case later && reply.Error != nil:
		s.failed.Add(1)
		err = wire.RespondLater(s.nc, r, data, strconv.Itoa(int(reply.Error.Code)), reply.Error.Message)
	case later:
		err = wire.RespondLater(s.nc, r, data, "", "")
	case reply.Error != nil:
		err = r.Error(strconv.Itoa(int(reply.Error.Code)), reply.Error.Message, data)
	default:
		err = r.Respond(data)
	}
	if err != nil {
		s.log.Debug("respond", "err", err)
	}
}

// do carries out an operation, once it is admitted and has a slot.
func (s *Sandboxer) do(ctx context.Context, op *protocol.SandboxOp) *protocol.SandboxReply {
	reply := &protocol.SandboxReply{OpID: op.OpID}
	log := s.log.With("run", op.Run, "op", op.OpID)
	switch op.Kind {
	case protocol.OpOpen:
		if op.Snapshot != "" {
			reply = s.openSnapshot(ctx, op, reply)
		} else {
			w, err := s.workspace(op.Run, op.Workspace)
			if err != nil {
				reply.Error = protocol.AsError(err)
				return reply
			}
			if reply.Skills, err = s.skills(ctx, op.Run, w, op.Skills); err != nil {
				// The run ends before its first step: it holds nothing here.
				s.closeWorkspace(op.Run)
				reply.Error = protocol.AsError(err)
				log.Info("workspace refused: its skills are malformed", "dir", op.Workspace, "err", err)
				return reply
			}
			reply.Tools = s.offered(isRepo(op.Workspace), op.Tools)
			reply.Toolchain = s.toolchain(op.Workspace)
			log.Info("workspace opened", "dir", w.dir)
		}
		if op.MCP == nil || reply.Error != nil || reply.Holder != "" {
			return reply
		}
		w, err := s.workspaceFor(op)
		if err == nil {
			var tools []protocol.ToolSpec
			tools, reply.MCP, err = s.openMCP(ctx, op, w.dir)
			reply.Tools = append(reply.Tools, tools...)
		}
		if err != nil {
			// The run cannot go on without its servers: it holds nothing
			// here.
			s.closeWorkspace(op.Run)
			s.closeSkills(op.Run)
			*reply = protocol.SandboxReply{OpID: op.OpID, Error: protocol.AsError(err)}
		}
	case protocol.OpClose:
		reply.MCP = s.closeMCP(op.Run)
		s.closeWorkspace(op.Run)
		s.closeSkills(op.Run)
		s.closeSnapshot(ctx, op.Run)
	case protocol.OpCollect:
		p, err := s.collect(ctx, op)
		reply.Patch, reply.Error = p, protocol.AsError(err)
	case protocol.OpTool:
		w, err := s.workspaceFor(op)
		if err != nil {
			reply.Error = protocol.AsError(err)
			return reply
		}
		reply.Observation = s.tool(ctx, w, op)
		reply.MCP = s.lostMCP(op)
	case protocol.OpVerify:
		w, err := s.workspaceFor(op)
		if err != nil {
			reply.Error = protocol.AsError(err)
			return reply
		}
		if op.Verification == nil {
			reply.Error = protocol.Errorf(protocol.CodeMalformed, "verify without a verification")
			return reply
		}
		reply.Check = s.verify(ctx, w, op)
		reply.MCP = s.lostMCP(op)
		log.Info("verified", "passed", reply.Check.Passed, "detail", reply.Check.Detail)
	default:
		reply.Error = protocol.Errorf(protocol.CodeUnsupported, "unknown operation %q", op.Kind)
	}
	return reply
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Ready is closed once Run serves: its micro service answers and it takes
// its work.
func (s *Sandboxer) Ready() <-chan struct{} { return s.ready }

// withDocuments is base with the document tools of this build, if any,
// added as extras: offered to the runs whose contracts name them.
func withDocuments(base *tools.Set) *tools.Set {
	set, err := tools.WithDocuments(base, documents.Tools()...)
	if err != nil {
		panic("sandboxer: the document tools clash with the built-ins: " + err.Error())
	}
	return set
}

// documentKind is the document kind a document_contains verification
// reads, or "".
func documentKind(v *protocol.Verification) string {
	if v == nil || v.DocumentContains == nil {
		return ""
	}
	return protocol.DocumentKind(v.CheckedFile())
}
