package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// answering answers every call at once.
type answering struct{}

func (answering) Name() string { return "answering" }

func (answering) Complete(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
	return &protocol.Turn{Text: "done", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

// TestGivenBackTwiceThenLost gives one task back on its first two
// deliveries, loses the third (its worker dies under it: no mark), and
// lets a worker answer the fourth: of the four, the two marked made no
// call, so the answer reports 2 deliveries that may have (its own and the
// lost one), and the coordinator charges one lost call, not three.
func TestGivenBackTwiceThenLost(t *testing.T) {
	nc, js, assets, cons := taskQueue(t)
	ctx := t.Context()
	task := &protocol.StepTask{Run: "r1", Step: 1, Attempt: 1, Request: protocol.CompletionRequest{Model: "m",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Task: say done"}}}}
	data, _ := json.Marshal(task)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Steps(protocol.DefaultPool), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
		t.Fatal(err)
	}
	w, err := New(nc, answering{}, Config{ID: "w", AckWait: ackWait, NoStream: true, Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	take := func(delivery uint64) jetstream.Msg {
		t.Helper()
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("delivery %d: %v", delivery, err)
		}
		if md, err := m.Metadata(); err != nil || md.NumDelivered != delivery {
			t.Fatalf("delivery %+v, want number %d (%v)", md, delivery, err)
		}
		return m
	}
	mark := func(want int) {
		t.Helper()
		m, err := assets.Turns.GetLastMsgForSubject(ctx, wire.Turn("r1", 1, 1))
		if err != nil {
			t.Fatal(err)
		}
		var tr protocol.TurnResult
		if err := json.Unmarshal(m.Data, &tr); err != nil || !tr.GivenBack() || tr.Returned != want {
			t.Fatalf("the attempt's subject holds %s, want a mark of %d deliveries given back", m.Data, want)
		}
	}
	w.giveBack(take(1), nil, prior{}, w.giveBackBy())
	mark(1)
	w.giveBack(take(2), nil, prior{}, w.giveBackBy())
	mark(2)
	take(3) // its worker dies: no acknowledgement, no mark; it comes back after the ack wait

	if n := answeredAfter(t, nc, w); n != 2 {
		t.Errorf("answered after %d deliveries that may have made a call, want 2 (of 4, 2 given back)", n)
	}
}

// ackWait is the task queue's in these tests: a task left unacknowledged
// comes back after a second.
const ackWait = time.Second

// taskQueue is a connection to a server of its own with the streams, and
// the default pool's consumer.
func taskQueue(t *testing.T) (*nats.Conn, jetstream.JetStream, *wire.Assets, jetstream.Consumer) {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	js, _ := jetstream.New(nc)
	assets, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := wire.EnsureWorkerConsumer(t.Context(), assets, protocol.DefaultPool, ackWait)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, assets, cons
}

// answeredAfter runs w until it answers run r1's task, and returns the
// deliveries its answer reports.
func answeredAfter(t *testing.T, nc *nats.Conn, w *Worker) int {
	t.Helper()
	turns := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(wire.Stored("r1"), turns)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() { _ = w.Run(ctx) }()
	select {
	case m := <-turns:
		var tr protocol.TurnResult
		if err := json.Unmarshal(m.Data, &tr); err != nil || tr.Turn == nil {
			t.Fatalf("turn = %s, want an answer", m.Data)
		}
		return tr.Deliveries
	case <-time.After(30 * time.Second):
		t.Fatal("the task was not answered")
	}
	return 0
}

// TestMarkOfAnotherMessageCountsNothing: the attempt's subject holds a
// mark of five deliveries given back, of an earlier message of the task
// (one lost with the steps stream, and published again). The new
// message's first delivery is lost with its worker; its second counts
// both as calls that may have been made: the old mark names another
// message, and counting it would hide the lost call.
func TestMarkOfAnotherMessageCountsNothing(t *testing.T) {
	nc, js, assets, cons := taskQueue(t)
	ctx := t.Context()
	old, _ := json.Marshal(&protocol.TurnResult{Run: "r1", Step: 1, Attempt: 1, Worker: "gone", Returned: 5, Message: "1-1"})
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn("r1", 1, 1), Data: old}); err != nil {
		t.Fatal(err)
	}
	task := &protocol.StepTask{Run: "r1", Step: 1, Attempt: 1, Request: protocol.CompletionRequest{Model: "m",
		Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Task: say done"}}}}
	data, _ := json.Marshal(task)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Steps(protocol.DefaultPool), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil { // lost with its worker
		t.Fatal(err)
	}
	w, err := New(nc, answering{}, Config{ID: "w", AckWait: ackWait, NoStream: true, Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	if n := answeredAfter(t, nc, w); n != 2 {
		t.Errorf("answered after %d deliveries that may have made a call, want 2: the mark of another message counts none", n)
	}
}
