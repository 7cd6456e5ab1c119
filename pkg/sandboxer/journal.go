package sandboxer

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// The op journal: an op id runs at most once. In this process an op has
// an entry from the moment it comes until RememberOps later ops have come,
// and a repeat of it (its coordinator asked again, its first answer lost
// or slow) is answered with that entry's reply, never run again; with an
// ops bucket (durably), across restarts and nodes too.

// opEntry is the journal's entry of one op admitted here.
type opEntry struct {
	done  chan struct{} // closed when the op has its reply, or will have none
	reply *protocol.SandboxReply
	// waiters are the repeats that came while the op waited or ran,
	// answered with its reply when it ends; at most maxWaiters, the
	// latest.
	waiters []micro.Request
}

// maxWaiters bounds the repeats an op's entry keeps to answer. A
// coordinator asks again every few seconds and waits only for its latest
// ask, so the oldest repeat beyond the bound is let go unanswered.
const maxWaiters = 16

// journaled reports whether ops of kind run at most once per op id: tool
// calls, verifications and collections. An open or a close is carried out
// each time it comes; doing it again changes nothing.
func journaled(kind string) bool {
	return kind != protocol.OpOpen && kind != protocol.OpClose
}

// entry returns the journal's entry of op: that of an op with its id
// admitted here earlier (first false), or a new one, registered now, that
// the caller finishes (first true). An op that is not journaled gets no
// entry and is always first.
func (s *Sandboxer) entry(op *protocol.SandboxOp) (e *opEntry, first bool) {
	if !journaled(op.Kind) {
		return nil, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ops[op.OpID]; ok {
		return e, false
	}
	e = &opEntry{done: make(chan struct{})}
	s.ops[op.OpID] = e
	s.opOrder = append(s.opOrder, op.OpID)
	if len(s.opOrder) > s.cfg.RememberOps {
		delete(s.ops, s.opOrder[0])
		s.opOrder = s.opOrder[1:]
	}
	return e, true
}

// await answers r, a repeat of the op of e, with that op's reply: now if
// it has one, else when it ends (finish). It takes no slot and no
// goroutine. An op that ends without a reply leaves its repeats
// unanswered, as it leaves its first ask: the coordinator asks again.
func (s *Sandboxer) await(r micro.Request, e *opEntry) {
	s.mu.Lock()
	select {
	case <-e.done:
		reply := e.reply
		s.mu.Unlock()
		if reply != nil {
			s.respond(r, reply)
		}
		return
	default:
	}
	if len(e.waiters) == maxWaiters {
		e.waiters = e.waiters[1:]
	}
	e.waiters = append(e.waiters, r)
	s.mu.Unlock()
}

// finish records the reply of the op of e and returns the repeats waiting
// for it. A nil reply means the op did not run (see durably, and an op
// never started): its entry is removed, so that the next ask runs it. e
// may be nil (an op that is not journaled).
func (s *Sandboxer) finish(op *protocol.SandboxOp, e *opEntry, reply *protocol.SandboxReply) []micro.Request {
	if e == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.reply = reply
	if reply == nil && s.ops[op.OpID] == e {
		delete(s.ops, op.OpID)
	}
	waiters := e.waiters
	e.waiters = nil
	close(e.done)
	return waiters
}

// durably runs an operation at most once across restarts of this node,
// and of any node serving the same roots, when an ops bucket is
// configured: a completed op's reply is kept there and returned again; a
// tool call that began but never ended (the node died under it) is
// reported as indeterminate, never silently run again. A verification or a
// read-only tool's call (read_file, grep, find, view_image, read_skill) cut off that
// way is simply run again: it changes nothing.
//
// A call that may change the workspace runs only once its start is
// recorded: while the bucket cannot say whether the op began elsewhere, or
// cannot take the record, durably returns nil without running it, and the
// coordinator's next ask tries again. Run unrecorded, a call whose answer
// was lost would be run a second time by whichever node was asked next.
func (s *Sandboxer) durably(ctx context.Context, op *protocol.SandboxOp) *protocol.SandboxReply {
	if s.cfg.Ops == nil {
		return s.do(ctx, op)
	}
	key := wire.OpKey(op.OpID)
	changes := op.Kind == protocol.OpTool && (op.Call == nil || !s.readOnly(op.Call.Name) && op.Call.Name != readSkillTool)
	if op.Kind == protocol.OpTool && !changes {
		// A read is run again whenever it is asked again: journalled, it
		// would cost two synced writes on every step's critical path for
		// nothing. This process's own journal (entry) still answers a
		// repeat that comes while it runs.
		return s.do(ctx, op)
	}
	e, err := opsCall(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.cfg.Ops.Get(ctx, key) })
	switch {
	case err == nil:
		var rec wire.OpRecord
		if json.Unmarshal(e.Value(), &rec) == nil {
			if rec.Done && rec.Reply != nil {
				return rec.Reply
			}
			if changes {
				return indeterminate(op)
			}
		}
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case changes:
		s.log.Warn("the ops bucket does not answer; the op waits to be asked again", "op", op.OpID, "err", err)
		return nil
	}
	if !changes {
		// A verification (or a collection, or a stop) that began
		// elsewhere and did not end is run again, whatever a record of
		// its start said, so its start is not recorded: that record cost
		// a synced write on the path of every step that checks. Its
		// result is kept, for a repeat to be answered with it.
		reply := s.do(ctx, op)
		s.keepDone(ctx, op, key, reply)
		return reply
	}
	// Created, not put: of two nodes asked for one op at once (a run
	// taken over while its first node still worked), one records the
	// start and the other sees it.
	begun, _ := json.Marshal(wire.OpRecord{})
	_, err = opsCall(ctx, func(ctx context.Context) (uint64, error) { return s.cfg.Ops.Create(ctx, key, begun) })
	switch {
	case err == nil:
	case errors.Is(err, jetstream.ErrKeyExists):
		if changes {
			return s.begunElsewhere(ctx, op, key)
		}
	case changes:
		s.log.Warn("could not record the op's start; it waits to be asked again", "op", op.OpID, "err", err)
		return nil
	default:
		s.log.Warn("record op start", "op", op.OpID, "err", err)
	}
	reply := s.do(ctx, op)
	s.keepDone(ctx, op, key, reply)
	return reply
}

// keepDone records op's reply in the ops bucket under key. Kept in this
// process either way; in the bucket it spares another node reporting the
// op as indeterminate (or running a verification again). The reply does
// not wait for it: lost (this node died first), a repeat elsewhere is
// reported as indeterminate, which is what it would be without the
// record.
func (s *Sandboxer) keepDone(ctx context.Context, op *protocol.SandboxOp, key string, reply *protocol.SandboxReply) {
	done, _ := json.Marshal(wire.OpRecord{Done: true, Reply: reply})
	s.wg.Add(1) // the op's own count is held: Run waits for this too
	go func() {
		defer s.wg.Done()
		if _, err := opsCall(context.WithoutCancel(ctx), func(ctx context.Context) (uint64, error) { return s.cfg.Ops.Put(ctx, key, done) }); err != nil {
			s.log.Warn("record op result", "op", op.OpID, "err", err)
		}
	}()
}

// begunElsewhere answers a call that may change the workspace whose start
// another node recorded a moment ago: with its result once that node has
// one, as indeterminate if it has none within the op's time.
func (s *Sandboxer) begunElsewhere(ctx context.Context, op *protocol.SandboxOp, key string) *protocol.SandboxReply {
	for range 30 {
		e, err := opsCall(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.cfg.Ops.Get(ctx, key) })
		if err == nil {
			var rec wire.OpRecord
			if json.Unmarshal(e.Value(), &rec) == nil && rec.Done && rec.Reply != nil {
				return rec.Reply
			}
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	return indeterminate(op)
}

// opsTimeout bounds each call to the ops bucket.
const opsTimeout = 5 * time.Second

// opsCall runs one call to the ops bucket, bounded by opsTimeout.
func opsCall[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, opsTimeout)
	defer cancel()
	return f(ctx)
}

// indeterminate is the reply for a tool call cut off by a restart.
func indeterminate(op *protocol.SandboxOp) *protocol.SandboxReply {
	obs := &protocol.Observation{IsError: true, Status: protocol.CallIndeterminate,
		Content: "[indeterminate] this call was cut off when the sandboxer stopped: it did not finish, and its effects are unknown. Look at the workspace before you repeat it."}
	if op.Call != nil {
		obs.CallID, obs.Tool = op.Call.ID, op.Call.Name
	}
	return &protocol.SandboxReply{OpID: op.OpID, Observation: obs}
}
