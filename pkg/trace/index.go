package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
)

// Index is the run index: a key-value bucket mapping each run id to where
// it stands. It is a cache of the trace, written after the trace.
type Index struct {
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	direct bool // List reads with a direct get first (ListDirect)
	// large says the last listing found more keys than a direct get
	// answers for, so the next goes straight to the watch.
	large atomic.Bool
}

// IndexOption sets how an Index reads its bucket.
type IndexOption func(*Index)

// ListDirect has List read the latest entry of every run with one direct
// get of the bucket's stream, a single request, rather than a watch, which
// creates a consumer and deletes it again; a bucket of more runs than one
// direct get answers for (directListMax) is listed with the watch, and
// its next listing goes to the watch at once. It needs a
// connection allowed to publish to $JS.API.DIRECT.GET.KV_<bucket>, as a
// coordinator's is: a request the server refuses gets no answer, and List
// would wait directListWait for it before it watched. The stream's
// replicas answer direct gets, so the listing may miss a change made in
// the last moment, as a listing begun a moment earlier would.
func ListDirect() IndexOption { return func(x *Index) { x.direct = true } }

// NewIndex returns an Index over the bucket. js, when not nil, lets
// Progress publish without waiting, and List read directly when asked
// (ListDirect).
func NewIndex(kv jetstream.KeyValue, js jetstream.JetStream, opts ...IndexOption) *Index {
	x := &Index{kv: kv, js: js}
	for _, o := range opts {
		o(x)
	}
	return x
}

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
// default). With ListDirect, an index of up to 1,024 runs is read with one
// direct get instead. An entry that does not decode, or whose key is not a
// run id, is left out.
func (x *Index) List(ctx context.Context) ([]protocol.RunState, error) {
	if x.direct && x.js != nil && !x.large.Load() {
		if out, ok := x.listDirect(ctx); ok {
			return out, nil
		}
	}
	w, err := x.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []protocol.RunState
	keys := 0 // deleted ones too: a direct get answers for them
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list runs: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("list runs: the watch of the index ended before every run was read (the connection to NATS was lost?); list again")
			}
			if e == nil {
				x.large.Store(keys > directListMax)
				return out, nil // every run's latest entry is in
			}
			keys++
			var st protocol.RunState
			if e.Operation() != jetstream.KeyValuePut || !protocol.ValidToken(e.Key()) || json.Unmarshal(e.Value(), &st) != nil {
				continue
			}
			out = append(out, st)
		}
	}
}

// directListWait bounds how long List waits on a direct get before it
// watches instead.
const directListWait = 2 * time.Second

// directListMax is the most keys a direct get answers for at once, a
// limit of the server's.
const directListMax = 1024

// directListBytes is the most bytes a direct get is asked to send, zero
// for the server's own bound (its max_pending, 64 MB by default): an
// answer that stops at its bytes says so, and the index is watched.
var directListBytes = 0

// listDirect reads the latest entry of every key of the bucket with one
// direct get of its stream (a request for the last message of each
// subject, answered with them and then an end-of-batch). It reports false,
// for List to watch instead, when the answer is not that: more keys than
// the server answers for at once (then it says so for the next listing),
// a server that does not know the request, a stream that does not answer
// direct gets, an answer the server cut at its bytes, no answer in
// directListWait, an answer lost on its way.
func (x *Index) listDirect(ctx context.Context) ([]protocol.RunState, bool) {
	ctx, cancel := context.WithTimeout(ctx, directListWait)
	defer cancel()
	nc := x.js.Conn()
	prefix := "$KV." + x.kv.Bucket() + "."
	inbox := nc.NewInbox()
	// Room for the longest answer, the keys and the end-of-batch: a
	// channel subscription drops what does not fit.
	msgs := make(chan *nats.Msg, directListMax+1)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return nil, false
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		MaxBytes  int      `json:"max_bytes,omitempty"`
	}{[]string{prefix + ">"}, directListBytes})
	if err != nil {
		return nil, false
	}
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.KV_"+x.kv.Bucket(), inbox, req); err != nil {
		return nil, false
	}
	var out []protocol.RunState
	for {
		var m *nats.Msg
		select {
		case m = <-msgs:
		case <-ctx.Done():
			return nil, false
		}
		switch m.Header.Get(statusHeader) {
		case "":
		case "204": // the end of the batch: every key's latest entry is in,
			// unless the server stopped at its bytes and says some are not
			if n, err := sub.Dropped(); err != nil || n > 0 || m.Header.Get(numPendingHeader) != "0" {
				return nil, false
			}
			return out, true
		case "404": // no key, or one that failed to load
			if m.Header.Get(descriptionHeader) == "No Results" {
				return nil, true
			}
			return nil, false
		case "413": // too many keys
			x.large.Store(true)
			return nil, false
		default: // 503 no direct gets, 400 an older server
			return nil, false
		}
		key, ok := strings.CutPrefix(m.Header.Get(jetstream.SubjectHeader), prefix)
		switch op := m.Header.Get(kvOperation); {
		case !ok:
			return nil, false // not an answer to this request
		case op == "DEL" || op == "PURGE" || !protocol.ValidToken(key):
			continue
		}
		var st protocol.RunState
		if json.Unmarshal(m.Data, &st) != nil {
			continue
		}
		out = append(out, st)
	}
}

// statusHeader and descriptionHeader are the headers a status message (no
// data) carries its code and its description in.
const (
	statusHeader      = "Status"
	descriptionHeader = "Description"
)

// numPendingHeader is the header an end-of-batch says in how many of the
// asked messages were not sent.
const numPendingHeader = "Nats-Num-Pending"

// kvOperation is the header a key-value bucket marks a deleted or purged
// key's entry with (its values DEL and PURGE).
const kvOperation = "KV-Operation"
