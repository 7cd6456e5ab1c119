package worker

import (
	"bytes"
	"encoding/json"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
)

// decodeTask decodes a step task into task, which must be zero, its
// strings sharing data's bytes (wirejson.UnmarshalShared): data must not
// change while task is kept, as a message the NATS client delivered does
// not. The task's policy is not decoded: it is returned as written, for
// the worker's policies to look up (task.Policy stays nil). A run's tasks
// all carry its policy byte for byte, a few kilobytes of small rules that
// took about half of a short task's decoding (12 of 27 µs).
//
// The decoder gives a slice it grows from nothing room for ten elements,
// so every assistant message of a transcript took room for ten tool calls
// for the one or two it holds: two thirds of the bytes a long
// transcript's decoding allocated. The decoder fills a slice that already
// has room in place, so the transcript is laid beforehand, each message
// with room for one call, from two arrays sized by counting the task's
// messages; what a message did not use is taken back.
func decodeTask(data []byte, task *protocol.StepTask) (policy json.RawMessage, err error) {
	var w taskOnWire
	// Every message has a role, written as this key; a key of the same
	// name in a tool call's arguments only counts one too many.
	if n := min(bytes.Count(data, roleKey), maxLaid); n > 0 {
		msgs := make([]protocol.Message, n)
		calls := make([]protocol.ToolCall, n)
		for i := range msgs {
			msgs[i].ToolCalls = calls[i : i : i+1] // its own room only: growing it writes over no other message's
		}
		w.Request.Messages = msgs[:0]
	}
	err = wirejson.UnmarshalShared(data, &w)
	for i := range w.Request.Messages {
		if m := &w.Request.Messages[i]; len(m.ToolCalls) == 0 {
			m.ToolCalls = nil
		}
	}
	*task = w.StepTask
	return w.Policy, err
}

// taskOnWire is a step task as the worker decodes it: its policy, which
// shadows the task's own field, kept as written.
type taskOnWire struct {
	protocol.StepTask
	Policy json.RawMessage `json:"policy,omitempty"`
}

var roleKey = []byte(`"role":`)

// maxLaid bounds the messages laid beforehand, so that a task whose
// arguments repeat the key many times cannot make the worker allocate
// far beyond its size; a transcript longer grows as the decoder grows it.
const maxLaid = 4096
