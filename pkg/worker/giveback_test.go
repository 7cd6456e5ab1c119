package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// TestStoppingWorkerGivesTasksBackUncalled stops a worker of two slots,
// both calls in flight, with two more tasks in its hands: one waiting for
// a slot, one in its buffer. It gives both back at once, each marked in
// the turns stream as given back without a call; the worker that takes
// them calls once for each and reports no earlier delivery as a call (the
// coordinator would charge each as a call lost with its worker). The
// stopping worker's own calls finish in its drain. Before the marks, both
// answers said 2 deliveries, and the buffered task came back only when its
// ack wait (a minute) ran out.
func TestStoppingWorkerGivesTasksBackUncalled(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	assets, err := wire.Ensure(ctx, js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	turns := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(wire.TurnsPrefix+">", turns)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	held := &heldProvider{began: make(chan struct{}, 2), release: make(chan struct{})}
	first, err := worker.New(nc, held, worker.Config{ID: "stopping", Concurrency: 2, Drain: time.Minute, NoStream: true, Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- first.Run(fctx) }()
	publish := func(run string) {
		t.Helper()
		task := &protocol.StepTask{Run: run, Step: 1, Attempt: 1, Request: *request()}
		data, _ := json.Marshal(task)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
			t.Fatal(err)
		}
	}
	publish("r1")
	publish("r2")
	<-held.began
	<-held.began
	publish("r3")
	publish("r4")
	cons, err := js.Consumer(ctx, wire.StreamSteps, wire.WorkerConsumer("default"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending != 4 || info.NumPending != 0 {
			return fmt.Errorf("the stopping worker holds %d tasks, %d not delivered; want 4 and 0", info.NumAckPending, info.NumPending)
		}
		return nil
	})
	stop() // SIGTERM

	marked := map[string]bool{}
	waitTurn := func(want func(*protocol.TurnResult) bool) *protocol.TurnResult {
		t.Helper()
		for {
			select {
			case m := <-turns:
				var tr protocol.TurnResult
				if err := json.Unmarshal(m.Data, &tr); err != nil {
					t.Fatal(err)
				}
				if tr.GivenBack() {
					// The stopping worker may be handed a task it gave
					// back once more before its pulls are gone: it gives
					// it back again, and the mark counts both.
					if tr.Worker != "stopping" || tr.Returned < 1 {
						t.Errorf("mark = %s, want deliveries given back by the stopping worker", m.Data)
					}
					marked[tr.Run] = true
				}
				if want(&tr) {
					return &tr
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no turn came; marked so far: %v", marked)
			}
		}
	}
	waitTurn(func(*protocol.TurnResult) bool { return marked["r3"] && marked["r4"] })

	next := &countingProvider{}
	second, err := worker.New(nc, next, worker.Config{ID: "next", NoStream: true, Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopSecond := context.WithCancel(ctx)
	defer stopSecond()
	go func() { _ = second.Run(sctx) }()
	answered := map[string]*protocol.TurnResult{}
	for len(answered) < 2 {
		tr := waitTurn(func(tr *protocol.TurnResult) bool { return tr.Turn != nil && tr.Worker == "next" })
		answered[tr.Run] = tr
	}
	for _, run := range []string{"r3", "r4"} {
		tr := answered[run]
		if tr == nil {
			t.Fatalf("%s was not answered by the next worker (answers: %v)", run, answered)
		}
		if tr.Deliveries != 0 {
			t.Errorf("%s answered after %d deliveries that may have made a call, want none before its own", run, tr.Deliveries)
		}
	}
	if c := next.calls.Load(); c != 2 {
		t.Errorf("the next worker made %d calls, want 2", c)
	}

	close(held.release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"r1", "r2"} {
		m, err := assets.Turns.GetLastMsgForSubject(ctx, wire.Turn(run, 1, 1))
		if err != nil {
			t.Fatalf("%s's turn after the drain: %v", run, err)
		}
		var tr protocol.TurnResult
		if err := json.Unmarshal(m.Data, &tr); err != nil || tr.Turn == nil || tr.Worker != "stopping" {
			t.Errorf("%s's turn = %s, want the stopping worker's, finished in its drain", run, m.Data)
		}
	}
}
