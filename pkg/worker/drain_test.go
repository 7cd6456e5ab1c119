package worker_test

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
	"github.com/ioharness/harness/pkg/worker"
)

// heldProvider signals each call it begins and answers it once released,
// or gives up when its call is abandoned.
type heldProvider struct {
	began   chan struct{}
	release chan struct{}
}

func (*heldProvider) Name() string { return "held" }

func (p *heldProvider) Complete(ctx context.Context, _ *protocol.CompletionRequest) (*protocol.Turn, error) {
	p.began <- struct{}{}
	select {
	case <-p.release:
		return &protocol.Turn{Text: "finished while draining", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestWorkerDrains stops a worker while its provider call is in flight:
// with Drain it takes no more tasks, lets the call finish and publishes
// its turn before Run returns; without, the call is abandoned and no turn
// is published.
func TestWorkerDrains(t *testing.T) {
	for _, tt := range []struct {
		name  string
		drain time.Duration
		turn  bool
	}{{"drain", time.Minute, true}, {"no drain", 0, false}} {
		t.Run(tt.name, func(t *testing.T) {
			nc := testkit.Conn(t, testkit.NATS(t))
			js, _ := jetstream.New(nc)
			assets, err := wire.Ensure(t.Context(), js, wire.Config{})
			if err != nil {
				t.Fatal(err)
			}
			p := &heldProvider{began: make(chan struct{}, 1), release: make(chan struct{})}
			w, err := worker.New(nc, p, worker.Config{Drain: tt.drain, Assets: assets})
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			task := &protocol.StepTask{Run: "r1", Step: 1, Attempt: 1, Request: *request()}
			data, _ := json.Marshal(task)
			if _, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: wire.Steps("default"), Data: data}, jetstream.WithMsgID(task.Key())); err != nil {
				t.Fatal(err)
			}
			<-p.began
			stop() // SIGTERM
			if tt.drain > 0 {
				select {
				case err := <-ran:
					t.Fatalf("Run returned (%v) while its call was in flight", err)
				default:
				}
				close(p.release)
			}
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			_, err = assets.Turns.GetLastMsgForSubject(t.Context(), wire.Turn("r1", 1, 1))
			if got := err == nil; got != tt.turn {
				t.Errorf("turn published = %v (%v), want %v", got, err, tt.turn)
			}
		})
	}
}
