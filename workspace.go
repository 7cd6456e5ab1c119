package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// Snapshot is a workspace packed for upload: the archive in a temporary
// file, and its ref, which a contract names as workspace.snapshot. Remove
// it once uploaded.
type Snapshot struct {
	// Ref is "sha256-" and the hex SHA-256 of the archive.
	Ref string
	// Size is the archive's length in bytes.
	Size int64
	// Info counts the entries and the bytes of the files packed.
	Info snapshot.Info
	path string
}

// PackSnapshot packs the directory dir into a temporary file, ready for
// Client.PutSnapshot. A symbolic link leading out of dir and a file with
// more than one hard link are left out, each listed with its reason in the
// snapshot's Info.LeftOut: the sandboxer would refuse them. Errors: those
// of snapshot.Pack, each a *protocol.Error naming the entry (a FIFO or
// device, too large); an unwritable temporary directory.
func PackSnapshot(dir string, opts snapshot.PackOptions) (*Snapshot, error) {
	f, err := os.CreateTemp("", "harness-snapshot-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("pack snapshot: %w", err)
	}
	h := sha256.New()
	info, err := snapshot.Pack(io.MultiWriter(f, h), dir, opts)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pack snapshot: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, err
	}
	fi, err := os.Stat(f.Name())
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("pack snapshot: %w", err)
	}
	return &Snapshot{Ref: "sha256-" + hex.EncodeToString(h.Sum(nil)), Size: fi.Size(), Info: *info, path: f.Name()}, nil
}

// Remove deletes the snapshot's temporary file.
func (s *Snapshot) Remove() error { return os.Remove(s.path) }

// PutSnapshot stores a packed snapshot in the cluster's harness-workspaces
// object store under its ref; one stored already is left as it is.
// Errors: the object store's, wrapped.
func (c *Client) PutSnapshot(ctx context.Context, s *Snapshot) error {
	if _, err := c.assets.Workspaces.GetInfo(ctx, s.Ref); err == nil {
		return nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("upload snapshot: %w", err)
	}
	defer f.Close()
	if _, err := c.assets.Workspaces.Put(ctx, jetstream.ObjectMeta{Name: s.Ref, Description: "workspace snapshot"}, f); err != nil {
		return fmt.Errorf("upload snapshot %s: %w", s.Ref, err)
	}
	return nil
}

// UploadWorkspace packs the directory dir and stores it in the cluster's
// object store, and returns its ref, for a contract's workspace.snapshot.
// Errors: as PackSnapshot and PutSnapshot.
func (c *Client) UploadWorkspace(ctx context.Context, dir string, opts snapshot.PackOptions) (string, error) {
	s, err := PackSnapshot(dir, opts)
	if err != nil {
		return "", err
	}
	defer s.Remove()
	if err := c.PutSnapshot(ctx, s); err != nil {
		return "", err
	}
	return s.Ref, nil
}

// patchRecord returns the patch a finished run's record holds. Errors:
// protocol.ErrUnknownRun; protocol.ErrNotFound while the run has not
// finished, or when its workspace was not a snapshot.
func (c *Client) patchRecord(ctx context.Context, run string) (*protocol.Patch, error) {
	if !protocol.ValidToken(run) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", run)
	}
	rec, err := c.lastRecord(ctx, run)
	if err != nil {
		return nil, err
	}
	if rec.Kind != protocol.RecordFinished {
		return nil, protocol.Errorf(protocol.CodeNotFound, "run %s has not finished; its changes come back when it does", run)
	}
	if rec.Patch == nil {
		return nil, protocol.Errorf(protocol.CodeNotFound, "run %s worked in a directory on its sandboxer, not a snapshot: its changes are there", run)
	}
	return rec.Patch, nil
}

// patch is RunHandle.Patch of run.
func (c *Client) patch(ctx context.Context, run string) (*protocol.Patch, []byte, error) {
	p, err := c.patchRecord(ctx, run)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case p.Error != nil && p.Ref == "":
		return p, nil, p.Error
	case p.Ref == "":
		return p, nil, nil
	}
	data, err := c.assets.Workspaces.GetBytes(ctx, p.Ref)
	if err != nil {
		return p, nil, fmt.Errorf("fetch patch %s: %w", p.Ref, err)
	}
	if got := snapshot.Ref(data); got != p.Ref {
		// Anyone who may write the object store could have replaced it.
		return p, nil, protocol.Errorf(protocol.CodeInvalidField, "the patch stored as %s has other content (%s): it was replaced after the run; do not apply it", p.Ref, got)
	}
	return p, data, nil
}

// series is RunHandle.Series of run.
func (c *Client) series(ctx context.Context, run string) ([]protocol.CommitInfo, []byte, error) {
	p, err := c.patchRecord(ctx, run)
	if err != nil {
		return nil, nil, err
	}
	if p.Series == "" {
		return nil, nil, nil
	}
	data, err := c.assets.Workspaces.GetBytes(ctx, p.Series)
	if err != nil {
		return p.Commits, nil, fmt.Errorf("fetch patch series %s: %w", p.Series, err)
	}
	if got := snapshot.Ref(data); got != p.Series {
		return p.Commits, nil, protocol.Errorf(protocol.CodeInvalidField, "the patch series stored as %s has other content (%s): it was replaced after the run; do not apply it", p.Series, got)
	}
	return p.Commits, data, nil
}

// lastRecord returns a run's last trace record. Errors:
// protocol.ErrUnknownRun when it has none.
func (c *Client) lastRecord(ctx context.Context, run string) (*protocol.Record, error) {
	m, err := c.assets.Trace.GetLastMsgForSubject(ctx, wire.Trace(run))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "no run %s", run)
	}
	if err != nil {
		return nil, fmt.Errorf("read the trace of %s: %w", run, err)
	}
	return trace.Decode(m.Data)
}

// withPatch adds to a result the patch its finished record holds, if any.
func (c *Client) withPatch(ctx context.Context, res *protocol.Result) *protocol.Result {
	if rec, err := c.lastRecord(ctx, res.Run); err == nil && rec.Kind == protocol.RecordFinished {
		res.Patch = rec.Patch
	}
	return res
}
