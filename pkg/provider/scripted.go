package provider

import (
	"context"
	"sync"

	"github.com/ioharness/harness/pkg/protocol"
)

// ScriptedName is the Name of a Scripted provider, and the Served of its
// turns.
const ScriptedName = "scripted"

// Scripted is a Provider for tests that steer an agent through exact turns:
// it answers from a fixed list in order, or from a function of the request.
// It is safe for concurrent use; concurrent calls take turns in the order
// they acquire its lock.
type Scripted struct {
	mu    sync.Mutex
	turns []*protocol.Turn
	fn    func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error)
	calls int
}

var _ Provider = (*Scripted)(nil)

// NewScripted returns a provider that answers the n-th call with turns[n-1],
// whatever the request. The turns are copied; the caller may reuse them.
func NewScripted(turns ...*protocol.Turn) *Scripted {
	s := &Scripted{turns: make([]*protocol.Turn, len(turns))}
	for i, t := range turns {
		s.turns[i] = cloneTurn(t)
	}
	return s
}

// NewScriptedFunc returns a provider that answers each call with
// fn(req, call), where call is 1 for the first call, 2 for the second, and
// so on. fn is called with the provider's lock held, so calls are numbered
// and answered one at a time; fn must not call the provider.
func NewScriptedFunc(fn func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error)) *Scripted {
	return &Scripted{fn: fn}
}

// Name returns "scripted".
func (s *Scripted) Name() string { return ScriptedName }

// Complete returns a copy of the next scripted turn with Served set to
// "scripted". A call is counted only when ctx is live: a done ctx returns
// CodeProviderTimeout or CodeProviderTransport and consumes no turn.
//
// For NewScripted, a call after the last turn returns CodeProviderRequest,
// "scripted provider has no turn N", and a nil scripted turn
// CodeProviderMalformed. For NewScriptedFunc, an error fn
// returns is passed on when it is a *protocol.Error and otherwise
// classified as a call that got no answer (a deadline is
// CodeProviderTimeout, anything else CodeProviderTransport); a nil turn
// with a nil error is CodeProviderMalformed.
func (s *Scripted) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	if err := ctxError(ctx, ScriptedName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	n := s.calls
	var t *protocol.Turn
	if s.fn != nil {
		got, err := s.fn(req, n)
		if err != nil {
			return nil, providerError(ScriptedName, err)
		}
		if got == nil {
			return nil, protocol.FieldError(protocol.CodeProviderMalformed, "",
				"make the script function return a turn or an error",
				"scripted provider returned no turn for call %d", n)
		}
		t = got
	} else {
		if n > len(s.turns) {
			return nil, protocol.FieldError(protocol.CodeProviderRequest, "",
				"script one turn for every call the test makes",
				"scripted provider has no turn %d: it was given %d", n, len(s.turns))
		}
		t = s.turns[n-1]
		if t == nil {
			return nil, protocol.FieldError(protocol.CodeProviderMalformed, "",
				"script a turn, not nil",
				"scripted turn %d is nil", n)
		}
	}
	out := cloneTurn(t)
	out.Served = ScriptedName
	return out, nil
}

// Calls returns how many calls Complete has counted so far, including one
// that found the script exhausted.
func (s *Scripted) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// AcceptsImages reports that a script, which answers whatever it is asked,
// takes images.
func (s *Scripted) AcceptsImages() bool { return true }
