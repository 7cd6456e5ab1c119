package trace_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// blobs returns a blob store over a real object store, and the store.
func blobs(t *testing.T) (*trace.Blobs, jetstream.JetStream) {
	t.Helper()
	js, _, _ := open(t)
	store, err := js.CreateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: "blobs"})
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewBlobs(store), js
}

// record is a step whose turn, second observation and image are over a
// 64-byte limit, and whose first observation is under it.
func record() *protocol.Record {
	long := strings.Repeat("output ", 20)
	return &protocol.Record{Kind: protocol.RecordStep, Step: 1,
		Turn: &protocol.Turn{Text: strings.Repeat("thinking ", 10), ToolCalls: []protocol.ToolCall{{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"path":"x"}`)}}},
		Observations: []protocol.Observation{
			{CallID: "a", Tool: "read_file", Content: "short"},
			{CallID: "b", Tool: "exec", Content: long},
			{CallID: "c", Tool: "view_image", Content: "an image", Image: &protocol.Image{MediaType: "image/png", Data: []byte("\x89PNG")}},
		}}
}

// TestSlimAndResolve slims a record: what is over the limit, and every
// image, moves to the store and is held by reference, the rest stays
// inline, and the record given is not changed; Resolve brings it all back.
func TestSlimAndResolve(t *testing.T) {
	b, _ := blobs(t)
	ctx := t.Context()
	rec := record()
	slim := b.Slim(ctx, rec, 64)
	if diff := cmp.Diff(record(), rec); diff != "" {
		t.Errorf("Slim changed the record it was given (-want +got):\n%s", diff)
	}
	if slim.Turn != nil || slim.TurnRef == "" {
		t.Errorf("slim turn = %+v, ref %q; want it by reference", slim.Turn, slim.TurnRef)
	}
	if o := slim.Observations[0]; o.Content != "short" || o.Ref != "" {
		t.Errorf("short observation = %+v, want it inline", o)
	}
	if o, long := slim.Observations[1], rec.Observations[1].Content; o.Content != "" || o.Ref == "" || o.Size != len(long) {
		t.Errorf("long observation = %+v, want it by reference, size %d", o, len(long))
	}
	if o := slim.Observations[2]; o.Image != nil || o.ImageRef == "" || o.Content != "an image" {
		t.Errorf("image observation = %+v, want its image by reference and its text inline", o)
	}
	if data, _ := json.Marshal(slim); len(data) > 1024 {
		t.Errorf("slim record is %d bytes", len(data))
	}

	recs := []protocol.Record{*slim}
	if err := b.Resolve(ctx, recs); err != nil {
		t.Fatal(err)
	}
	want := record()
	want.TurnRef = slim.TurnRef
	want.Observations[1].Ref, want.Observations[1].Size = slim.Observations[1].Ref, slim.Observations[1].Size
	want.Observations[2].ImageRef = slim.Observations[2].ImageRef
	if diff := cmp.Diff(want, &recs[0]); diff != "" {
		t.Errorf("resolved record (-want +got):\n%s", diff)
	}
}

// TestSlimKeepsWhatItCannotStore: with the store gone, a record stays as
// it is, inline, rather than losing content.
func TestSlimKeepsWhatItCannotStore(t *testing.T) {
	b, js := blobs(t)
	if err := js.DeleteObjectStore(t.Context(), "blobs"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(record(), b.Slim(t.Context(), record(), 64)); diff != "" {
		t.Errorf("slim without a store (-want +got):\n%s", diff)
	}
}

// TestResolveMissingBlob: a reference to nothing is an error that says so.
func TestResolveMissingBlob(t *testing.T) {
	b, _ := blobs(t)
	recs := []protocol.Record{{Kind: protocol.RecordStep, Step: 1, Observations: []protocol.Observation{{CallID: "a", Ref: "sha256-00"}}}}
	if err := b.Resolve(t.Context(), recs); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("Resolve(missing blob) = %v, want ErrObjectNotFound", err)
	}
}
