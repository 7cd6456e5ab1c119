package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/ioharness/harness/pkg/protocol"
)

// anthropicEvent is the data of one server-sent event of a streamed
// message. Which fields are set depends on Type.
type anthropicEvent struct {
	Type         string            `json:"type"`
	Message      *anthropicMessage `json:"message"`
	Index        int               `json:"index"`
	ContentBlock *anthropicBlock   `json:"content_block"`
	Delta        *anthropicDelta   `json:"delta"`
	Usage        *anthropicUsage   `json:"usage"`
	Error        *anthropicError   `json:"error"`
}

// anthropicDelta is a content_block_delta's delta, or a message_delta's.
type anthropicDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	StopReason  string `json:"stop_reason"`
}

// readStream reads a streamed message event by event, calling onToken with
// each piece of text, until message_stop.
func (a *Anthropic) readStream(ctx context.Context, resp *http.Response, onToken func(string)) (*protocol.Turn, *failure) {
	status, header := resp.StatusCode, resp.Header
	lost := func(err error) (*protocol.Turn, *failure) {
		return nil, &failure{provider: a.name, status: status, header: header, err: cause(ctx, err)}
	}
	bad := func(format string, args ...any) (*protocol.Turn, *failure) {
		return nil, &failure{provider: a.name, status: status, header: header, bad: true,
			message: fmt.Sprintf(format, args...)}
	}

	var (
		acc     messageTurn
		started bool // message_start arrived
		n       int  // events dispatched
	)
	// dispatch takes one event's data. It returns the turn once
	// message_stop arrives, a failure when the stream cannot go on, and
	// neither while it can.
	dispatch := func(ev *anthropicEvent) (*protocol.Turn, *failure) {
		switch ev.Type {
		case "message_start":
			if ev.Message == nil {
				return bad("message_start holds no message")
			}
			started = true
			acc.start(ev.Message)
		case "content_block_start":
			if ev.ContentBlock == nil {
				return bad("content_block_start %d holds no block", ev.Index)
			}
			if acc.block(ev.Index) != nil {
				return bad("content block %d started twice", ev.Index)
			}
			b := ev.ContentBlock
			acc.blocks = append(acc.blocks, newBlock(ev.Index, b))
			if b.Type == "text" && b.Text != "" && onToken != nil {
				onToken(b.Text)
			}
		case "content_block_delta":
			if ev.Delta == nil {
				return bad("content_block_delta %d holds no delta", ev.Index)
			}
			b := acc.block(ev.Index)
			if b == nil {
				return bad("a delta arrived for content block %d, which never started", ev.Index)
			}
			switch d := ev.Delta; d.Type {
			case "text_delta":
				b.text = append(b.text, d.Text...)
				if onToken != nil && d.Text != "" {
					onToken(d.Text)
				}
			case "thinking_delta":
				b.text = append(b.text, d.Thinking...) // the model's reasoning: not the answer's text
			case "signature_delta":
				b.signature = d.Signature // whole, as the SDKs take it
			case "input_json_delta":
				b.delta = true
				b.json = append(b.json, d.PartialJSON...)
			}
			// Other deltas (citations) carry nothing a turn holds.
		case "message_delta":
			if ev.Delta != nil && ev.Delta.StopReason != "" {
				acc.stop = ev.Delta.StopReason
			}
			if ev.Usage != nil {
				acc.addUsage(ev.Usage)
			}
		case "message_stop":
			if !started {
				return bad("message_stop arrived before message_start")
			}
			return acc.turn(a.name), nil
		case "error":
			e := ev.Error
			if e == nil {
				e = &anthropicError{Type: "api_error", Message: "an error event with no error"}
			}
			return nil, a.eventFailure(header, e)
		}
		// ping, content_block_stop and events added later carry nothing a
		// turn needs.
		return nil, nil
	}

	r := bufio.NewReader(io.LimitReader(resp.Body, maxAnswerBytes))
	var (
		event   []byte // the data lines of the event being read
		pending bool   // a field of an event arrived, and its blank line has not
	)
	// field takes one line of an event that is not blank.
	field := func(line []byte) {
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(name) == 0 {
			return // a comment
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "data":
			if pending && len(event) > 0 {
				event = append(event, '\n')
			}
			event = append(event, value...)
			pending = true
		case "event", "id", "retry":
			// The data's own "type" says what the event is.
			pending = true
		}
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err != io.EOF {
				return lost(err)
			}
			if len(line) > 0 {
				field(bytes.TrimRight(line, "\r")) // the last line, with no line end
			}
			if len(line) > 0 || pending {
				// The stream ends inside an event. A last message_stop
				// or error whose data is whole is taken as the SDKs take
				// it; anything else may have lost what came after.
				var ev anthropicEvent
				if json.Unmarshal(event, &ev) == nil && (ev.Type == "message_stop" || ev.Type == "error") {
					return dispatch(&ev)
				}
				return lost(fmt.Errorf("the stream was cut off in the middle of an event"))
			}
			if !started {
				return bad("the stream held no message_start")
			}
			return lost(errStreamCut)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			field(line)
			continue
		}
		if !pending {
			continue
		}
		pending = false
		data := event
		event = event[:0]
		if len(data) == 0 {
			continue // an event without data is not dispatched
		}
		n++
		var ev anthropicEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return bad("stream event %d is not JSON: %s", n, err.Error())
		}
		if t, f := dispatch(&ev); t != nil || f != nil {
			return t, f
		}
	}
}
