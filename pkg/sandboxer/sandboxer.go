// Package sandboxer holds workspaces for harness. A sandboxer answers
// harness.sandbox.open for the workspace roots it is configured to serve,
// then takes a run's operations on its own subject
// (harness.sandbox.<node>.op): tool calls, run by the tools package inside
// the workspace, and the contract's verification, run inside a sandbox.
//
// It resolves every path itself, whatever the coordinator decided: a path
// that climbs out of the workspace, is absolute, or resolves through a
// symlink to outside is refused here. Each operation carries an op id, and
// an operation repeated with the same id is answered from the first result
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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/tools"
)

// Version is reported by the sandboxer's micro service.
const Version = "0.1.0"

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
	// directories are always refused (see RefuseRoot).
	Reserved []string
	// MaxConcurrent bounds operations running at once; default 4.
	MaxConcurrent int
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
	// CommitAuthor and CommitEmail sign the commits a contract asks for;
	// default "harness" and "harness@localhost".
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
	reserved := make([]string, 0, len(c.Reserved))
	for _, r := range c.Reserved {
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
	if c.Base == "" {
		c.Base = c.Roots[0]
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 4
	}
	if len(c.Backends) == 0 {
		c.Backends = []sandbox.Backend{sandbox.NewFloor()}
	}
	if c.Tools == nil {
		c.Tools = tools.Builtins()
	}
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
	return nil
}

// Sandboxer serves workspace operations. Create it with New.
type Sandboxer struct {
	cfg   Config
	nc    *nats.Conn
	log   *slog.Logger
	slots chan struct{}

	inflight atomic.Int64
	wg       sync.WaitGroup
	stopMu   sync.Mutex // guards stopping and every wg.Add
	stopping bool

	// snapMu serialises materialising and removing snapshot workspaces.
	// It is taken before mu, never while mu is held.
	snapMu sync.Mutex
	m      *metrics.Sandboxer

	mu         sync.Mutex // guards workspaces, ops and opOrder
	workspaces map[string]*workspace
	ops        map[string]*opEntry
	opOrder    []string
}

type workspace struct {
	dir string
	ws  *tools.Workspace
}

type opEntry struct {
	done  chan struct{}
	reply *protocol.SandboxReply
}

// New returns a sandboxer. Errors: an invalid Config or an unusable root.
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
		slots:      make(chan struct{}, cfg.MaxConcurrent),
		workspaces: make(map[string]*workspace),
		ops:        make(map[string]*opEntry),
	}
	s.m = metrics.NewSandboxer(cfg.Metrics, s.openWorkspaces)
	return s, nil
}

// ID returns the node's id.
func (s *Sandboxer) ID() string { return s.cfg.ID }

// Run serves operations until ctx ends, then waits for those in flight.
// Errors: the micro service could not be set up.
func (s *Sandboxer) Run(ctx context.Context) error {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        "harness-sandboxer",
		Version:     Version,
		Description: "workspaces, tools and sandboxed commands for harness runs",
		Metadata:    map[string]string{"id": s.cfg.ID, "backends": strings.Join(s.backendNames(), ","), "roots": strings.Join(s.cfg.Roots, ":")},
		StatsHandler: func(*micro.Endpoint) any {
			return map[string]any{"inflight": s.inflight.Load(), "capacity": s.cfg.MaxConcurrent, "backends": s.backendNames()}
		},
	})
	if err != nil {
		return fmt.Errorf("register micro service: %w", err)
	}
	defer svc.Stop()
	// Every sandboxer hears every open and answers only for the roots it
	// serves, so the open must not go through a queue group.
	if err := svc.AddEndpoint("open", micro.HandlerFunc(func(r micro.Request) { s.handle(ctx, r, true) }),
		micro.WithEndpointSubject(streams.SandboxOpenSubject), micro.WithEndpointQueueGroupDisabled()); err != nil {
		return fmt.Errorf("register open endpoint: %w", err)
	}
	if err := svc.AddEndpoint("op", micro.HandlerFunc(func(r micro.Request) { s.handle(ctx, r, false) }),
		micro.WithEndpointSubject(streams.SandboxOps(s.cfg.ID))); err != nil {
		return fmt.Errorf("register op endpoint: %w", err)
	}
	if s.cfg.Workspaces != nil {
		// One sandboxer of the queue group takes each snapshot's open.
		if err := svc.AddEndpoint("snapshot", micro.HandlerFunc(func(r micro.Request) { s.handle(ctx, r, false) }),
			micro.WithEndpointSubject(streams.SandboxSnapshotSubject)); err != nil {
			return fmt.Errorf("register snapshot endpoint: %w", err)
		}
	}
	// Containers a previous life of this node left behind go first.
	for _, b := range s.cfg.Backends {
		if r, ok := b.(interface {
			Reconcile(ctx context.Context, live func(run string) bool) (int, error)
		}); ok {
			if n, err := r.Reconcile(ctx, nil); err != nil {
				s.log.Warn("reconcile sandboxes", "backend", b.Name(), "err", err)
			} else if n > 0 {
				s.log.Info("removed leftover sandboxes", "backend", b.Name(), "count", n)
			}
		}
	}
	s.log.Info("sandboxer started", "roots", s.cfg.Roots, "backends", s.backendNames())
	<-ctx.Done()
	if err := svc.Stop(); err != nil {
		s.log.Warn("stop micro service", "err", err)
	}
	// No operation may start once we wait for those in flight.
	s.stopMu.Lock()
	s.stopping = true
	s.stopMu.Unlock()
	s.wg.Wait()
	for _, b := range s.cfg.Backends {
		switch c := b.(type) {
		case interface{ Close() error }:
			_ = c.Close()
		case interface{ Shutdown(context.Context) error }:
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = c.Shutdown(sctx)
			cancel()
		}
	}
	s.mu.Lock()
	for run, w := range s.workspaces {
		_ = w.ws.Close()
		delete(s.workspaces, run)
	}
	s.mu.Unlock()
	return nil
}

// handle decodes one operation and runs it on its own goroutine, bounded by
// MaxConcurrent, so a long command does not hold up the others.
func (s *Sandboxer) handle(ctx context.Context, r micro.Request, open bool) {
	var op protocol.SandboxOp
	if err := json.Unmarshal(r.Data(), &op); err != nil || op.OpID == "" || !protocol.ValidToken(op.Run) {
		s.respond(r, &protocol.SandboxReply{Error: protocol.Errorf(protocol.CodeMalformed, "undecodable sandbox operation")})
		return
	}
	if open {
		dir, err := s.resolveRoot(op.Workspace)
		if errors.Is(err, protocol.ErrWorkspaceRefused) {
			return // not ours: another sandboxer may serve it
		}
		if err != nil {
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.AsError(err)})
			return
		}
		op.Workspace = dir
	}
	if op.Kind == protocol.OpOpen {
		if err := s.admit(&op); err != nil {
			s.respond(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.AsError(err)})
			return
		}
	}
	s.stopMu.Lock()
	if s.stopping {
		s.stopMu.Unlock()
		return
	}
	s.wg.Add(1)
	s.stopMu.Unlock()
	go func() {
		defer s.wg.Done()
		if e := s.running(&op); e != nil {
			// A repeat of an operation still running here (its coordinator
			// asked again, its first answer lost or slow): it waits for that
			// one's answer without taking a slot of its own.
			select {
			case <-e.done:
				if e.reply != nil {
					s.respond(r, e.reply)
				}
			case <-ctx.Done():
			}
			return
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-s.slots }()
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		reply := s.once(ctx, &op)
		if reply == nil {
			return // not run: the coordinator asks again
		}
		s.m.Op(op.Kind, reply.Error != nil)
		s.respond(r, reply)
	}()
}

// running returns the entry of op if an operation with its id is running
// or done in this process, for a tool or verification.
func (s *Sandboxer) running(op *protocol.SandboxOp) *opEntry {
	if op.Kind == protocol.OpOpen || op.Kind == protocol.OpClose {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[op.OpID]
}

func (s *Sandboxer) respond(r micro.Request, reply *protocol.SandboxReply) {
	if reply.Node == "" { // set when an open was passed on to the node holding the run
		// A copy: one reply may answer an op and its repeats at once.
		named := *reply
		named.Node = s.cfg.ID
		reply = &named
	}
	data, err := json.Marshal(reply)
	if err != nil {
		s.log.Error("encode reply", "err", err)
		return
	}
	if err := r.Respond(data); err != nil {
		s.log.Debug("respond", "err", err)
	}
}

// once runs an operation at most once per op id: a repeat waits for the
// first and gets its result. It returns nil for an operation it did not
// run because it could not be recorded first (see durably); a repeat then
// tries again.
func (s *Sandboxer) once(ctx context.Context, op *protocol.SandboxOp) *protocol.SandboxReply {
	if op.Kind == protocol.OpOpen || op.Kind == protocol.OpClose {
		return s.do(ctx, op)
	}
	s.mu.Lock()
	if e, ok := s.ops[op.OpID]; ok {
		s.mu.Unlock()
		select {
		case <-e.done:
			return e.reply
		case <-ctx.Done():
			return &protocol.SandboxReply{OpID: op.OpID, Error: protocol.Errorf(protocol.CodeUnavailable, "sandboxer shutting down")}
		}
	}
	e := &opEntry{done: make(chan struct{})}
	s.ops[op.OpID] = e
	s.opOrder = append(s.opOrder, op.OpID)
	if len(s.opOrder) > s.cfg.RememberOps {
		delete(s.ops, s.opOrder[0])
		s.opOrder = s.opOrder[1:]
	}
	s.mu.Unlock()
	e.reply = s.durably(ctx, op)
	if e.reply == nil {
		s.mu.Lock()
		if s.ops[op.OpID] == e {
			delete(s.ops, op.OpID)
		}
		s.mu.Unlock()
	}
	close(e.done)
	return e.reply
}

// opRecord is what the ops bucket holds for one operation: that it began,
// and once it ended, its reply.
type opRecord struct {
	Done  bool                   `json:"done"`
	Reply *protocol.SandboxReply `json:"reply,omitempty"`
}

// durably runs an operation at most once across restarts of this node,
// and of any node serving the same roots, when an ops bucket is
// configured: a completed op's reply is kept there and returned again; a
// tool call that began but never ended (the node died under it) is
// reported as indeterminate, never silently run again. A verification or a
// read-only tool's call (read_file, grep, find, view_image) cut off that
// way is simply run again: it changes nothing.
//
// A call that may change the workspace runs only once its start is
// recorded: while the bucket cannot say whether the op began elsewhere, or
// cannot take the record, durably returns nil without running it, and the
// coordinator's next ask tries again. Run unrecorded, a call whose answer
// was lost would be run a second time by whichever node was asked next.
func (s *Sandboxer) durably(ctx context.Context, op *protocol.SandboxOp) *protocol.SandboxReply {
	if s.cfg.Ops == nil {
		return s.do(ctx, op)
	}
	key := opKey(op.OpID)
	changes := op.Kind == protocol.OpTool && (op.Call == nil || !s.cfg.Tools.ReadOnly(op.Call.Name))
	e, err := opsCall(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.cfg.Ops.Get(ctx, key) })
	switch {
	case err == nil:
		var rec opRecord
		if json.Unmarshal(e.Value(), &rec) == nil {
			if rec.Done && rec.Reply != nil {
				return rec.Reply
			}
			if changes {
				return indeterminate(op)
			}
		}
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case changes:
		s.log.Warn("the ops bucket does not answer; the op waits to be asked again", "op", op.OpID, "err", err)
		return nil
	}
	// Created, not put: of two nodes asked for one op at once (a run
	// taken over while its first node still worked), one records the
	// start and the other sees it.
	begun, _ := json.Marshal(opRecord{})
	_, err = opsCall(ctx, func(ctx context.Context) (uint64, error) { return s.cfg.Ops.Create(ctx, key, begun) })
	switch {
	case err == nil:
	case errors.Is(err, jetstream.ErrKeyExists):
		if changes {
			return s.begunElsewhere(ctx, op, key)
		}
	case changes:
		s.log.Warn("could not record the op's start; it waits to be asked again", "op", op.OpID, "err", err)
		return nil
	default:
		s.log.Warn("record op start", "op", op.OpID, "err", err)
	}
	reply := s.do(ctx, op)
	done, _ := json.Marshal(opRecord{Done: true, Reply: reply})
	// Kept in this process either way; in the bucket it spares another
	// node reporting the op as indeterminate.
	if _, err := opsCall(ctx, func(ctx context.Context) (uint64, error) { return s.cfg.Ops.Put(ctx, key, done) }); err != nil {
		s.log.Warn("record op result", "op", op.OpID, "err", err)
	}
	return reply
}

// begunElsewhere answers a call that may change the workspace whose start
// another node recorded a moment ago: with its result once that node has
// one, as indeterminate if it has none within the op's time.
func (s *Sandboxer) begunElsewhere(ctx context.Context, op *protocol.SandboxOp, key string) *protocol.SandboxReply {
	for range 30 {
		e, err := opsCall(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.cfg.Ops.Get(ctx, key) })
		if err == nil {
			var rec opRecord
			if json.Unmarshal(e.Value(), &rec) == nil && rec.Done && rec.Reply != nil {
				return rec.Reply
			}
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	return indeterminate(op)
}

// opsTimeout bounds each call to the ops bucket.
const opsTimeout = 5 * time.Second

// opsCall runs one call to the ops bucket, bounded by opsTimeout.
func opsCall[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, opsTimeout)
	defer cancel()
	return f(ctx)
}

// indeterminate is the reply for a tool call cut off by a restart.
func indeterminate(op *protocol.SandboxOp) *protocol.SandboxReply {
	obs := &protocol.Observation{IsError: true,
		Content: "[indeterminate] this call was cut off when the sandboxer stopped: it did not finish, and its effects are unknown. Look at the workspace before you repeat it."}
	if op.Call != nil {
		obs.CallID, obs.Tool = op.Call.ID, op.Call.Name
	}
	return &protocol.SandboxReply{OpID: op.OpID, Observation: obs}
}

// opKey turns an op id into a bucket key.
func opKey(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '=' {
			return r
		}
		return '_'
	}, id)
}

func (s *Sandboxer) do(ctx context.Context, op *protocol.SandboxOp) *protocol.SandboxReply {
	reply := &protocol.SandboxReply{OpID: op.OpID}
	log := s.log.With("run", op.Run, "op", op.OpID)
	switch op.Kind {
	case protocol.OpOpen:
		if op.Snapshot != "" {
			return s.openSnapshot(ctx, op, reply)
		}
		if _, err := s.workspace(op.Run, op.Workspace); err != nil {
			reply.Error = protocol.AsError(err)
			return reply
		}
		reply.Tools = s.cfg.Tools.Specs()
		log.Info("workspace opened", "dir", op.Workspace)
	case protocol.OpClose:
		s.mu.Lock()
		if w, ok := s.workspaces[op.Run]; ok {
			_ = w.ws.Close()
			delete(s.workspaces, op.Run)
		}
		s.mu.Unlock()
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
		log.Info("verified", "passed", reply.Check.Passed, "detail", reply.Check.Detail)
	default:
		reply.Error = protocol.Errorf(protocol.CodeUnsupported, "unknown operation %q", op.Kind)
	}
	return reply
}

// workspaceFor returns the run's open workspace, opening it again from the
// op's root if this node lost it (a restart).
func (s *Sandboxer) workspaceFor(op *protocol.SandboxOp) (*workspace, error) {
	s.mu.Lock()
	w, ok := s.workspaces[op.Run]
	s.mu.Unlock()
	if ok {
		return w, nil
	}
	if op.Workspace == "" {
		return s.snapshotWorkspace(op.Run)
	}
	dir, err := s.resolveRoot(op.Workspace)
	if err != nil {
		return nil, err
	}
	return s.workspace(op.Run, dir)
}

func (s *Sandboxer) workspace(run, dir string) (*workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workspaces[run]; ok {
		return w, nil
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		return nil, err
	}
	w := &workspace{dir: dir, ws: ws}
	s.workspaces[run] = w
	return w, nil
}

// resolveRoot turns a contract's workspace root into a directory this node
// serves. Errors: CodeWorkspaceRefused when it lies outside every root,
// CodeNotFound when it does not exist or is not a directory.
func (s *Sandboxer) resolveRoot(root string) (string, error) {
	if root == "" || strings.ContainsRune(root, 0) {
		return "", protocol.Errorf(protocol.CodeWorkspaceRefused, "no workspace root")
	}
	dir := root
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(s.cfg.Base, dir)
	}
	dir = filepath.Clean(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	served := false
	for _, r := range s.cfg.Roots {
		if dir == r || strings.HasPrefix(dir, r+string(filepath.Separator)) {
			served = true
			break
		}
	}
	if !served {
		return "", protocol.Errorf(protocol.CodeWorkspaceRefused, "workspace %s is outside the roots this sandboxer serves", root)
	}
	if err := RefuseRoot(dir, s.cfg.Reserved...); err != nil {
		return "", err
	}
	if s.inSnapshots(dir) {
		return "", protocol.Errorf(protocol.CodePathEscape, "workspace %s reaches this sandboxer's snapshot workspaces (%s); use a directory apart from them", root, s.cfg.SnapshotDir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeNotFound, "workspace %s: %s", root, err.Error())
	}
	if !fi.IsDir() {
		return "", protocol.Errorf(protocol.CodeNotFound, "workspace %s is not a directory", root)
	}
	return dir, nil
}

func (s *Sandboxer) env(op *protocol.SandboxOp, w *workspace) *tools.Env {
	var spec protocol.SandboxSpec
	if op.Sandbox != nil {
		spec = *op.Sandbox
	}
	backend, err := s.backend(spec.Backend)
	if err != nil {
		backend = refusing{err}
	}
	env := &tools.Env{
		Workspace: w.ws,
		Sandbox:   s.metered(backend),
		Limits:    spec.Limits.WithDefaults(),
		Network:   spec.Network,
		CmdEnv:    s.cfg.CmdEnv,
	}
	// Every file tool asks the run's policy about each path it would
	// touch, link targets included; grep and find omit what it refuses.
	// A policy that is missing or does not compile allows nothing. (tool
	// puts in a judge of its own, the same but keeping the verdict.)
	env.Judge = toolJudge(op, new(policy.Verdict))
	return env
}

// tool runs one tool call. A failure is an observation, written for the
// model.
func (s *Sandboxer) tool(ctx context.Context, w *workspace, op *protocol.SandboxOp) *protocol.Observation {
	call := op.Call
	if call == nil {
		return &protocol.Observation{IsError: true, Content: "[tool failed] no tool call"}
	}
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	t, ok := s.cfg.Tools.Get(call.Name)
	if !ok {
		obs.IsError = true
		obs.Content = fmt.Sprintf("[unknown tool] %q is not a tool here; the tools are: %s", call.Name, strings.Join(s.cfg.Tools.Names(), ", "))
		return obs
	}
	// The coordinator decided; the sandboxer decides again, where the
	// effect would happen, and performs nothing its verdict does not cover.
	if refusal := s.covered(op); refusal != "" {
		obs.IsError, obs.Content = true, refusal
		return obs
	}
	env := s.env(op, w)
	// The sandboxer's own verdict on what the call really touches: the
	// targets of the links on its path, which only this node can see; a
	// refusal is recorded with the rule that made it.
	var refused policy.Verdict
	env.Judge = toolJudge(op, &refused)
	out, err := t.Invoke(sandbox.WithRun(ctx, op.Run, op.OpID), env, call.Arguments)
	fault.Hit(fault.AfterToolEffect)
	if errors.Is(err, protocol.ErrRefused) {
		obs.IsError, obs.Content = true, protocol.AsError(err).Message
		if refused.Effect == policy.Ask || refused.Effect == policy.Deny { // unset when no policy covers the op
			obs.Refused = &protocol.Refusal{Act: refused.Act.String(), Target: refused.Target, Effect: refused.Effect.String(), Rule: refused.Rule, Layer: refused.Layer}
		}
		return obs
	}
	if err != nil {
		obs.IsError = true
		msg := err.Error()
		var pe *protocol.Error
		if errors.As(err, &pe) {
			msg = pe.Message
			if pe.Hint != "" {
				msg += " (" + pe.Hint + ")"
			}
		}
		obs.Content = fmt.Sprintf("[%s failed] %s", call.Name, msg)
		return obs
	}
	obs.Content, obs.Changed, obs.Exec, obs.Image = out.Content, out.Changed, out.Exec, out.Image
	return obs
}

// covered takes the sandboxer's own verdict on a tool call and returns why
// it is refused, or "" when the policy allows it (or asks, and a person's
// approval comes with it).
func (s *Sandboxer) covered(op *protocol.SandboxOp) string {
	if op.Policy == nil {
		return "[refused by the sandboxer] no policy verdict covers this operation"
	}
	pol, err := policy.FromProtocol(op.Policy)
	if err != nil {
		return "[refused by the sandboxer] the run's policy does not compile: " + err.Error()
	}
	v, bad := gate.Verdict(pol, op.Call)
	switch {
	case bad != "":
		return bad
	case v.Effect == policy.Deny, v.Effect == policy.Ask && op.Approval == "":
		return v.Refusal()
	}
	return ""
}

// verify runs the contract's check. A command killed by a cap or a signal
// never passes, whatever it printed.
func (s *Sandboxer) verify(ctx context.Context, w *workspace, op *protocol.SandboxOp) *protocol.CheckResult {
	defer fault.During(fault.DuringVerification)()
	v := op.Verification
	res := &protocol.CheckResult{Kind: v.Kind()}
	switch {
	case v.Command != nil:
		pol, err := policy.FromProtocol(orEmpty(op.Policy))
		if op.Policy == nil || err != nil {
			res.Detail = "the verification was refused by the sandboxer: no policy verdict covers it"
			return res
		}
		if ok, why := gate.Allowed(pol, *v); !ok {
			res.Detail = why
			return res
		}
		env := s.env(op, w)
		r, err := env.Sandbox.Run(sandbox.WithRun(ctx, op.Run, op.OpID), sandbox.Spec{Argv: v.Command.Argv, Dir: w.dir, Env: env.CmdEnv, Limits: env.Limits})
		cmd := "`" + strings.Join(v.Command.Argv, " ") + "`"
		if err != nil {
			res.Detail = fmt.Sprintf("%s could not start: %s", cmd, protocol.AsError(err).Message)
			return res
		}
		rep := r.Report
		res.Exec = &rep
		res.Output = boundBoth(r.Stdout+r.Stderr, 4000)
		switch {
		case rep.CapHit != "":
			res.Detail = fmt.Sprintf("%s was killed by the %s cap; a killed command never passes.", cmd, rep.CapHit)
		case !rep.Exited:
			res.Detail = fmt.Sprintf("%s was killed by %s; a killed command never passes.", cmd, orWord(rep.Signal, "a signal"))
		case rep.ExitCode == v.Command.ExpectExit:
			res.Passed = true
			res.Detail = fmt.Sprintf("%s exited %d as expected.", cmd, rep.ExitCode)
		default:
			res.Detail = fmt.Sprintf("%s exited %d (expected %d).", cmd, rep.ExitCode, v.Command.ExpectExit)
		}
	case v.FileContains != nil:
		path := v.FileContains.Path
		pol, err := policy.FromProtocol(orEmpty(op.Policy))
		if op.Policy == nil || err != nil {
			res.Detail = "the verification was refused by the sandboxer: no policy verdict covers it"
			return res
		}
		// The file is read as the agent's read_file would find it, and
		// every path its resolution passes through must be explicitly
		// allowed: a link must not let the check answer questions about a
		// file the policy hides.
		data, err := (&tools.Env{Workspace: w.ws, Judge: verifyJudge(pol)}).ReadFile(path)
		switch {
		case errors.Is(err, protocol.ErrRefused):
			res.Detail = protocol.AsError(err).Message
		case errors.Is(err, protocol.ErrNotFound):
			res.Detail = fmt.Sprintf("%s does not exist yet.", path)
		case err != nil:
			res.Detail = fmt.Sprintf("%s cannot be checked: %s", path, protocol.AsError(err).Message)
		case strings.Contains(string(data), v.FileContains.Needle):
			res.Passed = true
			res.Detail = fmt.Sprintf("%s contains the expected text.", path)
		default:
			res.Detail = fmt.Sprintf("%s does not contain the expected text.", path)
		}
	default:
		res.Detail = "this sandboxer cannot run a " + v.Kind() + " verification"
	}
	return res
}

// refusing is the backend of an op whose contract asks for one this node
// does not have: every command fails to start, saying so.
type refusing struct{ err error }

func (r refusing) Name() string { return "none" }

func (r refusing) Run(context.Context, sandbox.Spec) (*sandbox.Result, error) { return nil, r.err }

func orEmpty(p *protocol.Policy) *protocol.Policy {
	if p == nil {
		return &protocol.Policy{}
	}
	return p
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// boundBoth keeps the head and the tail of s within n bytes.
func boundBoth(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := n / 2
	return s[:h] + fmt.Sprintf("\n…[elided %d bytes]…\n", len(s)-n) + s[len(s)-(n-h):]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
