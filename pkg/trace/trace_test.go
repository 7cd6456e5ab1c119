package trace_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// open starts a real in-process JetStream server and returns the trace
// stream over it.
func open(t *testing.T) (jetstream.JetStream, *trace.Trace, jetstream.Stream) {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: trace.StreamName, Subjects: []string{trace.SubjectPrefix + ">"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return js, trace.New(js, st), st
}

func TestAppendAndRead(t *testing.T) {
	_, tr, _ := open(t)
	ctx := t.Context()
	w := tr.Writer("run-1", 0)
	recs := []*protocol.Record{
		{Kind: protocol.RecordStarted, Contract: &protocol.Contract{Task: "t"}},
		{Kind: protocol.RecordStep, Step: 1, Tokens: 10},
		{Kind: protocol.RecordStep, Step: 2, Tokens: 25},
		{Kind: protocol.RecordFinished, Step: 2, Outcome: protocol.OutcomeSuccess},
	}
	for _, r := range recs {
		if err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Another run interleaved on the same stream does not show up.
	if err := tr.Writer("run-2", 0).Append(ctx, &protocol.Record{Kind: protocol.RecordStarted}); err != nil {
		t.Fatal(err)
	}
	got, last, err := tr.Read(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || last != w.LastSeq() {
		t.Fatalf("Read = %d records up to %d, want 4 up to %d", len(got), last, w.LastSeq())
	}
	for i, r := range got {
		if r.Kind != recs[i].Kind || r.Step != recs[i].Step || r.Run != "run-1" || r.Format != protocol.TraceFormat {
			t.Errorf("record %d = %+v, want %s step %d of run-1", i, r, recs[i].Kind, recs[i].Step)
		}
	}
	if got, last, err := tr.Read(ctx, "run-3"); err != nil || len(got) != 0 || last != 0 {
		t.Errorf("Read(unknown run) = %d, %d, %v; want nothing", len(got), last, err)
	}
}

// TestFencing checks that two writers cannot both advance a run: the one
// whose view is stale is refused and writes nothing.
func TestFencing(t *testing.T) {
	_, tr, _ := open(t)
	ctx := t.Context()
	a := tr.Writer("run-1", 0)
	if err := a.Append(ctx, &protocol.Record{Kind: protocol.RecordStarted}); err != nil {
		t.Fatal(err)
	}
	// b takes over from what it read; a does not know.
	_, last, err := tr.Read(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	b := tr.Writer("run-1", last)
	if err := b.Append(ctx, &protocol.Record{Kind: protocol.RecordStep, Step: 1}); err != nil {
		t.Fatal(err)
	}
	err = a.Append(ctx, &protocol.Record{Kind: protocol.RecordStep, Step: 1, Note: "from the stale writer"})
	if !errors.Is(err, protocol.ErrFenced) {
		t.Fatalf("stale Append = %v, want fenced", err)
	}
	if err := tr.Writer("run-1", 0).Append(ctx, &protocol.Record{Kind: protocol.RecordStarted, Coordinator: "second"}); !errors.Is(err, protocol.ErrFenced) {
		t.Fatalf("a second first record = %v, want fenced", err)
	}
	got, _, err := tr.Read(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Note != "" {
		t.Errorf("trace = %+v, want only the winner's two records", got)
	}
}

// TestAppendRetryIsIdempotent checks an append retried after a lost
// acknowledgement is recognised by its message id and not written twice.
func TestAppendRetryIsIdempotent(t *testing.T) {
	_, tr, _ := open(t)
	ctx := t.Context()
	w := tr.Writer("run-1", 0)
	if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStarted}); err != nil {
		t.Fatal(err)
	}
	seq := w.LastSeq()
	step := &protocol.Record{Kind: protocol.RecordStep, Step: 1}
	if err := w.Append(ctx, step); err != nil {
		t.Fatal(err)
	}
	// The same writer appends the same record again from the position
	// before it, as if the first acknowledgement had been lost.
	w.RewindForTest(seq)
	if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStep, Step: 1}); err != nil {
		t.Fatalf("retried Append = %v, want success", err)
	}
	got, _, err := tr.Read(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("trace has %d records after a retried append, want 2", len(got))
	}
}

func TestReadRefusesNewerOrDamagedRecords(t *testing.T) {
	js, tr, _ := open(t)
	ctx := t.Context()
	if _, err := js.Publish(ctx, trace.Subject("newer"), []byte(`{"format":99,"kind":"step","run":"newer"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.Read(ctx, "newer"); !errors.Is(err, protocol.ErrUnsupported) {
		t.Errorf("Read(newer format) = %v, want unsupported", err)
	}
	if _, err := js.Publish(ctx, trace.Subject("damaged"), []byte(`{"format":1,"kind":`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.Read(ctx, "damaged"); !errors.Is(err, protocol.ErrInternal) {
		t.Errorf("Read(damaged) = %v, want internal", err)
	}
}

// TestReadKeepsOrderAndStopsAtTheDamage reads a long trace, whose records
// are decoded side by side as they come, in the order they were written,
// and one damaged in the middle as the error it is, with where it is.
func TestReadKeepsOrderAndStopsAtTheDamage(t *testing.T) {
	js, tr, _ := open(t)
	ctx := t.Context()
	w := tr.Writer("long", 0)
	const n = 700 // past the read-ahead and a pull's batch
	for i := range n {
		if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStep, Step: i + 1, Reason: strconv.Itoa(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	got, last, err := tr.Read(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || last != w.LastSeq() {
		t.Fatalf("Read = %d records to %d, want %d to %d", len(got), last, n, w.LastSeq())
	}
	for i, rec := range got {
		if rec.Step != i+1 || rec.Reason != strconv.Itoa(i+1) {
			t.Fatalf("record %d is step %d (%q): out of order", i, rec.Step, rec.Reason)
		}
	}
	for i := range 300 {
		data := fmt.Appendf(nil, `{"format":1,"kind":"step","step":%d}`, i+1)
		if i == 150 {
			data = []byte(`{"format":1,"kind":`)
		}
		if _, err := js.Publish(ctx, trace.Subject("torn"), data); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	_, err = tr.Each(ctx, "torn", func(rec *protocol.Record) error {
		if rec.Step != seen+1 {
			t.Errorf("record %d is step %d", seen, rec.Step)
		}
		seen++
		return nil
	})
	if !errors.Is(err, protocol.ErrInternal) || seen != 150 {
		t.Errorf("Each over a damaged record = %v after %d records, want internal after 150", err, seen)
	}
}

// TestReadEndsWhenItsLastRecordIsGone reads a run whose last record, as
// looked up before the read, is no longer in the stream (the run pruned
// while it was read): the read ends with what is there, and says where,
// rather than waiting for a record that will never come.
func TestReadEndsWhenItsLastRecordIsGone(t *testing.T) {
	_, tr, _ := open(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w := tr.Writer("pruned", 0)
	for i := range 3 {
		if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStep, Step: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	last, err := tr.ReadToForTest(ctx, "pruned", w.LastSeq()+1, func(*protocol.Record) error { n++; return nil })
	if err != nil || n != 3 || last != w.LastSeq() {
		t.Errorf("read past the last record = %d records to %d, %v; want 3 to %d", n, last, err, w.LastSeq())
	}
}

// TestReadEndsWhenRecordsPendingAreGone deletes, while a run is read,
// records the server counted as still to come but had not yet sent (the
// read fetches 512 at a time, so none after the 512th is sent before the
// first is read). The read ends with the last record there is, rather
// than wait for ever for the ones counted.
func TestReadEndsWhenRecordsPendingAreGone(t *testing.T) {
	_, tr, s := open(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w := tr.Writer("pruned", 0)
	var seqs []uint64
	for i := range 600 {
		if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStep, Step: i + 1}); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, w.LastSeq())
	}
	n := 0
	last, err := tr.Each(ctx, "pruned", func(*protocol.Record) error {
		if n++; n == 1 {
			for _, seq := range seqs[512:] {
				if err := s.DeleteMsg(ctx, seq); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil || n != 512 || last != seqs[511] {
		t.Errorf("read while its tail was deleted = %d records to %d, %v; want 512, ending at the 512th", n, last, err)
	}
}

func TestBlobs(t *testing.T) {
	js, _, _ := open(t)
	ctx := t.Context()
	os, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "blobs"})
	if err != nil {
		t.Fatal(err)
	}
	b := trace.NewBlobs(os)
	ref, err := b.Put(ctx, []byte("big content"))
	if err != nil {
		t.Fatal(err)
	}
	ref2, err := b.Put(ctx, []byte("big content"))
	if err != nil || ref2 != ref {
		t.Errorf("Put of the same content = %q, %v; want the same reference %q", ref2, err, ref)
	}
	got, err := b.Get(ctx, ref)
	if err != nil || string(got) != "big content" {
		t.Errorf("Get = %q, %v", got, err)
	}
	if _, err := b.Get(ctx, "sha256-nothing"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("Get(missing) = %v, want not found", err)
	}
}

// deafKV is a real bucket whose watches cannot be begun, as when a
// restarted cluster has not elected the bucket's leader yet. It counts the
// reads that have returned.
type deafKV struct {
	jetstream.KeyValue
	reads *atomic.Int32
}

func (deafKV) Watch(context.Context, string, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return nil, errors.New("nats: JetStream not ready")
}

func (d deafKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	defer d.reads.Add(1)
	return d.KeyValue.Get(ctx, key)
}

// TestIndexWaitOutlastsAWatchThatFails waits for a run over a bucket whose
// watch cannot start: Wait still sees the run finish, by reading its state.
// The run finishes only after Wait has read it running, so Wait cannot
// pass by finding it finished at its first read.
func TestIndexWaitOutlastsAWatchThatFails(t *testing.T) {
	defer trace.SetWaitPollForTest(20 * time.Millisecond)()
	js, _, _ := open(t)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "runs"})
	if err != nil {
		t.Fatal(err)
	}
	deaf := deafKV{kv, new(atomic.Int32)}
	x := trace.NewIndex(deaf, nil)
	if err := x.Put(t.Context(), &protocol.RunState{Run: "r1", Status: protocol.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := x.Wait(ctx, "r1", func(st *protocol.RunState) bool { return st.Status != protocol.StatusRunning })
		if err == nil && st.Status != protocol.StatusCompleted {
			err = errors.New("returned while " + string(st.Status))
		}
		got <- err
	}()
	// The run is running until the Put below: a read that has returned
	// without Wait returning is Wait's, and found it running.
	testkit.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if deaf.reads.Load() == 0 {
			return errors.New("Wait has not read the run's state")
		}
		return nil
	})
	select {
	case err := <-got:
		t.Fatalf("Wait returned (%v) before the run finished", err)
	default:
	}
	if err := x.Put(t.Context(), &protocol.RunState{Run: "r1", Status: protocol.StatusCompleted, Outcome: protocol.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

// TestIndexList lists an index whose runs were written, rewritten and
// deleted, beside a key that is not a run and a value that is not a run's
// state: each run's latest state, once, and nothing else; an empty index
// lists nothing. It lists with the watch, and with the direct get
// (ListDirect), which makes no consumer.
func TestIndexList(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			nc := testkit.Conn(t, testkit.NATS(t))
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "runs"})
			if err != nil {
				t.Fatal(err)
			}
			var opts []trace.IndexOption
			if direct {
				opts = append(opts, trace.ListDirect())
			}
			x := trace.NewIndex(kv, js, opts...)
			watched := consumersMade(t, nc)
			ctx := t.Context()
			if got, err := x.List(ctx); err != nil || len(got) != 0 {
				t.Fatalf("List of an empty index = %v, %v; want nothing", got, err)
			}
			for _, st := range []protocol.RunState{
				{Run: "r1", Status: protocol.StatusRunning},
				{Run: "r2", Status: protocol.StatusRunning},
				{Run: "r1", Status: protocol.StatusCompleted, Outcome: protocol.OutcomeSuccess},
				{Run: "r3", Status: protocol.StatusRunning},
				{Run: "r5", Status: protocol.StatusRunning},
			} {
				if err := x.Put(ctx, &st); err != nil {
					t.Fatal(err)
				}
			}
			if err := kv.Delete(ctx, "r2"); err != nil {
				t.Fatal(err)
			}
			if err := kv.Purge(ctx, "r5"); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, "r4", []byte("not a run state")); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, "not.a.run", []byte(`{"run":"x"}`)); err != nil {
				t.Fatal(err)
			}
			got, err := x.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var runs []string
			for _, st := range got {
				runs = append(runs, st.Run+":"+string(st.Status))
			}
			slices.Sort(runs)
			if want := []string{"r1:" + string(protocol.StatusCompleted), "r3:" + string(protocol.StatusRunning)}; !slices.Equal(runs, want) {
				t.Errorf("List = %v, want %v", runs, want)
			}
			if n := watched(); direct != (n == 0) {
				t.Errorf("two listings made %d consumers; want none with the direct get, some with the watch", n)
			}
		})
	}
}

// TestIndexListDirectFallsBack lists with ListDirect an index of more keys
// than one direct get answers for (deleted ones among them), and one whose
// stream answers no direct gets: each is listed whole, by the watch. The
// large index is watched at once the next time, without a direct get,
// and read directly again once it is small.
func TestIndexListDirectFallsBack(t *testing.T) {
	nc, js, kv, x := directIndex(t)
	ctx := t.Context()
	const live, deleted = 1000, 100
	for i := range live + deleted {
		if err := x.Progress(ctx, &protocol.RunState{Run: fmt.Sprintf("r%d", i), Status: protocol.StatusRunning}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	for i := live; i < live+deleted; i++ {
		if err := kv.Delete(ctx, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	watched, asked := consumersMade(t, nc), requests(t, nc, "$JS.API.DIRECT.GET.KV_runs")
	list := func(when string, want, watches, gets int) {
		t.Helper()
		if got, err := x.List(ctx); err != nil || len(got) != want {
			t.Fatalf("%s: List = %d runs, %v; want %d", when, len(got), err, want)
		}
		if w, g := watched(), asked(); w != watches || g != gets {
			t.Errorf("%s: %d watches and %d direct gets in all, want %d and %d", when, w, g, watches, gets)
		}
	}
	list("first", live, 1, 1)
	list("again", live, 2, 1)
	for i := 100; i < live; i++ {
		if err := kv.Purge(ctx, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(-1)); err != nil { // a watch of its own
		t.Fatal(err)
	}
	list("with fewer keys than a direct get answers for, first", 100, 4, 1)
	list("with fewer keys, again", 100, 4, 2)

	small, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "few", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_few")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	y := trace.NewIndex(small, js, trace.ListDirect())
	if err := y.Put(ctx, &protocol.RunState{Run: "only", Status: protocol.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	if got, err := y.List(ctx); err != nil || len(got) != 1 || got[0].Run != "only" {
		t.Fatalf("List without direct gets = %v, %v; want the one run", got, err)
	}
}

// TestIndexListDirectWhole lists with ListDirect an index whose entries
// are more bytes than a direct get's answer may carry: the answer ends
// with some not sent, and the index is listed whole, by the watch.
func TestIndexListDirectWhole(t *testing.T) {
	nc, _, _, x := directIndex(t)
	ctx := t.Context()
	const runs = 50 // of about 200 bytes each, against an answer of 4 KB
	for i := range runs {
		st := &protocol.RunState{Run: fmt.Sprintf("r%d", i), Status: protocol.StatusRunning, Task: strings.Repeat("t", 150)}
		if err := x.Put(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	defer trace.SetDirectListBytesForTest(4 << 10)()
	watched, asked := consumersMade(t, nc), requests(t, nc, "$JS.API.DIRECT.GET.KV_runs")
	if got, err := x.List(ctx); err != nil || len(got) != runs {
		t.Fatalf("List = %d runs, %v; want %d", len(got), err, runs)
	}
	if watched() != 1 || asked() != 1 {
		t.Errorf("%d watches and %d direct gets, want one of each: the direct get could not send the index whole", watched(), asked())
	}
}

// directIndex starts a server and returns a connection to it, its
// JetStream, an index bucket named runs in memory and the index over it
// that lists with a direct get.
func directIndex(t *testing.T) (*nats.Conn, jetstream.JetStream, jetstream.KeyValue, *trace.Index) {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "runs", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, kv, trace.NewIndex(kv, js, trace.ListDirect())
}

// requests returns what counts the requests nc makes on subject from now
// on.
func requests(t *testing.T, nc *nats.Conn, subject string) func() int {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() int {
		// The requests came before the flush's answer, on this
		// connection, and wait in the subscription.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// consumersMade returns what counts the consumers nc asks the server for
// from now on.
func consumersMade(t *testing.T, nc *nats.Conn) func() int {
	t.Helper()
	return requests(t, nc, "$JS.API.CONSUMER.CREATE.>")
}
