package provider

import (
	"context"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Fallback is a Provider that asks a chain of providers in order and falls
// over to the next only when one fails in a way worth retrying (a rate
// limit, a server failure, a timeout, a lost connection, a malformed
// answer). It is a Streamer too: members that stream, stream.
//
// The turn it returns is the serving member's, so its Served names the
// provider that actually answered; a caller that wants to know whether a
// fallback served compares it with the first member's name. A chain does
// not promise that its members answer alike, and keeps no memory of which
// member failed: every call starts at the first. It is safe for concurrent
// use when its members are.
type Fallback struct {
	members []Provider
	name    string
}

var (
	_ Provider = (*Fallback)(nil)
	_ Streamer = (*Fallback)(nil)
)

// NewFallback returns a chain that asks providers in the order given. Nil
// providers are left out. Chains nest: NewFallback(a, NewFallback(b, c))
// behaves as NewFallback(a, b, c).
func NewFallback(providers ...Provider) *Fallback {
	f := &Fallback{}
	names := make([]string, 0, len(providers))
	for _, p := range providers {
		if p == nil {
			continue
		}
		f.members = append(f.members, p)
		names = append(names, p.Name())
	}
	f.name = strings.Join(names, " -> ")
	return f
}

// Name returns the members' names joined by " -> ", such as
// "anthropic -> openrouter -> openai"; "" for a chain with no members.
func (f *Fallback) Name() string { return f.name }

// Complete asks each member in turn until one answers, and returns its
// turn, with Served naming that member (its Name when it left Served
// empty).
//
// A member's error that is not retryable (auth, request, context
// overflow, unrecorded) is returned at once: another provider would not
// fare better with the same request and keys. A retryable one, or a used
// up quota (the next member bills another account), moves on to the next
// member, unless ctx is done, when it is returned as is. When
// the last member fails, its error is returned with its code and
// RetryAfterMS, its message naming the members that failed before it. A
// chain with no members returns CodeProviderRequest. Errors that are not
// a *protocol.Error are classified as a call that got no answer.
func (f *Fallback) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	return f.each(ctx, func(p Provider) (*protocol.Turn, error) { return p.Complete(ctx, req) })
}

// CompleteStream is Complete through Stream: members that are Streamers
// stream to onToken, others hand it their whole text at once. A member
// that fails part way may already have handed onToken some text; the
// text of the member that serves follows it.
func (f *Fallback) CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error) {
	return f.each(ctx, func(p Provider) (*protocol.Turn, error) { return Stream(ctx, p, req, onToken) })
}

func (f *Fallback) each(ctx context.Context, call func(Provider) (*protocol.Turn, error)) (*protocol.Turn, error) {
	if len(f.members) == 0 {
		return nil, protocol.FieldError(protocol.CodeProviderRequest, "",
			"configure at least one provider for the chain",
			"the fallback chain has no providers")
	}
	var failed []string // "name (code)" of each member that failed over
	for i, p := range f.members {
		turn, err := call(p)
		if err == nil && turn == nil {
			err = protocol.FieldError(protocol.CodeProviderMalformed, "",
				"fix the provider: it must return a turn or an error",
				"%s returned no turn and no error", p.Name())
		}
		if err == nil {
			if turn.Served == "" {
				turn.Served = p.Name()
			}
			return turn, nil
		}
		pe := providerError(p.Name(), err)
		last := i == len(f.members)-1
		// The code decides, not a server's word on trying it again (the
		// next member is another server).
		if !pe.Code.Retryable() && pe.Code != protocol.CodeQuotaExhausted || last || ctx.Err() != nil {
			if len(failed) == 0 {
				return nil, pe
			}
			out := *pe
			out.Message += " (after " + strings.Join(failed, ", ") + ")"
			return nil, &out
		}
		failed = append(failed, p.Name()+" failed with "+pe.Code.String())
	}
	panic("unreachable: the last member returns")
}

// AcceptsImages reports whether every member takes images: a chain that
// may fall over to one that does not cannot promise to show them.
func (f *Fallback) AcceptsImages() bool {
	for _, m := range f.members {
		if a, ok := m.(interface{ AcceptsImages() bool }); !ok || !a.AcceptsImages() {
			return false
		}
	}
	return len(f.members) > 0
}
