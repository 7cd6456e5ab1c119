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

	r := bufio.NewReader(io.LimitReader(resp.Body, maxAnswerBytes))
	var (
		acc     messageTurn
		started bool   // message_start arrived
		event   []byte // the data lines of the event being read
		pending bool   // a field of an event arrived, and its blank line has not
		n       int    // events dispatched
	)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err != io.EOF {
				return lost(err)
			}
			if len(line) > 0 || pending {
				return lost(fmt.Errorf("the stream was cut off in the middle of an event"))
			}
			if !started {
				return bad("the stream held no message_start")
			}
			return lost(errStreamCut)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
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
				acc.blocks = append(acc.blocks, &blockTurn{index: ev.Index, typ: b.Type,
					text: []byte(b.Text), id: b.ID, name: b.Name, input: b.Input})
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
				switch ev.Delta.Type {
				case "text_delta":
					b.text = append(b.text, ev.Delta.Text...)
					if onToken != nil && ev.Delta.Text != "" {
						onToken(ev.Delta.Text)
					}
				case "input_json_delta":
					b.delta = true
					b.json = append(b.json, ev.Delta.PartialJSON...)
				}
				// Other deltas (thinking, signatures, citations) carry
				// nothing a turn holds.
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
			// ping, content_block_stop and events added later carry
			// nothing a turn needs.
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(field) == 0 {
			continue // a comment
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
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
}
