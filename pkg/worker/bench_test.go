package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// answer is an OpenAI chat completion a local server returns at once.
var answer = []byte(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)

func fastServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func request() *protocol.CompletionRequest {
	return &protocol.CompletionRequest{Model: "m", System: "be brief", Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Task: say done"}}}
}

// benchTasks returns the step tasks of the benchmarks by step: the
// request, and the policy a coordinator sends with every task (a
// contract's layer over the built-in ones), encoded ahead but for the
// step, so that the timed loop encodes little of its own.
func benchTasks(b *testing.B) func(step int) []byte {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "project", Rules: []protocol.Rule{
		{Act: "write", Effect: "allow", Pattern: "src/**"}, {Act: "exec", Effect: "allow", Pattern: "go test *"}}}}})
	if err != nil {
		b.Fatal(err)
	}
	data, err := json.Marshal(&protocol.StepTask{Run: "bench", Step: 1, Attempt: 1, Request: *request(), Policy: pol.Protocol()})
	if err != nil {
		b.Fatal(err)
	}
	head, tail, ok := bytes.Cut(data, []byte(`"step":1,`))
	if !ok {
		b.Fatalf("no step in %s", data)
	}
	return func(step int) []byte {
		return slices.Concat(head, fmt.Appendf(nil, `"step":%d,`, step), tail)
	}
}

// BenchmarkWorkerTurn is the worker's whole path for one turn against a
// local OpenAI-compatible server that answers at once: the step task,
// carrying a run's policy, taken from JetStream, the provider's endpoint
// checked against that policy, the request built, sent and parsed, the
// turn published durably and heard where a coordinator hears it, once
// stored. Compare with BenchmarkBareHTTP, the same exchange as one plain
// HTTP round trip, and BenchmarkBareJetStreamHop; the difference is the
// worker's own overhead.
func BenchmarkWorkerTurn(b *testing.B) {
	srv := fastServer(b)
	nc := testkit.Conn(b, testkit.NATS(b))
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := wire.Ensure(ctx, js, wire.Config{}); err != nil {
		b.Fatal(err)
	}
	p, err := provider.NewOpenAI(provider.OpenAIConfig{APIKey: "k", BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	w, err := worker.New(nc, p, worker.Config{NoStream: true})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()
	turns := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(wire.Stored("bench"), turns)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	task := benchTasks(b)
	turn := func(i int) {
		data := task(i + 1)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(protocol.StepKey("bench", i+1, 1))); err != nil {
			b.Fatal(err)
		}
		select {
		case m := <-turns:
			var tr protocol.TurnResult
			if json.Unmarshal(m.Data, &tr) != nil || tr.Turn == nil || tr.Turn.Text != "done" {
				b.Fatalf("turn = %s", m.Data)
			}
		case <-time.After(10 * time.Second):
			b.Fatal("no turn")
		}
	}
	turn(-1000) // warm up the connections
	b.ResetTimer()
	for i := range b.N {
		turn(i)
	}
}

// BenchmarkBareHTTP is one plain HTTP round trip of the same request to the
// same server: the baseline for BenchmarkWorkerTurn.
func BenchmarkBareHTTP(b *testing.B) {
	srv := fastServer(b)
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "Task: say done"}}})
	client := srv.Client()
	b.ResetTimer()
	for range b.N {
		resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			b.Fatal(fmt.Errorf("decode: %w", err))
		}
		resp.Body.Close()
	}
}

// BenchmarkBareJetStreamHop is the JetStream half of BenchmarkWorkerTurn
// with no worker: the same step task published, taken by a plain pull
// consumer of the pool, and answered with a turn of the same size
// published durably, heard once stored. BenchmarkWorkerTurn's time
// less this and BenchmarkBareHTTP is the worker's own overhead.
func BenchmarkBareJetStreamHop(b *testing.B) {
	nc := testkit.Conn(b, testkit.NATS(b))
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	assets, err := wire.Ensure(ctx, js, wire.Config{})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := wire.EnsureWorkerConsumer(ctx, assets, "default", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	answer, _ := json.Marshal(&protocol.TurnResult{Run: "bench", Turn: &protocol.Turn{Text: "done", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var task struct { // what the turn's subject needs, the rest skipped
			Run           string
			Step, Attempt int
		}
		if err := json.Unmarshal(m.Data(), &task); err != nil {
			b.Error(err)
			return
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Turn(task.Run, task.Step, task.Attempt), Data: answer}, jetstream.WithMsgID(protocol.StepKey(task.Run, task.Step, task.Attempt))); err != nil && ctx.Err() == nil {
			b.Error(err)
		}
		_ = m.Ack()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	turns := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(wire.Stored("bench"), turns)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	task := benchTasks(b)
	hop := func(i int) {
		data := task(i + 1)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(protocol.StepKey("bench", i+1, 1))); err != nil {
			b.Fatal(err)
		}
		select {
		case <-turns:
		case <-time.After(10 * time.Second):
			b.Fatal("no turn")
		}
	}
	hop(-1000)
	b.ResetTimer()
	for i := range b.N {
		hop(i)
	}
}
