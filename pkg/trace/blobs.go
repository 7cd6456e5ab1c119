package trace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
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
	if _, err := b.os.GetInfo(ctx, ref); err == nil {
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
