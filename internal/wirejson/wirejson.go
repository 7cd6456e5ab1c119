// Package wirejson decodes the messages on a step's critical path: the
// step task, which carries the whole transcript, the turn that answers
// it, and the trace's records. It is encoding/json's decoding (the same
// struct tags, Unmarshaler honoured, unknown fields ignored) through
// github.com/segmentio/encoding/json, which the module graph already
// holds for the MCP SDK and which decodes such messages more than twice
// as fast: a step task of 200 messages in 231 µs instead of 509 µs on the
// development machine. Encoding stays with encoding/json, whose output
// (omitzero above all, which segmentio's encoder does not know) the
// trace's bytes are made of, but for a completion request, which uses no
// omitzero (a test holds it to that) and which segmentio encodes byte for
// byte as encoding/json does, twice as fast (MarshalRequest). Every
// contract stays with encoding/json, decoded strictly with duplicate keys
// refused.
package wirejson

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"sync"

	"github.com/segmentio/encoding/json"

	"github.com/ioharness/harness/pkg/protocol"
)

// Unmarshal is json.Unmarshal.
func Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// UnmarshalShared is Unmarshal whose strings share data's bytes where
// they can rather than copy them: data must not change for as long as v
// is kept. Raw messages and byte slices are still copies, so that an
// append to one cannot write over the bytes a string shares. A trace read
// decodes every record of a run this way, and a worker its step task, each
// from a message the NATS client allocated for it alone.
func UnmarshalShared(data []byte, v any) error {
	rest, err := json.Parse(data, v, json.DontCopyString|json.DontCopyNumber)
	if rest = bytes.TrimSpace(rest); len(rest) != 0 && err == nil {
		err = fmt.Errorf("invalid character %q after top-level value", rest[0])
	}
	return err
}

// envelope is a step task without its request: its own Request field,
// nil and left out, hides the embedded one.
type envelope struct {
	*protocol.StepTask
	Request *struct{} `json:"request,omitempty"`
}

// MarshalStepTask encodes t as encoding/json does, up to the order of its
// fields (the request comes last): its request, the whole transcript,
// through segmentio's encoder, and the rest through encoding/json, the
// two joined as they are (encoding/json would scan and compact the
// request's bytes once more). The task is laid out in a buffer kept for
// the next task and copied out once, at its size: encoding the request
// apart and then joining it to the rest made two copies of the
// transcript, the largest allocation of a step.
func MarshalStepTask(t *protocol.StepTask) ([]byte, error) {
	head, err := stdjson.Marshal(envelope{StepTask: t})
	if err != nil {
		return nil, err
	}
	buf := stepTaskBufs.Get().(*[]byte)
	b := append((*buf)[:0], head[:len(head)-1]...) // without its closing brace
	b = append(b, `,"request":`...)
	if b, err = json.Append(b, &t.Request, json.EscapeHTML|json.SortMapKeys); err != nil {
		return nil, err // as json.Marshal would, with these flags
	}
	b = append(b, '}')
	out := make([]byte, len(b))
	copy(out, b)
	if cap(b) <= stepTaskBufMax {
		*buf = b
		stepTaskBufs.Put(buf)
	}
	return out, nil
}

// stepTaskBufs keeps the buffers step tasks are laid out in; one grown
// past stepTaskBufMax, by a task as large as the bus allows, is let go.
var stepTaskBufs = sync.Pool{New: func() any { return new([]byte) }}

const stepTaskBufMax = 4 << 20

// MarshalWholeRequest encodes a step's request whole, for a worker that
// asked for it, as encoding/json does.
func MarshalWholeRequest(r *protocol.WholeRequest) ([]byte, error) {
	return json.Append(nil, r, json.EscapeHTML|json.SortMapKeys)
}

// MarshalReply encodes a sandboxer's reply as encoding/json does, through
// segmentio's encoder: a reply holds no omitzero field (a test holds it
// to that), and it is encoded on every tool call, its observation
// (a file read, a command's output) often the largest part of it.
func MarshalReply(r *protocol.SandboxReply) ([]byte, error) { return json.Marshal(r) }
