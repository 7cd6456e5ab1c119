package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// A task delivered again may have cost a provider call on each delivery
// before: its worker died mid-call, or gave up on it after the call. The
// coordinator charges each such call at its estimate (TurnResult.Deliveries).
// A worker that stops takes no call for the tasks it holds and has not
// begun (one waiting for a slot, those in its buffer, one whose request
// it was still putting together): it gives them back to the pool at once,
// and marks each in the turns stream, on the attempt's subject, as given
// back without a call (TurnResult.Returned), naming the task's message.
// The next delivery of that message reads the mark, and counts only the
// deliveries not marked; its answer replaces the mark. Without the mark,
// every rolling restart of a busy pool would charge its runs for calls
// nobody made.

// giveBackTime bounds how long a stopping worker spends marking the tasks
// it gives back at its stop, all of them together: a bus that does not
// answer leaves the rest unmarked, charged as before, rather than holding
// the stop.
const giveBackTime = 5 * time.Second

// prior is what the turns stream holds of a task's attempt.
type prior struct {
	answered bool   // its turn is published: nothing more to do
	returned int    // deliveries of this message given back without a call, as marked
	seq      uint64 // the sequence of what the subject holds; 0 with nothing
	read     bool   // the stream was read (else nothing is known)
}

// priorOf reads what the turns stream holds of task's attempt; md is the
// delivery's, whose message a mark must name to count. A read that fails
// says nothing is known: the task is served, and every earlier delivery
// counts as a call.
func (w *Worker) priorOf(ctx context.Context, task *protocol.StepTask, md *jetstream.MsgMetadata) prior {
	m, err := w.assets.Turns.GetLastMsgForSubject(ctx, wire.Turn(task.Run, task.Step, task.Attempt))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return prior{read: true}
	case err != nil:
		return prior{}
	}
	var tr protocol.TurnResult
	if json.Unmarshal(m.Data, &tr) != nil || !tr.GivenBack() {
		return prior{answered: true, read: true}
	}
	p := prior{seq: m.Sequence, read: true}
	if md != nil && tr.Message == messageOf(md) {
		p.returned = tr.Returned
	}
	return p
}

// messageOf names the task's message in the steps stream: its sequence,
// and the time it was stored (the sequences start again when the stream,
// kept in memory, is made anew).
func messageOf(md *jetstream.MsgMetadata) string {
	return strconv.FormatUint(md.Sequence.Stream, 10) + "-" + strconv.FormatInt(md.Timestamp.UnixNano(), 10)
}

// deliveriesOf is how many deliveries of the task may have made a call,
// this one included.
func deliveriesOf(md *jetstream.MsgMetadata, pr prior) int {
	if md == nil {
		return 1
	}
	return max(int(md.NumDelivered)-pr.returned, 1)
}

// giveBack hands a task this worker will not call for back to its pool at
// once, marked, by the time by, as given back without a call. task is nil
// when the worker did not decode it; pr is what serve read of the
// attempt, if it read it. A task already answered is acknowledged, and
// one expired dropped, as the next worker would.
func (w *Worker) giveBack(msg jetstream.Msg, task *protocol.StepTask, pr prior, by time.Time) {
	w.giveBackAfter(msg, task, pr, by, 0)
}

// giveBackAfter is giveBack, the task coming back after the delay after
// rather than at once.
func (w *Worker) giveBackAfter(msg jetstream.Msg, task *protocol.StepTask, pr prior, by time.Time, after time.Duration) {
	nak := func() {
		if after > 0 {
			_ = msg.NakWithDelay(after)
			return
		}
		_ = msg.Nak()
	}
	md, err := msg.Metadata()
	if err != nil {
		nak()
		return
	}
	if task == nil {
		task = new(protocol.StepTask)
		if _, err := decodeTask(msg.Data(), task); err != nil || !protocol.ValidToken(task.Run) {
			nak() // dropped by whichever worker takes it next
			return
		}
	}
	if !task.Expires.IsZero() && time.Now().After(task.Expires) {
		_ = msg.TermWithReason("expired")
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	if !pr.read {
		if pr = w.priorOf(ctx, task, md); !pr.read {
			nak()
			return
		}
	}
	if pr.answered {
		_ = msg.Ack()
		return
	}
	mark, err := json.Marshal(&protocol.TurnResult{Run: task.Run, Step: task.Step, Attempt: task.Attempt, Worker: w.cfg.ID,
		Returned: pr.returned + 1, Message: messageOf(md)})
	if err != nil {
		nak()
		return
	}
	// Published only over what was read: a turn that came meanwhile
	// (another delivery of the task, answered) is never replaced.
	_, err = w.js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn(task.Run, task.Step, task.Attempt), Data: mark},
		jetstream.WithMsgID(task.Key()+".returned."+messageOf(md)+"."+strconv.FormatUint(md.NumDelivered, 10)),
		jetstream.WithExpectLastSequencePerSubject(pr.seq))
	nak()
	if err != nil {
		w.log.Info("gave a task back unmarked; its next delivery counts this one as a call", "run", task.Run, "step", task.Step, "attempt", task.Attempt, "err", err)
		return
	}
	w.log.Info("gave a task back without a call", "run", task.Run, "step", task.Step, "attempt", task.Attempt)
}

// giveBackBy is when the stopping worker stops marking the tasks it gives
// back at its stop: giveBackTime after the first.
func (w *Worker) giveBackBy() time.Time {
	by := time.Now().Add(giveBackTime).UnixNano()
	if !w.backBy.CompareAndSwap(0, by) {
		by = w.backBy.Load()
	}
	return time.Unix(0, by)
}
