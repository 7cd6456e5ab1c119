package command

import (
	"context"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/worker"
)

// delayed answers as its provider does, each turn no sooner than d after
// the call began: a replayed cassette that takes as long as a model would,
// for measuring a cluster with a provider of known latency.
type delayed struct {
	p worker.Provider
	d time.Duration
}

func (p *delayed) Name() string { return p.p.Name() }

func (p *delayed) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	return p.wait(ctx, time.Now(), func() (*protocol.Turn, error) { return p.p.Complete(ctx, req) })
}

// CompleteStream streams when the provider does, else answers whole.
func (p *delayed) CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(string)) (*protocol.Turn, error) {
	s, ok := p.p.(interface {
		CompleteStream(context.Context, *protocol.CompletionRequest, func(string)) (*protocol.Turn, error)
	})
	if !ok {
		return p.Complete(ctx, req)
	}
	return p.wait(ctx, time.Now(), func() (*protocol.Turn, error) { return s.CompleteStream(ctx, req, onToken) })
}

// AcceptsImages is the provider's answer: the delay changes nothing else.
func (p *delayed) AcceptsImages() bool {
	a, ok := p.p.(interface{ AcceptsImages() bool })
	return ok && a.AcceptsImages()
}

// Endpoints are the provider's.
func (p *delayed) Endpoints() []string {
	if e, ok := p.p.(worker.Endpointer); ok {
		return e.Endpoints()
	}
	return nil
}

func (p *delayed) wait(ctx context.Context, start time.Time, call func() (*protocol.Turn, error)) (*protocol.Turn, error) {
	turn, err := call()
	t := time.NewTimer(time.Until(start.Add(p.d)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, protocol.Errorf(protocol.CodeProviderTimeout, "the call ended before the turn delay: %v", ctx.Err())
	case <-t.C:
	}
	return turn, err
}
