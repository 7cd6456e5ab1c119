package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// countedProvider counts its calls by the request's task, signals each
// call it begins, and answers once the test lets it.
type countedProvider struct {
	began   chan string
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func (*countedProvider) Name() string { return "counted" }

func (p *countedProvider) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	task := req.Messages[0].Content
	p.mu.Lock()
	p.calls[task]++
	p.mu.Unlock()
	p.began <- task
	select {
	case <-p.release:
		return &protocol.Turn{Text: "done", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *countedProvider) count() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// logWatch is a log's writer that closes seen at the first line holding
// want (never with want empty).
type logWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (l *logWatch) Write(p []byte) (int, error) {
	if l.want != "" && bytes.Contains(p, []byte(l.want)) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// TestConsumerDeletedCallsOnce deletes a pool's consumer (as `nats consumer
// rm` would) under a worker calling for some of the pool's tasks and
// holding another in its buffer. The stream keeps the tasks, so the
// worker's consumer, made again, delivers them all again as first
// deliveries: each must still cost one provider call, and every task be
// answered. With one slot, the task in the old buffer meets its second
// delivery (left to the new consumer, not served twice) and the one called
// for is found answered; with slots to spare, the second delivery of a
// task in flight comes while its call is still made (put off, not called
// again).
func TestConsumerDeletedCallsOnce(t *testing.T) {
	for _, tt := range []struct {
		name        string
		concurrency int
		tasks       int    // the first min(tasks, concurrency) are in flight at the deletion
		putOff      string // a log line to wait for before the calls are answered
	}{{"a task in the buffer", 1, 2, ""}, {"a task in flight brought again", 3, 2, "putting it off"}} {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NATS(t)
			nc := testkit.Conn(t, srv)
			js, _ := jetstream.New(nc)
			assets, err := wire.Ensure(t.Context(), js, wire.Config{})
			if err != nil {
				t.Fatal(err)
			}
			p := &countedProvider{began: make(chan string, 16), release: make(chan struct{}), calls: map[string]int{}}
			logged := &logWatch{want: tt.putOff, seen: make(chan struct{})}
			w, err := worker.New(nc, p, worker.Config{Assets: assets, Concurrency: tt.concurrency, Logger: slog.New(slog.NewTextHandler(logged, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			defer func() {
				stop()
				if err := <-ran; err != nil {
					t.Error(err)
				}
			}()
			<-w.Ready()
			want := map[string]int{}
			for i := 1; i <= tt.tasks; i++ {
				name := fmt.Sprintf("task %d", i)
				want[name] = 1
				req := &protocol.CompletionRequest{Model: "m", Messages: []protocol.Message{{Role: protocol.RoleUser, Content: name}}}
				task := &protocol.StepTask{Run: "r1", Step: i, Attempt: 1, Request: *req}
				data, _ := json.Marshal(task)
				if _, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
					t.Fatal(err)
				}
			}
			for range min(tt.tasks, tt.concurrency) {
				<-p.began
			}
			// The worker holds what it was delivered: the calls, and with
			// one slot the next task, which waits for it.
			consumer := wire.WorkerConsumer("default")
			testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
				info, err := assets.Steps.Consumer(t.Context(), consumer)
				if err != nil {
					return err
				}
				if int(info.CachedInfo().NumAckPending) < tt.tasks {
					return fmt.Errorf("%d tasks delivered, want %d", info.CachedInfo().NumAckPending, tt.tasks)
				}
				return nil
			})
			if err := assets.Steps.DeleteConsumer(t.Context(), consumer); err != nil {
				t.Fatal(err)
			}
			// With a slot to spare, the worker makes its consumer again at
			// once, which delivers the tasks again while they are called
			// for; with none, it hears of the deletion only once a call is
			// answered (the client's status messages wait for the handler).
			if tt.putOff != "" {
				select {
				case <-logged.seen:
				case <-time.After(20 * time.Second):
					t.Fatalf("the worker never logged %q", tt.putOff)
				}
			}
			close(p.release)
			for i := 1; i <= tt.tasks; i++ {
				// The answer, not a mark of a delivery put off: a mark
				// published after the turn would replace it.
				testkit.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
					m, err := assets.Turns.GetLastMsgForSubject(t.Context(), wire.Turn("r1", i, 1))
					if err != nil {
						return err
					}
					var tr protocol.TurnResult
					if err := json.Unmarshal(m.Data, &tr); err != nil || tr.Turn == nil {
						return fmt.Errorf("turn %d holds %s, want the answer", i, m.Data)
					}
					if tr.Deliveries > 1 {
						return fmt.Errorf("turn %d counts %d deliveries as calls, want 1", i, tr.Deliveries)
					}
					return nil
				})
			}
			// Every task answered and acknowledged: nothing left to call for.
			testkit.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
				info, err := assets.Steps.Info(t.Context())
				if err != nil {
					return err
				}
				if info.State.Msgs != 0 {
					return fmt.Errorf("%d tasks still in the stream", info.State.Msgs)
				}
				return nil
			})
			if got := p.count(); !maps.Equal(got, want) {
				t.Errorf("provider calls by task: %v, want %v", got, want)
			}
		})
	}
}
