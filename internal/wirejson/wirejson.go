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
// request's bytes once more).
func MarshalStepTask(t *protocol.StepTask) ([]byte, error) {
	req, err := json.Marshal(&t.Request)
	if err != nil {
		return nil, err
	}
	head, err := stdjson.Marshal(envelope{StepTask: t})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+len(req)+len(`,"request":`))
	out = append(out, head[:len(head)-1]...) // without its closing brace
	out = append(out, `,"request":`...)
	out = append(out, req...)
	return append(out, '}'), nil
}

// MarshalReply encodes a sandboxer's reply as encoding/json does, through
// segmentio's encoder: a reply holds no omitzero field (a test holds it
// to that), and it is encoded on every tool call, its observation
// (a file read, a command's output) often the largest part of it.
func MarshalReply(r *protocol.SandboxReply) ([]byte, error) { return json.Marshal(r) }
