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
// back without a call (TurnResult.Returned). The next delivery reads the
// mark, and counts only the deliveries not marked; its answer replaces
// the mark. Without the mark, every rolling restart of a busy pool would
// charge its runs for calls nobody made.

// giveBackTime bounds how long a stopping worker spends marking the tasks
// it gives back, all of them together: a bus that does not answer leaves
// the rest unmarked, charged as before, rather than holding the stop.
const giveBackTime = 5 * time.Second

// prior is what the turns stream holds of a task's attempt when the task
// is delivered again.
type prior struct {
	answered bool   // its turn is published: nothing more to do
	returned int    // the deliveries given back without a call, as marked
	seq      uint64 // the mark's sequence in the stream; 0 with none
	read     bool   // the stream was read (else nothing is known)
}

// priorOf reads what the turns stream holds of task's attempt. A read
// that fails says nothing is known: the task is served, and every earlier
// delivery counts as a call.
func (w *Worker) priorOf(ctx context.Context, task *protocol.StepTask) prior {
	m, err := w.assets.Turns.GetLastMsgForSubject(ctx, wire.Turn(task.Run, task.Step, task.Attempt))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return prior{read: true}
	case err != nil:
		return prior{}
	}
	var tr protocol.TurnResult
	if json.Unmarshal(m.Data, &tr) == nil && tr.GivenBack() {
		return prior{returned: tr.Returned, seq: m.Sequence, read: true}
	}
	return prior{answered: true, read: true}
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
// once, marked as given back without a call. task is nil when the worker
// did not decode it; pr is what serve read of the attempt, nil if it read
// nothing.
func (w *Worker) giveBack(msg jetstream.Msg, task *protocol.StepTask, pr *prior) {
	defer func() { _ = msg.Nak() }()
	md, err := msg.Metadata()
	if err != nil {
		return
	}
	if task == nil {
		task = new(protocol.StepTask)
		if _, err := decodeTask(msg.Data(), task); err != nil || !protocol.ValidToken(task.Run) {
			return // dropped by whichever worker takes it next
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), w.giveBackBy())
	defer cancel()
	var have prior
	switch {
	case pr != nil && pr.read:
		have = *pr
	case md.NumDelivered == 1:
		have = prior{read: true} // nothing published on the attempt yet, or a turn meanwhile, which the publish below finds
	default:
		if have = w.priorOf(ctx, task); !have.read {
			return
		}
	}
	if have.answered {
		return // the next delivery finds the turn and acknowledges it
	}
	mark, err := json.Marshal(&protocol.TurnResult{Run: task.Run, Step: task.Step, Attempt: task.Attempt, Worker: w.cfg.ID, Returned: have.returned + 1})
	if err != nil {
		return
	}
	// Published only over what was read: a turn that came meanwhile
	// (another delivery of the task, answered) is never replaced.
	_, err = w.js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn(task.Run, task.Step, task.Attempt), Data: mark},
		jetstream.WithMsgID(task.Key()+".returned."+strconv.FormatUint(md.NumDelivered, 10)),
		jetstream.WithExpectLastSequencePerSubject(have.seq))
	if err != nil {
		w.log.Info("gave a task back unmarked; its next delivery counts this one as a call", "run", task.Run, "step", task.Step, "attempt", task.Attempt, "err", err)
		return
	}
	w.log.Info("gave a task back without a call", "run", task.Run, "step", task.Step, "attempt", task.Attempt)
}

// giveBackBy is when the stopping worker stops marking the tasks it gives
// back: giveBackTime after the first.
func (w *Worker) giveBackBy() time.Time {
	by := time.Now().Add(giveBackTime).UnixNano()
	if !w.backBy.CompareAndSwap(0, by) {
		by = w.backBy.Load()
	}
	return time.Unix(0, by)
}
