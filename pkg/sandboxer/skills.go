package sandboxer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/skills"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/tools"
)

// readSkillTool is the call a coordinator sends for the read of a skill
// of a skills snapshot: {"path": "skills/..."}, one of the catalogue's
// paths. It is the harness's own (no Tools set may offer the name), and
// answered here from the run's copy of the snapshot, never the workspace.
const readSkillTool = "read_skill"

// skillsSuffix names the directory a run's skills snapshot is unpacked
// into, SnapshotDir/<run>.skills: a run id holds no '.', so it is no
// snapshot workspace's directory, and SnapshotDir is refused as (or
// inside, or around) a root workspace, so no file tool reaches it.
const skillsSuffix = ".skills"

// skillSet is a run's skills snapshot as this node unpacked it: dir,
// whose protocol.SkillsSnapshotRoot holds the snapshot, open as a
// tools.Workspace of its own (never the run's workspace), and the
// catalogue read from it, whose paths are the only files read_skill
// reads.
type skillSet struct {
	ref string
	dir string
	ws  *tools.Workspace
	cat []protocol.Skill
}

func (k *skillSet) holds(p string) bool {
	for _, sk := range k.cat {
		if sk.Path == p {
			return true
		}
	}
	return false
}

func (s *Sandboxer) skillsPath(run string) string {
	return filepath.Join(s.cfg.SnapshotDir, run+skillsSuffix)
}

// skills reads the catalogue of the skills an open names. A skills
// directory is read in the run's workspace w, following no symbolic link
// (tools.Workspace NoLinks): what it reads is inside the workspace
// whatever the workspace holds. A skills snapshot is fetched and unpacked
// into a directory of the run's own, apart from the workspace (see
// skillSet). The catalogue is the contract's to name, so it is read
// whatever the run's policy says; a skill's body is the agent's to read,
// through the policy, with read_skill. It returns nil for an open naming
// no skills. Errors: a *protocol.Error naming skills.dir or
// skills.snapshot, and the file at fault; for a snapshot, those of
// skillSet too. A snapshot that fails leaves nothing behind.
func (s *Sandboxer) skills(ctx context.Context, run string, w *workspace, spec *protocol.SkillsSpec) ([]protocol.Skill, error) {
	switch {
	case spec == nil:
		return nil, nil
	case spec.Snapshot != "":
		k, err := s.skillSet(ctx, run, spec.Snapshot)
		if err != nil {
			return nil, err
		}
		return k.cat, nil
	case !fs.ValidPath(spec.Dir):
		return nil, protocol.FieldError(protocol.CodeInvalidField, "skills.dir", "name a directory relative to the workspace root, such as \"skills\"",
			"the skills directory %q is not a clean path inside the workspace", spec.Dir)
	}
	return skills.Load(w.ws.NoLinks(), spec.Dir)
}

// skillSet returns the run's skills snapshot ref as this node holds it,
// unpacking it first when it does not: on the open that names it, and
// again on a read after a restart lost it. Errors, each a
// *protocol.Error naming skills.snapshot: CodeUnsupported from a node
// without an object store; CodeInvalidField for a ref that is no ref,
// and for a catalogue that is malformed (naming the file); those of
// fetch (CodeNotFound for a ref the store does not hold, CodeTooLarge,
// CodeMalformed for content that is not what the ref names) and of
// snapshot.Unpack (a hostile archive).
func (s *Sandboxer) skillSet(ctx context.Context, run, ref string) (*skillSet, error) {
	const field = "skills.snapshot"
	if s.cfg.Workspaces == nil {
		return nil, protocol.FieldError(protocol.CodeUnsupported, field, "run a sandboxer connected to the cluster's object store", "this sandboxer serves no skills snapshots")
	}
	if !protocol.ValidSnapshotRef(ref) {
		return nil, protocol.FieldError(protocol.CodeInvalidField, field, `a snapshot ref is "sha256-" and 64 hex digits`, "%q is not a snapshot ref", ref)
	}
	held := func() *skillSet {
		s.mu.Lock()
		defer s.mu.Unlock()
		if k := s.skillSets[run]; k != nil && k.ref == ref {
			return k
		}
		return nil
	}
	if k := held(); k != nil {
		return k, nil
	}
	s.skillsMu.Lock()
	defer s.skillsMu.Unlock()
	if k := held(); k != nil {
		return k, nil // unpacked meanwhile, by a call of the same run
	}
	k, err := s.unpackSkills(ctx, run, ref)
	if err != nil {
		s.log.Info("skills snapshot refused", "run", run, "snapshot", ref, "err", err)
		return nil, err
	}
	s.mu.Lock()
	old := s.skillSets[run]
	s.skillSets[run] = k
	s.mu.Unlock()
	if old != nil {
		_ = old.ws.Close() // another ref for the run: it is no longer read
	}
	s.log.Info("skills snapshot unpacked", "run", run, "snapshot", ref, "dir", k.dir, "skills", len(k.cat))
	return k, nil
}

// unpackSkills fetches the skills snapshot ref, checks it is what its ref
// names, unpacks it with the limits and the checks of a workspace
// snapshot into SnapshotDir/<run>.skills/skills, and reads its
// catalogue. On an error the directory is removed. The caller holds
// skillsMu.
func (s *Sandboxer) unpackSkills(ctx context.Context, run, ref string) (*skillSet, error) {
	const field = "skills.snapshot"
	lim := s.cfg.SnapshotLimits.WithDefaults()
	dir := s.skillsPath(run)
	fail := func(err error) (*skillSet, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// What a previous life of this node left is not trusted: unpacked again.
	if err := os.RemoveAll(dir); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "clear %s: %s", dir, err.Error())
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "skills directory: %s", err.Error())
	}
	archive := filepath.Join(dir, snapArchive)
	if err := s.fetch(ctx, ref, archive, lim.MaxArchiveBytes, field, "upload the skills with harness submit --skills DIR, or Client.UploadWorkspace"); err != nil {
		return fail(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		return fail(protocol.Errorf(protocol.CodeInternal, "read skills snapshot: %s", err.Error()))
	}
	_, err = snapshot.Unpack(f, filepath.Join(dir, protocol.SkillsSnapshotRoot), lim)
	f.Close()
	if err != nil {
		return fail(refield(err, field))
	}
	if err := os.Remove(archive); err != nil {
		return fail(protocol.Errorf(protocol.CodeInternal, "remove the skills archive: %s", err.Error()))
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		return fail(protocol.Errorf(protocol.CodeInternal, "open the skills snapshot: %s", err.Error()))
	}
	cat, err := skills.LoadSnapshot(ws.NoLinks(), ref)
	if err != nil {
		_ = ws.Close()
		return fail(err)
	}
	return &skillSet{ref: ref, dir: dir, ws: ws, cat: cat}, nil
}

// refield is err with its field set to field, for the snapshot package's
// refusals (which name workspace.snapshot) of a skills snapshot.
func refield(err error, field string) error {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	out.Field = field
	return &out
}

// skillReader is what answers a read_skill call of op: the read_file
// tool, on the run's skills snapshot instead of its workspace, for a path
// of the catalogue. It returns the message the model reads instead when
// the run has no skills snapshot, it cannot be had, or the path is not a
// skill's.
func (s *Sandboxer) skillReader(ctx context.Context, op *protocol.SandboxOp) (*tools.Workspace, string) {
	if op.Skills == nil || op.Skills.Snapshot == "" {
		return nil, "[read_skill failed] this run has no skills snapshot; read the skills of a skills directory with read_file"
	}
	k, err := s.skillSet(ctx, op.Run, op.Skills.Snapshot)
	if err != nil {
		return nil, "[read_skill failed] the run's skills cannot be read: " + protocol.AsError(err).Message
	}
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(op.Call.Arguments, &a); err != nil || !k.holds(path.Clean(a.Path)) {
		return nil, fmt.Sprintf("[read_skill failed] %q is not the path of one of the run's skills", a.Path)
	}
	return k.ws, ""
}

// closeSkills removes the run's skills snapshot, unpacked or left by a
// previous life of this node; it holds nothing of the run's work, and is
// unpacked again if the run reads a skill later.
func (s *Sandboxer) closeSkills(run string) {
	if s.cfg.SnapshotDir == "" {
		return
	}
	s.skillsMu.Lock()
	defer s.skillsMu.Unlock()
	s.mu.Lock()
	k := s.skillSets[run]
	delete(s.skillSets, run)
	s.mu.Unlock()
	if k != nil {
		_ = k.ws.Close()
	}
	if err := os.RemoveAll(s.skillsPath(run)); err != nil {
		s.log.Warn("remove the skills snapshot", "run", run, "err", err)
	}
}

// closeAllSkills removes every skills snapshot this node unpacked, and
// any a previous life of it left behind: a run still going unpacks its
// own again when it reads a skill.
func (s *Sandboxer) closeAllSkills() {
	if s.cfg.SnapshotDir == "" {
		return
	}
	s.mu.Lock()
	runs := make([]string, 0, len(s.skillSets))
	for run := range s.skillSets {
		runs = append(runs, run)
	}
	s.mu.Unlock()
	for _, run := range runs {
		s.closeSkills(run)
	}
	entries, _ := os.ReadDir(s.cfg.SnapshotDir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), skillsSuffix) {
			continue
		}
		dir := filepath.Join(s.cfg.SnapshotDir, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("remove a skills snapshot left behind", "dir", dir, "err", err)
		}
	}
}
