package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/ioharness/harness/pkg/protocol"
)

// Provider answers one completion request with one turn. It is the plugin
// boundary between a worker and a model API; OpenAI (also serving
// OpenRouter), Anthropic, Fallback, Scripted, Record and Replay implement
// it.
//
// Complete must be safe for concurrent use. On success the returned turn's
// Served is Name(), except from a Fallback, whose turn names the member
// that answered. Every error Complete returns is a *protocol.Error whose
// code is one of the provider codes (3001 to 3010), so the caller can branch
// with errors.Is and decide a retry with (*protocol.Error).Retryable:
//
//   - CodeProviderTransport: the request or its answer was lost on the way,
//     or ctx was cancelled (retryable).
//   - CodeProviderTimeout: no complete answer before the deadline (retryable).
//   - CodeRateLimited: the provider said to slow down (HTTP 429); RetryAfterMS
//     holds its requested wait when it gave one (retryable).
//   - CodeProviderServer: the provider failed (HTTP 5xx, 529) (retryable).
//   - CodeProviderAuth: the credentials were refused (HTTP 401, 403).
//   - CodeProviderRequest: the provider, or the client before sending,
//     refused the request as written (other 4xx, unexpected 1xx and 3xx).
//   - CodeProviderMalformed: the answer could not be read as a completion,
//     or held nothing (retryable).
//   - CodeContextOverflow: the transcript is longer than the model's
//     context window (an HTTP 400 that says so).
//   - CodeUnrecorded: a replayed provider has no answer for the request.
//   - CodeQuotaExhausted: the account's quota or credit is used up (HTTP
//     402, OpenAI's insufficient_quota, Anthropic's credit balance).
//
// A server's x-should-retry header overrides what the code says
// (protocol.Error.Retry).
//
// Complete does not modify req, and the caller owns the returned turn.
type Provider interface {
	// Name identifies the provider in traces and turns ("openai",
	// "scripted", "replay").
	Name() string
	// Complete sends the whole transcript in req and returns the model's
	// turn, or a *protocol.Error as described on Provider.
	Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error)
}

// Streamer is the optional capability of a Provider that can hand out the
// text of its answer as it arrives. OpenAI, Anthropic, Fallback, Record and
// Replay implement it; find it with a type assertion, or call Stream, which
// does.
//
// CompleteStream returns the same turn Complete would for the same answer,
// and fails the same way (see Provider), with two more failures of its own:
// a stream cut off before its end, even between two events, is
// CodeProviderTransport, and an error event inside a stream that began
// well is classified as the HTTP status of the same error would be (an
// overloaded provider is CodeProviderServer, a rate limit
// CodeRateLimited).
type Streamer interface {
	// CompleteStream sends the whole transcript in req, calls onToken with
	// each piece of the answer's text as it arrives, in order, from the
	// calling goroutine, and returns the whole turn once the answer is
	// complete. onToken may be nil; it should return quickly, since the
	// stream waits for it. The pieces joined are the turn's Text, except
	// when a call fails part way: the caller has then seen text of an
	// answer that never completed.
	CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error)
}

// Stream completes req with p, streaming its text to onToken when p is a
// Streamer. Otherwise it calls Complete and hands the whole text to onToken
// at once, when there is any. It returns what the call returned, and
// fails as it does.
func Stream(ctx context.Context, p Provider, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error) {
	if s, ok := p.(Streamer); ok {
		return s.CompleteStream(ctx, req, onToken)
	}
	turn, err := p.Complete(ctx, req)
	if err == nil && turn != nil && turn.Text != "" && onToken != nil {
		onToken(turn.Text)
	}
	return turn, err
}

// providerError returns err as a *protocol.Error with a provider code: err
// itself when it is (or wraps) one, otherwise err classified as a call that
// got no answer (a timeout, a cancellation, or a transport failure).
func providerError(name string, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return classify(failure{provider: name, err: err})
}

// ctxError returns the error for a call that is not started because ctx is
// already done, or nil when ctx is live.
func ctxError(ctx context.Context, name string) *protocol.Error {
	if err := ctx.Err(); err != nil {
		return classify(failure{provider: name, err: err})
	}
	return nil
}

// cloneRequest returns a deep copy of req, so a recorder keeps what was
// asked even if the caller later changes its transcript.
func cloneRequest(req *protocol.CompletionRequest) *protocol.CompletionRequest {
	if req == nil {
		return nil
	}
	c := *req
	if req.Messages != nil {
		c.Messages = make([]protocol.Message, len(req.Messages))
		for i, m := range req.Messages {
			m.ToolCalls = cloneCalls(m.ToolCalls)
			m.Thinking = slices.Clone(m.Thinking)
			c.Messages[i] = m
		}
	}
	if req.Tools != nil {
		c.Tools = make([]protocol.ToolSpec, len(req.Tools))
		for i, t := range req.Tools {
			t.Parameters = bytes.Clone(t.Parameters)
			c.Tools[i] = t
		}
	}
	return &c
}

// cloneTurn returns a deep copy of t.
func cloneTurn(t *protocol.Turn) *protocol.Turn {
	if t == nil {
		return nil
	}
	c := *t
	c.ToolCalls = cloneCalls(t.ToolCalls)
	c.Thinking = slices.Clone(t.Thinking)
	return &c
}

func cloneCalls(calls []protocol.ToolCall) []protocol.ToolCall {
	if calls == nil {
		return nil
	}
	c := slices.Clone(calls)
	for i := range c {
		c[i].Arguments = bytes.Clone(c[i].Arguments)
	}
	return c
}

// compactJSON returns raw with insignificant whitespace removed. Raw that is
// not valid JSON is returned unchanged; empty raw stays empty.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// uniqueCallIDs gives every call of a turn an id of its own, in place: a
// call with no id, or with the id of an earlier call of the turn (a
// server that numbers every call call_0), gets call_<i>, or the repeated
// id with _<i> added, whichever no other call has. Results are matched to
// calls by id, so two calls with one id could not be told apart.
func uniqueCallIDs(calls []protocol.ToolCall) {
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if c.ID != "" {
			seen[c.ID] = false // taken, not yet claimed by a call
		}
	}
	for i := range calls {
		id := calls[i].ID
		if claimed, ok := seen[id]; ok && !claimed {
			seen[id] = true
			continue
		}
		base := id
		if base == "" {
			base = "call"
		}
		for n := i; ; n++ {
			cand := base + "_" + strconv.Itoa(n)
			if _, taken := seen[cand]; !taken {
				calls[i].ID = cand
				seen[cand] = true
				break
			}
		}
	}
}
