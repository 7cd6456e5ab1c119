package provider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ioharness/harness/pkg/protocol"
)

// CompleteStream sends req as a streamed chat completion (stream with
// stream_options.include_usage, so the last chunk carries the usage), calls
// onToken with each piece of text (or of a refusal) as it arrives, and
// returns the same turn Complete returns for the same answer. It sends
// what Complete sends. The turn is made of the first choice index that
// appears in the stream, whatever it is (OpenRouter numbers the one
// choice 1 with some upstreams); chunks of other choices are skipped. Tool
// call arguments arrive in fragments and are joined by the call's index.
// Reasoning text (OpenRouter's delta.reasoning) is joined into the turn's
// one Thinking block and never given to onToken. The usage is the sum of
// every chunk's, as a server may split it over several.
//
// It fails as Complete does, and also: a stream that ends without
// "data: [DONE]", cut off in the middle of an event or between two, is
// CodeProviderTransport, even after the finish reason, since the usage
// comes after it; an error inside the stream (a data line holding an
// "error" object, on the chunk or on the choice, or OpenRouter's finish
// reason "error") is classified by its type or code as the same error
// sent as an HTTP status would be, CodeProviderServer when it names
// neither; a chunk that is not JSON, or a stream with no chunk for the
// answer, is CodeProviderMalformed.
func (o *OpenAI) CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error) {
	if err := ctxError(ctx, o.name); err != nil {
		return nil, err
	}
	wire, f := o.chatRequest(req)
	if f != nil {
		return nil, classify(*f)
	}
	wire.Stream = true
	wire.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	call := &wireCall{keepTail: true, fields: o.bodyFields(req)}
	ctx = context.WithValue(ctx, wireCallKey{}, call)

	stream, err := o.client.CreateChatCompletionStream(ctx, wire)
	if err != nil {
		return nil, classify(o.failed(ctx, call, err))
	}
	defer stream.Close()
	status, header, _ := call.result()
	if status >= 300 && status < 400 {
		return nil, classify(failure{provider: o.name, status: status, header: header,
			message: redirectMessage(status, header)})
	}
	bad := func(format string, args ...any) (*protocol.Turn, error) {
		return nil, classify(failure{provider: o.name, status: status, header: header, bad: true,
			message: fmt.Sprintf(format, args...)})
	}

	var acc chunkTurn
	for n := 1; ; n++ {
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, openai.ErrTooManyEmptyStreamMessages) {
				return bad("the stream sent too many lines that are not data")
			}
			return nil, classify(o.failed(ctx, call, err))
		}
		var chunk openai.ChatCompletionStreamResponse
		if err := json.Unmarshal(raw, &chunk); err != nil {
			return bad("stream chunk %d is not JSON: %s", n, err.Error())
		}
		// What go-openai cannot carry, from the same bytes; as in
		// Complete, a field of an unexpected type is left out.
		var x chatExtras
		_ = json.Unmarshal(raw, &x)
		if x.Error != nil {
			return nil, classify(o.reportedError(header, x.Error))
		}
		if failed, e := acc.add(&chunk, &x, onToken); failed {
			return nil, classify(o.reportedError(header, e))
		}
	}
	// go-openai reports a stream that merely stopped as one that ended
	// well; the body's last bytes tell them apart. Without [DONE] the
	// usage chunk, which comes after the finish reason, may be lost, so
	// the stream counts as cut even when the answer had finished.
	if last := call.lastBytes(); !bytes.HasSuffix(bytes.TrimRight(last, "\r\n "), []byte("[DONE]")) {
		msg := "the stream ended without data: [DONE]"
		if len(last) > 0 && last[len(last)-1] != '\n' {
			msg = "the stream was cut off in the middle of an event"
		}
		return nil, classify(failure{provider: o.name, status: status, header: header, message: msg})
	}
	if !acc.started {
		return bad("the stream held no chunk with a choice")
	}
	return o.streamTurn(&acc, wire.Model), nil
}

// chunkTurn gathers the chunks of a streamed answer's first choice.
type chunkTurn struct {
	started   bool // a chunk with a choice arrived
	index     int  // the choice gathered: the first that arrived
	model     string
	text      []byte
	refusal   []byte
	reasoning []byte
	gathered  bool         // the followed choice brought some of the answer
	rivals    map[int]bool // other choices that brought some of theirs
	finish    string
	usage     protocol.Usage // the sum of every chunk's
	calls     []*chunkCall   // in order of first appearance
	fn        *chunkCall     // a legacy function_call
}

// chunkCall is one tool call being put together from its fragments.
type chunkCall struct {
	index int
	id    string
	name  string
	args  []byte
}

// add takes in one chunk, c as go-openai read it and x what it could not,
// calling onToken with its text. It reports whether the chunk says the
// answer failed: the gathered choice's error object, which it returns,
// or its finish reason "error".
func (a *chunkTurn) add(c *openai.ChatCompletionStreamResponse, x *chatExtras, onToken func(string)) (failed bool, e *chatError) {
	if a.model == "" {
		a.model = c.Model
	}
	a.usage = a.usage.Add(usageOf(c.Usage, x.Usage))
	for i := range c.Choices {
		ch := &c.Choices[i]
		var xc chatExtraChoice
		if i < len(x.Choices) {
			xc = x.Choices[i]
		}
		if !a.started {
			a.started, a.index = true, ch.Index
		}
		if ch.Index != a.index {
			// The choice followed is the first to bring anything: OpenRouter
			// may open index 0 with the role alone and send the answer at
			// index 1, while a stream of n choices fills index 0 first.
			switch {
			case !a.gathered && brings(ch, &xc):
				a.index = ch.Index
			case brings(ch, &xc):
				if a.rivals == nil {
					a.rivals = map[int]bool{}
				}
				a.rivals[ch.Index] = true // another of n choices
				continue
			default:
				// The finish of the index that opened with the role alone
				// is the followed choice's (OpenRouter), never a rival's.
				if ch.FinishReason != "" && !a.rivals[ch.Index] && a.finish == "" {
					a.finish = string(ch.FinishReason)
				}
				continue
			}
		}
		if brings(ch, &xc) {
			a.gathered = true
		}
		a.reasoning = append(a.reasoning, xc.Delta.Reasoning...)
		d := &ch.Delta
		if d.Content != "" {
			a.text = append(a.text, d.Content...)
			if onToken != nil {
				onToken(d.Content)
			}
		}
		if d.Refusal != "" {
			a.refusal = append(a.refusal, d.Refusal...)
			if onToken != nil {
				onToken(d.Refusal)
			}
		}
		for j, tc := range d.ToolCalls {
			a.call(tc, j).add(tc.ID, tc.Function)
		}
		if d.FunctionCall != nil {
			if a.fn == nil {
				a.fn = &chunkCall{}
			}
			a.fn.add("", *d.FunctionCall)
		}
		if xc.Error != nil {
			return true, xc.Error
		}
		if ch.FinishReason != "" {
			a.finish = string(ch.FinishReason)
			if ch.FinishReason == "error" {
				return true, nil
			}
		}
	}
	return false, nil
}

// brings reports whether a chunk's choice carries any of the answer, not
// the role alone.
func brings(ch *openai.ChatCompletionStreamChoice, xc *chatExtraChoice) bool {
	d := &ch.Delta
	return d.Content != "" || d.Refusal != "" || len(d.ToolCalls) > 0 || d.FunctionCall != nil || xc.Delta.Reasoning != ""
}

// call returns the call a fragment belongs to: the one with its index, or,
// from a server that sends no index, a new call when the fragment names an
// id the last call does not have, and the last call otherwise. pos is the
// fragment's place in its chunk.
func (a *chunkTurn) call(tc openai.ToolCall, pos int) *chunkCall {
	if tc.Index != nil {
		for _, c := range a.calls {
			if c.index == *tc.Index {
				return c
			}
		}
		c := &chunkCall{index: *tc.Index}
		a.calls = append(a.calls, c)
		return c
	}
	if n := len(a.calls); n > 0 && (tc.ID == "" || tc.ID == a.calls[n-1].id) {
		return a.calls[n-1]
	}
	next := pos
	if n := len(a.calls); n > 0 {
		next = max(next, a.calls[n-1].index+1)
	}
	c := &chunkCall{index: next}
	a.calls = append(a.calls, c)
	return c
}

func (c *chunkCall) add(id string, fn openai.FunctionCall) {
	if c.id == "" {
		c.id = id
	}
	if c.name == "" {
		c.name = fn.Name
	}
	c.args = append(c.args, fn.Arguments...)
}

// streamTurn maps the gathered answer onto a turn, as turn does for a
// whole completion, so both give the same turn for the same answer.
func (o *OpenAI) streamTurn(a *chunkTurn, model string) *protocol.Turn {
	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant,
		Content: string(a.text), Refusal: string(a.refusal)}
	calls := slices.Clone(a.calls)
	slices.SortStableFunc(calls, func(x, y *chunkCall) int { return cmp.Compare(x.index, y.index) })
	for _, c := range calls {
		msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: c.id, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.name, Arguments: string(c.args)}})
	}
	if a.fn != nil {
		msg.FunctionCall = &openai.FunctionCall{Name: a.fn.name, Arguments: string(a.fn.args)}
	}
	return o.turn(&chatAnswer{
		model:     a.model,
		message:   msg,
		finish:    openai.FinishReason(a.finish),
		usage:     a.usage,
		reasoning: string(a.reasoning),
	}, model)
}
