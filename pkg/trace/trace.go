// Package trace is the durable trace of harness runs on JetStream: one
// subject per run (harness.trace.<run>) holding one small record per
// committed step, appended with fencing so two coordinators can never both
// advance a run; the run index, a key-value cache of where each run stands;
// and the content-addressed blobs that records refer to.
//
// Writing: open a Writer with the last sequence you read for the run (zero
// for a new run) and Append records in order. An append that finds the run
// advanced by someone else fails with protocol.ErrFenced and writes
// nothing; an append retried after a lost acknowledgement is recognised by
// its message id and not written twice.
//
// Reading: Read returns every record of a run in order with the sequence of
// the last one, ready to open a Writer that continues it.
package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
)

// Names on the wire.
const (
	StreamName    = "HARNESS_TRACE"
	SubjectPrefix = "harness.trace."
)

// Subject returns the trace subject of a run.
func Subject(run string) string { return SubjectPrefix + run }

// Trace reads and writes run traces.
type Trace struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

// New returns a Trace over the trace stream, which must exist.
func New(js jetstream.JetStream, stream jetstream.Stream) *Trace {
	return &Trace{js: js, stream: stream}
}

// Writer appends to one run's trace.
type Writer struct {
	t     *Trace
	run   string
	last  uint64
	token string // tells this writer's appends from another's
}

// Writer returns a writer for run that expects lastSeq to be the sequence
// of the run's last record (zero when the run has none yet).
func (t *Trace) Writer(run string, lastSeq uint64) *Writer {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &Writer{t: t, run: run, last: lastSeq, token: hex.EncodeToString(b)}
}

// LastSeq is the stream sequence of the last record this writer appended or
// was opened at.
func (w *Writer) LastSeq() uint64 { return w.last }

// Append writes rec as the run's next record. Its message id is
// run.kind.step and this writer's token, so this writer's retry after a lost
// acknowledgement is not written twice, while another writer's record for
// the same step is fenced out. Errors: protocol.ErrFenced if the run's trace moved past what this
// writer expected (another coordinator owns the run now); otherwise the
// publish error, wrapped.
func (w *Writer) Append(ctx context.Context, rec *protocol.Record) error {
	rec.Format = protocol.TraceFormat
	rec.Run = w.run
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", rec.Kind, err)
	}
	msgID := w.run + "." + rec.Kind + "." + strconv.Itoa(rec.Step) + "." + w.token
	ack, err := w.t.js.PublishMsg(ctx, &nats.Msg{Subject: Subject(w.run), Data: data},
		jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(w.last))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			// The server checks the expected sequence before duplicates, so
			// a retry of our own append whose acknowledgement was lost
			// lands here too: the run's last record is then this one.
			if last, lerr := w.t.stream.GetLastMsgForSubject(ctx, Subject(w.run)); lerr == nil && last.Header.Get(jetstream.MsgIDHeader) == msgID {
				w.last = last.Sequence
				return nil
			}
			return protocol.Errorf(protocol.CodeFenced, "run %s was advanced by another writer; this one must stop", w.run)
		}
		return fmt.Errorf("append %s record to %s: %w", rec.Kind, Subject(w.run), err)
	}
	w.last = ack.Sequence
	return nil
}

// Last returns the run's last record, nil when it has none. Errors: those
// of Decode, or the stream error, wrapped.
func (t *Trace) Last(ctx context.Context, run string) (*protocol.Record, error) {
	m, err := t.stream.GetLastMsgForSubject(ctx, Subject(run))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the last record of %s: %w", Subject(run), err)
	}
	return Decode(m.Data)
}

// LastSeq returns the stream sequence of run's last record, zero when it
// has none: what Read returns as the last, for a reader to tell whether a
// read made earlier is still the whole trace. Errors: the stream error,
// wrapped.
func (t *Trace) LastSeq(ctx context.Context, run string) (uint64, error) {
	m, err := t.stream.GetLastMsgForSubject(ctx, Subject(run))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up the last record of %s: %w", Subject(run), err)
	}
	return m.Sequence, nil
}

// Read returns every record of run in order and the sequence of the last.
// A run with no records returns none and zero. Errors: a *protocol.Error
// with CodeUnsupported for a record of a newer format than this build
// reads ("upgrade harness"), CodeInternal for a record that does not decode
// (a damaged trace), or the stream error, wrapped.
func (t *Trace) Read(ctx context.Context, run string) ([]protocol.Record, uint64, error) {
	var sl *slab
	kept := 0 // those decoded: a slot taken for one that did not decode is not returned
	last, err := t.each(ctx, run, func(pending uint64) *protocol.Record {
		if sl == nil {
			sl = newSlab(int(pending) + 1) // the run's records, as the first says
		}
		return sl.next()
	}, func(*protocol.Record) error { kept++; return nil })
	if sl == nil {
		return nil, last, err
	}
	return sl.recs[:kept], last, err
}

// Follow calls fn for every record of run in order, those written so far
// and then each as it is written, until fn returns an error (which Follow
// returns; ErrStop ends it with nil) or ctx ends.
func (t *Trace) Follow(ctx context.Context, run string, fn func(*protocol.Record) error) error {
	err := t.records(ctx, run, "follow", fresh, func(rec *protocol.Record, _, _ uint64) (bool, error) {
		return false, fn(rec)
	}, nil)
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// ErrStop is what a Follow callback returns to end the follow.
var ErrStop = errors.New("stop following")

// Each calls fn for every record of run in order, and returns the sequence
// of the last. It reads with an ordered consumer filtered to the run's
// subject, so its cost is linear in the run's records, not the stream's.
func (t *Trace) Each(ctx context.Context, run string, fn func(*protocol.Record) error) (uint64, error) {
	return t.each(ctx, run, fresh, fn)
}

// fresh is where a record is decoded that its reader may keep.
func fresh(uint64) *protocol.Record { return new(protocol.Record) }

// each is Each decoding each record into the one into gives it, told how
// many of the run's records are still to come after it.
func (t *Trace) each(ctx context.Context, run string, into func(pending uint64) *protocol.Record, fn func(*protocol.Record) error) (uint64, error) {
	subj := Subject(run)
	lastMsg, err := t.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", subj, err)
	}
	return t.readTo(ctx, run, lastMsg.Sequence, into, fn)
}

// readTo is Each once the sequence of the run's last record is known. It
// returns the sequence of the last record it read, which is last unless
// that record was deleted since it was looked up (the run pruned while
// read): nothing pending then ends the read too, rather than a wait for a
// record that will never come. A record counted as pending and deleted
// before it was delivered is the same wait; a read that hears nothing for
// readIdle (one to two of them) looks the run's last record up again, and
// ends if it has read it (a look-up that fails is made again a readIdle
// later).
func (t *Trace) readTo(ctx context.Context, run string, last uint64, into func(uint64) *protocol.Record, fn func(*protocol.Record) error) (uint64, error) {
	var got atomic.Uint64
	err := t.records(ctx, run, "read", into, func(rec *protocol.Record, seq, pending uint64) (bool, error) {
		got.Store(seq)
		return seq >= last || pending == 0, fn(rec)
	}, func() bool {
		m, err := t.stream.GetLastMsgForSubject(ctx, Subject(run))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return true
		}
		return err == nil && m.Sequence <= got.Load() // a look-up that fails is made again at the next
	})
	if err != nil {
		return 0, err
	}
	return got.Load(), nil
}

// readIdle is how long a read waits for its next record before it looks
// whether one is still to come.
var readIdle = time.Second

// errReadDone ends a read's wait for a record when none is to come.
var errReadDone = errors.New("the read has every record there is")

// records delivers run's records in order from its first, with their
// stream sequences and how many of the run's records the stream held
// after each as it was delivered, to fn until fn says it is done or fails,
// or ctx ends. Each record is decoded into the one into gives, told how
// many are still to come after it. When no record comes for readIdle, idle
// (if not nil) says whether the reading is done.
// what names the reading in errors.
func (t *Trace) records(ctx context.Context, run, what string, into func(pending uint64) *protocol.Record, fn func(rec *protocol.Record, seq, pending uint64) (done bool, err error), idle func() (done bool)) error {
	subj := Subject(run)
	cons, err := t.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, subj, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, subj, err)
	}
	defer it.Stop()
	// Each wait for the next record ends with ctx, or once the watch below
	// finds the reading done (a context, not a Stop of the iterator from
	// another goroutine, which can land in the middle of the ordered
	// consumer's reset and leave the wait for ever).
	wctx, quit := context.WithCancelCause(ctx)
	defer quit(nil)
	// A watch, not a timer on every record: it looks once a readIdle
	// whether a record came since it last looked.
	var delivered atomic.Uint64
	if idle != nil {
		go func() {
			tick := time.NewTicker(readIdle)
			defer tick.Stop()
			var seen uint64
			for {
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
				if n := delivered.Load(); n != seen {
					seen = n
				} else if idle() {
					quit(errReadDone)
					return
				}
			}
		}()
	}
	for {
		msg, err := it.Next(jetstream.NextContext(wctx))
		if err != nil {
			if errors.Is(context.Cause(wctx), errReadDone) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s %s: %w", what, subj, err)
		}
		delivered.Add(1)
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, subj, err)
		}
		rec := into(meta.NumPending)
		if err := decodeInto(msg.Data(), rec); err != nil {
			return fmt.Errorf("%s %s at %d: %w", what, subj, meta.Sequence.Stream, err)
		}
		done, err := fn(rec, meta.Sequence.Stream, meta.NumPending)
		if err != nil || done {
			return err
		}
	}
}

// Decode decodes one record and checks its format.
func Decode(data []byte) (*protocol.Record, error) {
	var rec protocol.Record
	if err := checked(wirejson.Unmarshal(data, &rec), &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// decodeInto is Decode into rec, which must be zero or laid by a slab,
// with strings that share data's bytes (wirejson.UnmarshalShared): data
// must not change while rec is kept, as a message the NATS client
// delivered does not.
func decodeInto(data []byte, rec *protocol.Record) error {
	err := wirejson.UnmarshalShared(data, rec)
	settle(rec)
	return checked(err, rec)
}

// checked is what decoding rec came to: the decoder's error, or rec's
// format checked.
func checked(err error, rec *protocol.Record) error {
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "damaged trace record: %s", err.Error())
	}
	if rec.Format > protocol.TraceFormat {
		return &protocol.Error{Code: protocol.CodeUnsupported, Name: protocol.CodeUnsupported.String(),
			Message: fmt.Sprintf("trace record format %d is newer than this build reads (%d)", rec.Format, protocol.TraceFormat),
			Hint:    "upgrade harness to read this run"}
	}
	if rec.Format < 1 || rec.Kind == "" {
		return protocol.Errorf(protocol.CodeInternal, "damaged trace record: no format or kind")
	}
	return nil
}
