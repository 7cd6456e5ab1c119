package worker

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestDecodeTaskAsThePlainDecoder decodes step tasks of every shape a
// transcript takes with the messages laid beforehand, and plainly, and
// finds them the same: messages with no call, one, several; a key named
// role in a call's arguments (counted one too many); a task written with
// spaces, so that no message is counted and every one is grown; and
// growing one message's calls leaves the next message's alone.
func TestDecodeTaskAsThePlainDecoder(t *testing.T) {
	call := func(id string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go","role":"x","list":[{"role":1},{"role":2}]}`)}
	}
	task := &protocol.StepTask{Run: "r", Step: 4, Attempt: 1, Request: protocol.CompletionRequest{Model: "m", System: "be brief",
		Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "Task: read a.go"},
			{Role: protocol.RoleAssistant, Content: "Reading.", ToolCalls: []protocol.ToolCall{call("c1")}},
			{Role: protocol.RoleTool, ToolCallID: "c1", Content: "package a\n"},
			{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{call("c2"), call("c3"), call("c4")},
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "hm", Signature: "s"}}},
			{Role: protocol.RoleTool, ToolCallID: "c2", Content: `a "role": inside content`},
			{Role: protocol.RoleTool, ToolCallID: "c3", Content: "ok"},
			{Role: protocol.RoleTool, ToolCallID: "c4", Content: "ok"},
			{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{call("c5")}},
			{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{call("c6")}},
		},
		Tools: []protocol.ToolSpec{{Name: "read_file", Description: "reads", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		Policy: policy.Default().Protocol()}
	data, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	spaced := []byte(strings.ReplaceAll(string(data), `"role":`, `"role" :`))
	for name, data := range map[string][]byte{"as written": data, "spaced": spaced} {
		var plain, laid protocol.StepTask
		if err := wirejson.Unmarshal(data, &plain); err != nil {
			t.Fatal(err)
		}
		raw, err := decodeTask(data, &laid)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The policy comes back as written, for the worker's policies.
		if laid.Policy != nil {
			t.Errorf("%s: the laid task's policy was decoded: %+v", name, laid.Policy)
		}
		if err := wirejson.Unmarshal(raw, &laid.Policy); err != nil || laid.Policy == nil {
			t.Fatalf("%s: the policy came back as %q: %v", name, raw, err)
		}
		if !reflect.DeepEqual(&laid, &plain) {
			t.Errorf("%s: laid:\n%+v\nplain:\n%+v", name, laid.Request.Messages, plain.Request.Messages)
		}
		msgs := laid.Request.Messages
		next := msgs[8].ToolCalls[0]
		msgs[7].ToolCalls = append(msgs[7].ToolCalls, call("extra"))
		if !reflect.DeepEqual(msgs[8].ToolCalls[0], next) {
			t.Errorf("%s: growing one message's calls wrote over the next message", name)
		}
	}
	var bad protocol.StepTask
	if _, err := decodeTask([]byte(`{"run":"r","request":{"messages":[{"role":"user"},`), &bad); err == nil {
		t.Error("a task cut short decoded")
	}
}

// BenchmarkDecodeTask decodes the step task of a run 100 reads in (201
// messages), laid as the worker decodes it and plainly, beside each other:
//
//	go test -run '^$' -bench DecodeTask -benchmem ./pkg/worker
func BenchmarkDecodeTask(b *testing.B) {
	msgs := []protocol.Message{{Role: protocol.RoleUser, Content: "Task: read the notes until told to stop"}}
	for i := range 100 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			protocol.Message{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: id, Name: "read_file",
				Arguments: json.RawMessage(fmt.Sprintf(`{"path":"notes/%d.txt"}`, i))}}},
			protocol.Message{Role: protocol.RoleTool, ToolCallID: id, Content: "a small file to read\n"})
	}
	data, err := json.Marshal(&protocol.StepTask{Run: "r", Step: 101, Attempt: 1, Request: protocol.CompletionRequest{Model: "m", System: "be brief", Messages: msgs}})
	if err != nil {
		b.Fatal(err)
	}
	for name, decode := range map[string]func([]byte, *protocol.StepTask) error{
		"laid": func(d []byte, t *protocol.StepTask) error {
			_, err := decodeTask(d, t)
			return err
		},
		"plain": func(d []byte, t *protocol.StepTask) error { return wirejson.UnmarshalShared(d, t) },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var task protocol.StepTask
				if err := decode(data, &task); err != nil || len(task.Request.Messages) != len(msgs) {
					b.Fatalf("decoded %d messages, %v", len(task.Request.Messages), err)
				}
			}
		})
	}
}
