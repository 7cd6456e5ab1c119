package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// TestLostTaskMarkedGivenBackIsPublishedAgain: a worker stopping gives a
// run's task back, marking its turn subject, and then NATS loses the
// steps stream (kept in memory) with the task in it. The coordinator,
// seeing the stream made anew, looks the turn up: a mark is no answer, so
// it publishes the task again, and the next worker of the pool answers
// it. Taken for an answer, the mark left the run waiting out its turn
// timeout (ten minutes) on a task nobody held.
func TestLostTaskMarkedGivenBackIsPublishedAgain(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: "done"}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	ctx := t.Context()
	js, assets := streamsOf(t, cl)
	cons, err := wire.EnsureWorkerConsumer(ctx, assets, "later", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := contract(ws)
	c.Provider.Pool = "later" // no worker of the cluster serves it
	h, err := cl.Submit(ctx, c, harness.WithRunID("marked"))
	if err != nil {
		t.Fatal(err)
	}
	// The stopping worker: it takes the task, marks it given back, and
	// gives it back.
	m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var task protocol.StepTask
	if err := json.Unmarshal(m.Data(), &task); err != nil {
		t.Fatal(err)
	}
	mark, _ := json.Marshal(&protocol.TurnResult{Run: task.Run, Step: task.Step, Attempt: task.Attempt, Worker: "stopping", Returned: 1})
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn(task.Run, task.Step, task.Attempt), Data: mark},
		jetstream.WithMsgID(task.Key()+".returned.1")); err != nil {
		t.Fatal(err)
	}
	if err := m.Nak(); err != nil {
		t.Fatal(err)
	}
	// NATS loses the steps stream with the task in it.
	if err := js.DeleteStream(ctx, wire.StreamSteps); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Ensure(ctx, js, wire.Config{}); err != nil {
		t.Fatal(err)
	}
	// The pool's next worker can answer only a task published again.
	w, err := worker.New(testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials())), agent, worker.Config{ID: "next", Pools: []string{"later"}, NoStream: true})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(wctx) }()
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := h.Wait(waitCtx)
	if err != nil {
		t.Fatalf("the run did not finish: %v (its task, lost, was not published again)", err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 1 {
		t.Errorf("run = %s after %d steps (%s), want finished after 1", res.Outcome, res.Steps, res.Reason)
	}
}
