package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// countingProvider answers every call and counts them.
type countingProvider struct{ calls atomic.Int32 }

func (*countingProvider) Name() string { return "counting" }

func (p *countingProvider) Complete(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
	p.calls.Add(1)
	return &protocol.Turn{Text: "done", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

// TestRedeliveredTask plays a worker that died holding a step task: the
// task comes back to another worker. If the dead worker had published the
// turn, the new one acknowledges the task without calling the provider (a
// second call would be paid twice); if not, it calls and reports how often
// the task was delivered, so the coordinator can charge the lost call.
func TestRedeliveredTask(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	assets, err := wire.Ensure(ctx, js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const ackWait = time.Second
	cons, err := wire.EnsureWorkerConsumer(ctx, assets, "default", ackWait)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(task *protocol.StepTask) {
		t.Helper()
		data, _ := json.Marshal(task)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
			t.Fatal(err)
		}
	}
	// The dead worker: it takes both tasks and never acknowledges them;
	// for the first it got as far as publishing the turn.
	answered := &protocol.StepTask{Run: "r1", Step: 1, Attempt: 1, Request: *request()}
	lost := &protocol.StepTask{Run: "r2", Step: 1, Attempt: 1, Request: *request()}
	publish(answered)
	publish(lost)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 2 {
		t.Fatalf("the first worker took %d tasks, want 2", n)
	}
	first, _ := json.Marshal(&protocol.TurnResult{Run: "r1", Step: 1, Attempt: 1, Turn: &protocol.Turn{Text: "first"}, Worker: "dead"})
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn("r1", 1, 1), Data: first}, jetstream.WithMsgID(answered.Key())); err != nil {
		t.Fatal(err)
	}
	// The run moved on before the task came back: its next step's turn is
	// out too.
	next, _ := json.Marshal(&protocol.TurnResult{Run: "r1", Step: 2, Attempt: 1, Turn: &protocol.Turn{Text: "next"}, Worker: "other"})
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn("r1", 2, 1), Data: next}, jetstream.WithMsgID("r1.2.1")); err != nil {
		t.Fatal(err)
	}
	// A task the coordinator gave up on before any worker took it.
	publish(&protocol.StepTask{Run: "r3", Step: 1, Attempt: 1, Request: *request(), Expires: time.Now().Add(-time.Second)})

	turns := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(wire.TurnsPrefix+">", turns)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	p := &countingProvider{}
	w, err := worker.New(nc, p, worker.Config{ID: "second", NoStream: true, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(wctx) }()

	select {
	case m := <-turns:
		var tr protocol.TurnResult
		if err := json.Unmarshal(m.Data, &tr); err != nil {
			t.Fatal(err)
		}
		if tr.Run != "r2" || tr.Worker != "second" || tr.Deliveries != 2 || tr.Turn == nil {
			t.Fatalf("turn = %s, want r2's answered by the second worker after 2 deliveries", m.Data)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the lost task was never answered again")
	}
	// Every task leaves the queue; only the lost one cost a call.
	testkit.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		info, err := assets.Steps.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("%d step tasks still queued", info.State.Msgs)
		}
		return nil
	})
	if c := p.calls.Load(); c != 1 {
		t.Errorf("%d provider calls, want 1: the answered task must not be paid for twice", c)
	}
	select {
	case m := <-turns:
		t.Errorf("another turn was published: %s", m.Data)
	default:
	}
}
