package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
)

// Index is the run index: a key-value bucket mapping each run id to where
// it stands. It is a cache of the trace, written after the trace.
type Index struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
}

// NewIndex returns an Index over the bucket. js, when not nil, lets
// Progress publish without waiting.
func NewIndex(kv jetstream.KeyValue, js jetstream.JetStream) *Index { return &Index{kv: kv, js: js} }

// Progress records a running run's state without waiting for the server's
// acknowledgement, so a step does not wait on the index: the trace already
// holds the truth, and a later Put supersedes a lost update. It falls back
// to Put without a JetStream handle.
func (x *Index) Progress(ctx context.Context, st *protocol.RunState) error {
	if x.js == nil {
		return x.Put(ctx, st)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode run state: %w", err)
	}
	// Not retried on the client's timer: a retry could land after a Put
	// of the run's next state, made after it.
	if _, err := x.js.PublishAsync(x.Subject(st.Run), data, jetstream.WithRetryAttempts(0)); err != nil {
		return fmt.Errorf("index run %s: %w", st.Run, err)
	}
	return nil
}

// Subject is the subject a run's state is published on as it changes, for
// a subscriber that waits on it without a consumer of its own (which
// then reads it once with Get, for a change made before it subscribed).
func (x *Index) Subject(run string) string { return "$KV." + x.kv.Bucket() + "." + run }

// Put records a run's state.
func (x *Index) Put(ctx context.Context, st *protocol.RunState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode run state: %w", err)
	}
	if _, err := x.kv.Put(ctx, st.Run, data); err != nil {
		return fmt.Errorf("index run %s: %w", st.Run, err)
	}
	return nil
}

// Get returns a run's state. Errors: protocol.ErrUnknownRun if the index
// has no such run.
func (x *Index) Get(ctx context.Context, run string) (*protocol.RunState, error) {
	if !protocol.ValidToken(run) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", run)
	}
	e, err := x.kv.Get(ctx, run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "no run %s", run)
	}
	if err != nil {
		return nil, fmt.Errorf("look up run %s: %w", run, err)
	}
	var st protocol.RunState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, fmt.Errorf("decode run state %s: %w", run, err)
	}
	return &st, nil
}

// Wait blocks until run's state satisfies done, and returns that state. It
// watches the bucket, so it sees the current value first and then every
// change, and it also reads the run's state every waitPoll: a watch begun
// while a restarted cluster elects its leaders can stay silent, and one
// that ends is begun again. Errors: the context's error.
func (x *Index) Wait(ctx context.Context, run string, done func(*protocol.RunState) bool) (*protocol.RunState, error) {
	var w jetstream.KeyWatcher
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	watch := func() <-chan jetstream.KeyValueEntry {
		var err error
		if w, err = x.kv.Watch(ctx, run); err != nil {
			w = nil
			return nil // the next poll tries again
		}
		return w.Updates()
	}
	updates := watch()
	poll := time.NewTicker(waitPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-poll.C:
			if st, err := x.Get(ctx, run); err == nil && done(st) {
				return st, nil
			}
			if updates == nil {
				updates = watch()
			}
		case e, ok := <-updates:
			if !ok {
				_ = w.Stop()
				w, updates = nil, nil
				continue
			}
			if e == nil {
				continue // the end of the initial values
			}
			var st protocol.RunState
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				continue
			}
			if done(&st) {
				return &st, nil
			}
		}
	}
}

// waitPoll is how often Wait reads a run's state besides watching it.
var waitPoll = 5 * time.Second

// List returns the state of every run in the index, read in one pass of
// a watch over the bucket (the latest entry of each run, then the end of
// them), not a look-up a run: a coordinator lists the index to rebuild a
// tree's budget, and an index holds every run kept (30 days of them by
// default). An entry that does not decode, or whose key is not a run id,
// is left out.
func (x *Index) List(ctx context.Context) ([]protocol.RunState, error) {
	w, err := x.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []protocol.RunState
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list runs: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("list runs: the watch of the index ended before every run was read (the connection to NATS was lost?); list again")
			}
			if e == nil {
				return out, nil // every run's latest entry is in
			}
			var st protocol.RunState
			if !protocol.ValidToken(e.Key()) || json.Unmarshal(e.Value(), &st) != nil {
				continue
			}
			out = append(out, st)
		}
	}
}
