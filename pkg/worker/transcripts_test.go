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

// recordingProvider answers every call and hands each request it was
// sent to the test.
type recordingProvider struct {
	got chan protocol.CompletionRequest
}

func (*recordingProvider) Name() string { return "recording" }

func (p *recordingProvider) Complete(_ context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	p.got <- *req
	return &protocol.Turn{Text: "ok", Usage: protocol.Usage{InputTokens: 1, OutputTokens: 1}}, nil
}

// taskBench is a worker on a server of its own, and what the tests
// publish it.
type taskBench struct {
	t      *testing.T
	nc     *nats.Conn
	js     jetstream.JetStream
	assets *wire.Assets
	p      *recordingProvider
}

func newTaskBench(t *testing.T, cfg worker.Config) *taskBench {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	js, _ := jetstream.New(nc)
	assets, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := &taskBench{t: t, nc: nc, js: js, assets: assets, p: &recordingProvider{got: make(chan protocol.CompletionRequest, 8)}}
	cfg.NoStream = true
	w, err := worker.New(nc, b.p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	<-w.Ready()
	return b
}

func (b *taskBench) publish(task *protocol.StepTask) {
	b.t.Helper()
	data, _ := json.Marshal(task)
	if _, err := b.js.PublishMsg(b.t.Context(), &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
		b.t.Fatal(err)
	}
}

// sent is the next request the provider was sent.
func (b *taskBench) sent() protocol.CompletionRequest {
	b.t.Helper()
	select {
	case req := <-b.p.got:
		return req
	case <-time.After(20 * time.Second):
		b.t.Fatal("the provider was sent no request")
		return protocol.CompletionRequest{}
	}
}

// drained waits for the steps stream to hold no task.
func (b *taskBench) drained() {
	b.t.Helper()
	testkit.CheckFor(b.t, 10*time.Second, 20*time.Millisecond, func() error {
		info, err := b.assets.Steps.Info(b.t.Context())
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("%d step tasks still queued", info.State.Msgs)
		}
		return nil
	})
}

func same(t *testing.T, what string, got, want protocol.CompletionRequest) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s: the provider was sent\n%s\nwant\n%s", what, g, w)
	}
}

func msg(role, content string) protocol.Message {
	return protocol.Message{Role: role, Content: content}
}

// TestTaskExtendingOneKeptIsPutTogether serves a run's tasks on one
// worker: the first whole, the next carrying only what follows the one
// before (its frame too, or not), and one that shares a shorter prefix
// of its base. The provider is sent each request whole.
func TestTaskExtendingOneKeptIsPutTogether(t *testing.T) {
	b := newTaskBench(t, worker.Config{ID: "w1"})
	tools := []protocol.ToolSpec{{Name: "read_file", Description: "Read.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	one := protocol.CompletionRequest{Model: "m", System: "be brief", Tools: tools, Messages: []protocol.Message{msg("user", "Task.")}}
	b.publish(&protocol.StepTask{Run: "r1", Step: 1, Attempt: 1, Request: one, Transcript: "d.1"})
	same(t, "the first task", b.sent(), one)

	two := one
	two.Messages = append(one.Messages[:1:1], msg("assistant", "Reading."), msg("user", "More."))
	delta := two
	delta.System, delta.Tools, delta.Messages = "", nil, two.Messages[1:]
	b.publish(&protocol.StepTask{Run: "r1", Step: 2, Attempt: 1, Request: delta, Transcript: "d.2",
		Base: &protocol.TaskBase{Transcript: "d.1", Messages: 1, Frame: true}})
	same(t, "a task extending the first, its frame too", b.sent(), two)

	three := two
	three.System = "be briefer"
	three.Messages = append(two.Messages[:2:2], msg("user", "Collapsed."))
	delta = three
	delta.Messages = three.Messages[2:]
	b.publish(&protocol.StepTask{Run: "r1", Step: 3, Attempt: 1, Request: delta, Transcript: "d.3",
		Base: &protocol.TaskBase{Transcript: "d.2", Messages: 2}})
	same(t, "a task sharing a shorter prefix, with a frame of its own", b.sent(), three)

	// A base the worker did not keep (another coordinator's, say), though
	// it kept as many messages of the run: asked for, never put together
	// from what it kept.
	four := protocol.CompletionRequest{Model: "m", System: "the holder's", Messages: append(three.Messages[:3:3], msg("user", "Four."))}
	sub, err := b.nc.Subscribe(wire.WholeTask("r1", 4, 1), func(m *nats.Msg) {
		data, _ := json.Marshal(&protocol.WholeRequest{Request: &four})
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	delta = four
	delta.System, delta.Messages = "", four.Messages[3:]
	b.publish(&protocol.StepTask{Run: "r1", Step: 4, Attempt: 1, Request: delta, Transcript: "other.2",
		Base: &protocol.TaskBase{Transcript: "other.1", Messages: 3, Frame: true}})
	same(t, "a task naming a base the worker did not keep", b.sent(), four)
	b.drained()
}

// TestTaskWithoutItsBaseIsAskedForWhole serves tasks whose base the
// worker did not keep (it keeps none): it asks the coordinator holding
// the run, and sends the provider what it is given; a task whose run is
// past its step is dropped uncalled; and one no coordinator answers for
// yet is asked for again, held meanwhile, not given back: delivered
// again, it would count as a call lost with its worker, which is charged.
func TestTaskWithoutItsBaseIsAskedForWhole(t *testing.T) {
	b := newTaskBench(t, worker.Config{ID: "w1", TranscriptBytes: -1})
	whole := protocol.CompletionRequest{Model: "m", System: "be brief", Messages: []protocol.Message{msg("user", "Task."), msg("assistant", "Ok."), msg("user", "Go on.")}}
	var asks, r3 atomic.Int32
	sub, err := b.nc.Subscribe(wire.WholeTaskPrefix+">", func(m *nats.Msg) {
		asks.Add(1)
		var reply protocol.WholeRequest
		switch m.Subject {
		case wire.WholeTask("r1", 2, 1):
			reply.Request = &whole
		case wire.WholeTask("r2", 2, 1):
			reply.Error = protocol.Errorf(protocol.CodeNotFound, "run r2 is past step 2")
		case wire.WholeTask("r3", 2, 1):
			if r3.Add(1) == 1 { // the coordinator taking r3 over is not there yet
				return
			}
			reply.Request = &whole
		default:
			t.Errorf("asked on %s", m.Subject)
			return
		}
		data, _ := json.Marshal(&reply)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	delta := whole
	delta.System, delta.Messages = "", whole.Messages[2:]
	base := &protocol.TaskBase{Transcript: "gone.1", Messages: 2, Frame: true}

	b.publish(&protocol.StepTask{Run: "r1", Step: 2, Attempt: 1, Request: delta, Transcript: "gone.2", Base: base})
	same(t, "a task asked for whole", b.sent(), whole)
	b.drained()

	b.publish(&protocol.StepTask{Run: "r2", Step: 2, Attempt: 1, Request: delta, Transcript: "gone.2", Base: base})
	b.drained()
	select {
	case req := <-b.p.got:
		t.Fatalf("the provider was called for a task wanted no more: %+v", req)
	default:
	}

	turns, err := b.nc.SubscribeSync(wire.Turn("r3", 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	b.publish(&protocol.StepTask{Run: "r3", Step: 2, Attempt: 1, Request: delta, Transcript: "gone.2", Base: base})
	same(t, "a task asked for whole again", b.sent(), whole)
	m, err := turns.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var tr protocol.TurnResult
	if err := json.Unmarshal(m.Data, &tr); err != nil || tr.Turn == nil || tr.Deliveries != 0 {
		t.Fatalf("turn of the task asked for again: %s (%v); want a turn delivered once", m.Data, err)
	}
	b.drained()
	if n := asks.Load(); n != 4 {
		t.Errorf("%d asks, want 4: one for r1, one for r2, two for r3", n)
	}
}
