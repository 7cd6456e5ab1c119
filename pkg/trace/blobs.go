package trace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
)

// Blobs is a content-addressed store for what is too large to sit in a
// trace record: long tool output, long turns.
type Blobs struct {
	os jetstream.ObjectStore
}

// NewBlobs returns Blobs over the object store.
func NewBlobs(os jetstream.ObjectStore) *Blobs { return &Blobs{os: os} }

// Put stores data under the hex SHA-256 of its content and returns that
// reference. Storing the same content twice stores it once.
func (b *Blobs) Put(ctx context.Context, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	ref := "sha256-" + hex.EncodeToString(sum[:])
	if info, err := b.os.GetInfo(ctx, ref); err == nil {
		// Held already, perhaps for a run long gone: it is used again now,
		// so the retention sweep counts its age from here.
		_ = Touch(ctx, b.os, info, time.Now())
		return ref, nil
	}
	if _, err := b.os.PutBytes(ctx, ref, data); err != nil {
		return "", fmt.Errorf("put blob %s: %w", ref, err)
	}
	return ref, nil
}

// Get returns the content stored under ref. Errors: jetstream's
// ErrObjectNotFound, wrapped, when there is no such blob.
func (b *Blobs) Get(ctx context.Context, ref string) ([]byte, error) {
	data, err := b.os.GetBytes(ctx, ref)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("blob %s: %w", ref, err)
		}
		return nil, fmt.Errorf("get blob %s: %w", ref, err)
	}
	return data, nil
}

// Slim returns rec as the trace keeps it: a turn whose JSON, or an
// observation whose content, is larger than limit bytes moves to the store
// and is held by reference, as does every observation's image
// (ARCHITECTURE invariant 9). A blob that cannot be stored stays inline:
// the record is larger, and nothing is lost. rec is not changed.
func (b *Blobs) Slim(ctx context.Context, rec *protocol.Record, limit int) *protocol.Record {
	out := *rec
	if rec.Turn != nil {
		if data, err := json.Marshal(rec.Turn); err == nil && len(data) > limit {
			if ref, err := b.Put(ctx, data); err == nil {
				out.Turn, out.TurnRef = nil, ref
			}
		}
	}
	out.Observations = b.slim(ctx, rec.Observations, limit)
	out.Rereads = b.slim(ctx, rec.Rereads, limit) // a file read again is as large as the read
	return &out
}

// slim returns a copy of obs with large content and every image held by
// reference.
func (b *Blobs) slim(ctx context.Context, obs []protocol.Observation, limit int) []protocol.Observation {
	if len(obs) == 0 {
		return obs
	}
	out := make([]protocol.Observation, len(obs))
	for i, o := range obs {
		if len(o.Content) > limit {
			if ref, err := b.Put(ctx, []byte(o.Content)); err == nil {
				o.Ref, o.Size, o.Content = ref, len(o.Content), ""
			}
		}
		if o.Image != nil {
			if data, err := json.Marshal(o.Image); err == nil {
				if ref, err := b.Put(ctx, data); err == nil {
					o.ImageRef, o.Image = ref, nil
				}
			}
		}
		out[i] = o
	}
	return out
}

// Resolve fills in the content that records hold by reference (turns,
// observations and their images in the store), in place: Slim undone.
// Errors: a missing blob (jetstream's ErrObjectNotFound, wrapped), or one
// that does not decode.
func (b *Blobs) Resolve(ctx context.Context, recs []protocol.Record) error {
	for i := range recs {
		r := &recs[i]
		if r.TurnRef != "" && r.Turn == nil {
			data, err := b.Get(ctx, r.TurnRef)
			if err != nil {
				return err
			}
			var t protocol.Turn
			if err := json.Unmarshal(data, &t); err != nil {
				return fmt.Errorf("decode turn blob %s: %w", r.TurnRef, err)
			}
			r.Turn = &t
		}
		if err := b.resolve(ctx, r.Observations); err != nil {
			return err
		}
		if err := b.resolve(ctx, r.Rereads); err != nil {
			return err
		}
	}
	return nil
}

// resolve fills in obs's content and images held by reference, in place.
func (b *Blobs) resolve(ctx context.Context, obs []protocol.Observation) error {
	for j := range obs {
		o := &obs[j]
		if o.Ref != "" && o.Content == "" {
			data, err := b.Get(ctx, o.Ref)
			if err != nil {
				return err
			}
			o.Content = string(data)
		}
		if o.ImageRef != "" && o.Image == nil {
			data, err := b.Get(ctx, o.ImageRef)
			if err != nil {
				return err
			}
			var img protocol.Image
			if err := json.Unmarshal(data, &img); err != nil {
				return fmt.Errorf("decode image blob %s: %w", o.ImageRef, err)
			}
			o.Image = &img
		}
	}
	return nil
}

// UsedKey is the metadata key under which an object of the blob or
// workspace store says when a run last needed it (RFC 3339); the
// retention sweep counts an object's age from it, or from when it was
// written.
const UsedKey = "harness-used"

// Touch records that an object is needed at now.
func Touch(ctx context.Context, store jetstream.ObjectStore, info *jetstream.ObjectInfo, now time.Time) error {
	meta := info.ObjectMeta
	md := make(map[string]string, len(meta.Metadata)+1)
	for k, v := range meta.Metadata {
		md[k] = v
	}
	md[UsedKey] = now.UTC().Format(time.RFC3339)
	meta.Metadata = md
	return store.UpdateMeta(ctx, info.Name, meta)
}

// LastUsed is when an object was last needed: the later of when it was
// written and when it was last touched.
func LastUsed(info *jetstream.ObjectInfo) time.Time {
	used := info.ModTime
	if t, err := time.Parse(time.RFC3339, info.Metadata[UsedKey]); err == nil && t.After(used) {
		used = t
	}
	return used
}
