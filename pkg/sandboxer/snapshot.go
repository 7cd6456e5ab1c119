package sandboxer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/git"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/wire"
)

// A snapshot workspace lives in SnapshotDir/<run>: base/ is the snapshot
// as it arrived, never touched; work/ is the workspace the run changes;
// ready marks both as complete; collected marks the run's changes as
// stored, so the close that follows may remove the directory.
const (
	snapBase      = "base"
	snapWork      = "work"
	snapReady     = "ready"
	snapCollected = "collected"
	snapArchive   = "snapshot.tar.gz"
	// snapHead holds the commit the workspace's repository was at when the
	// run began ("" on a branch with no commit yet): the base of the
	// commits the run makes. Absent when the workspace was no repository.
	snapHead = "head"
)

// claim is what the ops bucket holds under claimKey(run): the node that
// materialised the run's snapshot, so an open after a coordinator's
// takeover is sent on to the node holding the run's changes, whichever
// node the queue group hands it to.
type claim struct {
	Node     string `json:"node"`
	Snapshot string `json:"snapshot"`
}

// claimKey cannot collide with an op key: wire.OpKey never yields a '/'.
func claimKey(run string) string { return "snapshot/" + run }

func (s *Sandboxer) snapPath(run string, parts ...string) string {
	return filepath.Join(append([]string{s.cfg.SnapshotDir, run}, parts...)...)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// openSnapshot opens a run's snapshot workspace: on the node that holds
// it already, or by materialising it here. An open that reaches another
// node than the holder is answered with the holder's id, for the
// coordinator to ask it (sandboxers never send each other requests).
func (s *Sandboxer) openSnapshot(ctx context.Context, op *protocol.SandboxOp, reply *protocol.SandboxReply) *protocol.SandboxReply {
	log := s.log.With("run", op.Run, "snapshot", op.Snapshot)
	if s.cfg.Workspaces == nil {
		reply.Error = protocol.FieldError(protocol.CodeUnsupported, "workspace.snapshot", "run a sandboxer connected to the cluster's object store", "this sandboxer serves no snapshot workspaces")
		return reply
	}
	if !protocol.ValidSnapshotRef(op.Snapshot) {
		reply.Error = protocol.FieldError(protocol.CodeInvalidField, "workspace.snapshot", `a snapshot ref is "sha256-" and 64 hex digits`, "%q is not a snapshot ref", op.Snapshot)
		return reply
	}
	defer s.snapLocks.lock(op.Run)()
	dir := s.snapPath(op.Run)
	had := exists(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		reply.Error = protocol.Errorf(protocol.CodeInternal, "snapshot directory: %s", err.Error())
		return reply
	}
	owner, fresh, err := s.claim(ctx, op)
	if err != nil {
		reply.Error = protocol.Errorf(protocol.CodeUnavailable, "record which sandboxer holds run %s: %s", op.Run, err.Error())
		return reply
	}
	if owner != s.cfg.ID {
		if !had {
			_ = os.RemoveAll(dir)
		}
		log.Info("snapshot workspace held by another sandboxer", "holder", owner)
		reply.Holder = owner
		return reply
	}
	if !fresh && !had {
		// This node took the run and materialised it once; the directory
		// is gone (removed by hand, or a temporary directory cleaned), and
		// with it the run's changes. Starting again from the snapshot
		// would silently lose them.
		reply.Error = protocol.Errorf(protocol.CodeNotFound, "the workspace of run %s is gone from sandboxer %s (%s); its changes are lost", op.Run, s.cfg.ID, dir)
		return reply
	}
	made := false // materialised by this open: nothing ran in it yet
	if !exists(filepath.Join(dir, snapReady)) {
		made = true
		info, err := s.materialise(ctx, op, dir)
		s.m.Snapshot(err != nil)
		if err != nil {
			// Nothing ran in it: leave nothing behind, claim included.
			log.Warn("materialise snapshot", "err", err)
			_ = os.RemoveAll(dir)
			if s.cfg.Ops != nil {
				_ = s.cfg.Ops.Delete(ctx, claimKey(op.Run))
			}
			reply.Error = protocol.AsError(err)
			return reply
		}
		log.Info("snapshot materialised", "dir", dir, "files", info.Files, "bytes", info.Bytes)
	}
	work := filepath.Join(dir, snapWork)
	w, err := s.workspace(op.Run, work)
	if err != nil {
		reply.Error = protocol.AsError(err)
		return reply
	}
	if reply.Skills, err = s.skills(ctx, op.Run, w, op.Skills); err != nil {
		// The run ends before its first step. A workspace this open made
		// holds nothing of the run's: it goes, claim included.
		s.closeWorkspace(op.Run)
		if made {
			_ = os.RemoveAll(dir)
			if s.cfg.Ops != nil {
				_ = s.cfg.Ops.Delete(ctx, claimKey(op.Run))
			}
		}
		log.Info("snapshot workspace refused: its skills are malformed", "err", err)
		reply.Error = protocol.AsError(err)
		return reply
	}
	// The git tools come with a repository the snapshot carried (base/ is
	// the snapshot as it came), not with one made for workspace.commit.
	reply.Tools = s.offered(isRepo(filepath.Join(dir, snapBase)), op.Tools)
	reply.Toolchain = s.toolchain(work)
	return reply
}

// claim records this node as the holder of the run's snapshot, unless
// another node is; it returns the holder, and whether the claim is new.
// Without an ops bucket the node holds what it materialises.
func (s *Sandboxer) claim(ctx context.Context, op *protocol.SandboxOp) (string, bool, error) {
	if s.cfg.Ops == nil {
		return s.cfg.ID, !exists(s.snapPath(op.Run, snapReady)), nil
	}
	val, _ := json.Marshal(claim{Node: s.cfg.ID, Snapshot: op.Snapshot})
	key := claimKey(op.Run)
	_, err := s.cfg.Ops.Create(ctx, key, val)
	if err == nil {
		return s.cfg.ID, true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", false, err
	}
	e, err := s.cfg.Ops.Get(ctx, key)
	if err != nil {
		return "", false, err
	}
	var c claim
	if err := json.Unmarshal(e.Value(), &c); err != nil || c.Node == "" {
		return "", false, fmt.Errorf("undecodable claim on run %s", op.Run)
	}
	if c.Node == s.cfg.ID {
		// Renewed, so a long pause does not outlive the bucket's TTL.
		_, _ = s.cfg.Ops.Put(ctx, key, val)
	}
	return c.Node, false, nil
}

// materialise fetches the snapshot, checks it is what its ref names, and
// unpacks it twice into dir: the untouched base and the workspace.
func (s *Sandboxer) materialise(ctx context.Context, op *protocol.SandboxOp, dir string) (*snapshot.Info, error) {
	lim := s.cfg.SnapshotLimits.WithDefaults()
	for _, p := range []string{snapBase, snapWork, snapArchive} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "clear %s: %s", dir, err.Error())
		}
	}
	archive := filepath.Join(dir, snapArchive)
	if err := s.fetch(ctx, op.Snapshot, archive, lim.MaxArchiveBytes, "workspace.snapshot", "upload the workspace with harness submit --workspace DIR, or Client.PutSnapshot"); err != nil {
		return nil, err
	}
	defer os.Remove(archive)
	var info *snapshot.Info
	for _, to := range []string{snapBase, snapWork} {
		f, err := os.Open(archive)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "read snapshot: %s", err.Error())
		}
		info, err = snapshot.Unpack(f, filepath.Join(dir, to), lim)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if op.Commit != nil && !exists(filepath.Join(dir, snapWork, ".git")) {
		// The run's changes are to be committed: the snapshot becomes a
		// repository whose first commit is the snapshot itself. Made as
		// every later commit is (see git.go), with no configuration of the
		// workspace's.
		g := s.gitRepo(op)
		if err := g.initWork(ctx); err != nil {
			return nil, err
		}
		if _, err := g.commit(ctx, "harness: snapshot "+op.Snapshot, true); err != nil {
			return nil, err
		}
	}
	if err := recordHead(dir); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, snapReady), []byte(op.Snapshot+"\n"), 0o600); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "mark snapshot ready: %s", err.Error())
	}
	return info, nil
}

// fetch copies the snapshot ref from the object store to path, refusing
// one over max bytes or whose content is not what its ref names. Its
// refusals name field, the contract's field that gave the ref, and a
// missing ref's says upload, how to store it.
func (s *Sandboxer) fetch(ctx context.Context, ref, path string, max int64, field, upload string) error {
	info, err := s.cfg.Workspaces.GetInfo(ctx, ref)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return protocol.FieldError(protocol.CodeNotFound, field, upload, "no snapshot %s in %s", ref, wire.BucketWorkspaces)
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "look up snapshot %s: %s", ref, err.Error())
	}
	if int64(info.Size) > max {
		return protocol.FieldError(protocol.CodeTooLarge, field, "make a smaller snapshot, or raise the sandboxer's snapshot limit",
			"snapshot %s is %d bytes, over this sandboxer's limit of %d", ref, info.Size, max)
	}
	obj, err := s.cfg.Workspaces.Get(ctx, ref)
	if err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "fetch snapshot %s: %s", ref, err.Error())
	}
	defer obj.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "store snapshot: %s", err.Error())
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(obj, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return protocol.Errorf(protocol.CodeUnavailable, "fetch snapshot %s: %s", ref, err.Error())
	case n > max:
		return protocol.FieldError(protocol.CodeTooLarge, field, "make a smaller snapshot", "snapshot %s is over %d bytes", ref, max)
	case "sha256-"+hex.EncodeToString(h.Sum(nil)) != ref:
		return protocol.FieldError(protocol.CodeMalformed, field, "upload the snapshot again", "the content stored as %s is not what that ref names", ref)
	}
	return nil
}

// snapshotWorkspace reopens the workspace of a run this node
// materialised, after a restart lost it from memory.
func (s *Sandboxer) snapshotWorkspace(run string) (*workspace, error) {
	if s.cfg.Workspaces == nil || !exists(s.snapPath(run, snapReady)) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "the workspace of run %s is not on sandboxer %s", run, s.cfg.ID)
	}
	return s.workspace(run, s.snapPath(run, snapWork))
}

// collect stores the run's changes as a patch, and commits them when the
// contract asks. A failure to commit is recorded in the patch; the patch
// is still made.
func (s *Sandboxer) collect(ctx context.Context, op *protocol.SandboxOp) (*protocol.Patch, error) {
	dir := s.snapPath(op.Run)
	if s.cfg.Workspaces == nil || !exists(filepath.Join(dir, snapReady)) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "the workspace of run %s is not on sandboxer %s", op.Run, s.cfg.ID)
	}
	work := filepath.Join(dir, snapWork)
	ch, err := snapshot.Diff(filepath.Join(dir, snapBase), work, snapshot.DiffOptions{})
	if err != nil {
		return nil, protocol.AsError(err)
	}
	p := &protocol.Patch{Node: s.cfg.ID, Size: int64(len(ch.Patch))}
	p.Files = ch.Files
	if len(p.Files) > protocol.MaxPatchFiles {
		p.Files, p.FilesOmitted = p.Files[:protocol.MaxPatchFiles], len(p.Files)-protocol.MaxPatchFiles
	}
	if len(ch.Patch) > 0 {
		ref := snapshot.Ref(ch.Patch)
		if _, err := s.cfg.Workspaces.GetInfo(ctx, ref); err != nil {
			if _, err := s.cfg.Workspaces.PutBytes(ctx, ref, ch.Patch); err != nil {
				return nil, protocol.Errorf(protocol.CodeUnavailable, "store the patch: %s", err.Error())
			}
		}
		p.Ref = ref
	}
	if op.Commit != nil {
		id, err := s.commit(ctx, op)
		if err != nil {
			p.Error = protocol.AsError(err)
		}
		p.Commit = id
	}
	// The commits of the run, the agent's and the one just made, as a
	// patch series beside the diff.
	if err := s.collectSeries(ctx, op, dir, p); err != nil && p.Error == nil {
		p.Error = protocol.AsError(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapCollected), []byte(p.Ref+"\n"), 0o600); err != nil {
		s.log.Warn("mark snapshot collected", "run", op.Run, "err", err)
	}
	s.log.Info("changes collected", "run", op.Run, "files", len(ch.Files), "bytes", p.Size, "commit", p.Commit)
	return p, nil
}

// recordHead writes, for a workspace that is a repository, the commit its
// HEAD is at before the run does anything (snapHead).
func recordHead(dir string) error {
	work := filepath.Join(dir, snapWork)
	if !isRepo(work) {
		return nil
	}
	root, err := os.OpenRoot(work)
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "open the workspace: %s", err.Error())
	}
	defer root.Close()
	h, err := git.ReadHead(root)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, snapHead), []byte(h.Parent+"\n"), 0o600); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "record the workspace's HEAD: %s", err.Error())
	}
	return nil
}

// baseCommit returns the commit the run's commits are counted from, and
// false when there is none to count from: the workspace was no
// repository when the run began (the harness made none, and the run made
// one with a command), or the node materialised it before it recorded
// one (then the snapshot's own repository says, if it carried one).
func (s *Sandboxer) baseCommit(dir string) (string, bool) {
	if b, err := os.ReadFile(filepath.Join(dir, snapHead)); err == nil {
		id := strings.TrimSpace(string(b))
		return id, id == "" || git.ValidObjectID(id)
	}
	root, err := os.OpenRoot(filepath.Join(dir, snapBase))
	if err != nil {
		return "", false
	}
	defer root.Close()
	h, err := git.ReadHead(root)
	return h.Parent, err == nil
}

// collectSeries stores the commits the run made in its workspace as a
// git format-patch series in the object store and records them in p.
func (s *Sandboxer) collectSeries(ctx context.Context, op *protocol.SandboxOp, dir string, p *protocol.Patch) error {
	work := filepath.Join(dir, snapWork)
	if !isRepo(work) {
		return nil
	}
	base, ok := s.baseCommit(dir)
	if !ok {
		return nil
	}
	commits, series, err := s.series(ctx, op, work, base)
	if err != nil {
		return err
	}
	if len(commits) == 0 {
		return nil
	}
	ref := snapshot.Ref(series)
	if _, err := s.cfg.Workspaces.GetInfo(ctx, ref); err != nil {
		if _, err := s.cfg.Workspaces.PutBytes(ctx, ref, series); err != nil {
			return protocol.Errorf(protocol.CodeUnavailable, "store the patch series: %s", err.Error())
		}
	}
	p.Commits, p.Series = commits, ref
	return nil
}

// commit commits everything in the workspace and returns the commit id,
// or "" when there was nothing to commit. git never reads the workspace
// repository's configuration, hooks or attributes drivers: see git.go.
func (s *Sandboxer) commit(ctx context.Context, op *protocol.SandboxOp) (string, error) {
	msg := op.Commit.Message
	if strings.TrimSpace(msg) == "" {
		msg = "harness: the changes of run " + op.Run
	}
	return s.gitRepo(op).commit(ctx, msg, false)
}

// closeSnapshot removes a run's materialised workspace once its changes
// are collected, and the claim on it, unless KeepSnapshots.
func (s *Sandboxer) closeSnapshot(ctx context.Context, run string) {
	dir := s.snapPath(run)
	if s.cfg.SnapshotDir == "" || !exists(filepath.Join(dir, snapCollected)) || s.cfg.KeepSnapshots {
		return
	}
	defer s.snapLocks.lock(run)()
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("remove collected snapshot workspace", "run", run, "err", err)
		return
	}
	if s.cfg.Ops != nil {
		_ = s.cfg.Ops.Delete(ctx, claimKey(run))
	}
}

// inSnapshots reports whether dir is SnapshotDir or lies beneath it: a
// root workspace may never reach another run's snapshot.
func (s *Sandboxer) inSnapshots(dir string) bool {
	sd := s.cfg.SnapshotDir
	if sd == "" {
		return false
	}
	return dir == sd || strings.HasPrefix(dir, sd+string(filepath.Separator)) || strings.HasPrefix(sd, dir+string(filepath.Separator))
}

// snapshotDefaults fills the snapshot settings and makes SnapshotDir,
// resolved as the roots are, so the two can be compared.
func (c *Config) snapshotDefaults() error {
	if c.CommitAuthor == "" {
		c.CommitAuthor = "harness"
	}
	if c.CommitEmail == "" {
		c.CommitEmail = "harness@localhost"
	}
	if c.Workspaces == nil {
		return nil
	}
	chosen := c.SnapshotDir != ""
	if !chosen {
		c.SnapshotDir = filepath.Join(os.TempDir(), "harness-snapshots-"+c.ID)
	}
	dir, err := filepath.Abs(c.SnapshotDir)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil && chosen {
		return fmt.Errorf("sandboxer snapshot directory: %w", err)
	}
	if err != nil {
		// The default place is not writable here: serve roots only, rather
		// than not at all.
		c.Logger.Warn("no snapshot directory; serving no snapshot workspaces (give one with --snapshots)", "dir", dir, "err", err)
		c.Workspaces, c.SnapshotDir = nil, ""
		return nil
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	c.SnapshotDir = dir
	return nil
}

// runLocks are mutexes by run id, each there while someone holds or waits
// for it.
type runLocks struct {
	mu    sync.Mutex
	locks map[string]*runLock
}

type runLock struct {
	sync.Mutex
	users int
}

// lock takes run's lock and returns its release.
func (l *runLocks) lock(run string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*runLock{}
	}
	rl := l.locks[run]
	if rl == nil {
		rl = &runLock{}
		l.locks[run] = rl
	}
	rl.users++
	l.mu.Unlock()
	rl.Lock()
	return func() {
		rl.Unlock()
		l.mu.Lock()
		if rl.users--; rl.users == 0 {
			delete(l.locks, run)
		}
		l.mu.Unlock()
	}
}
