package wirejson_test

import (
	stdjson "encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestSameAsEncodingJSON: the hot path's messages decode to the values
// encoding/json decodes, HTML-sensitive text, raw arguments, images,
// times and unknown fields included, and a value of the wrong type is an
// error as it is there.
func TestSameAsEncodingJSON(t *testing.T) {
	task := &protocol.StepTask{Run: "r-1", Step: 7, Attempt: 2, Deadline: time.Date(2026, 12, 3, 10, 0, 0, 5, time.UTC),
		Request: protocol.CompletionRequest{Model: "m", System: "a <b> & \"c\" \u2028 é",
			Messages: []protocol.Message{
				{Role: protocol.RoleUser, Content: "Task: <fix> it & go\n\ttab", Images: []protocol.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 255}}}},
				{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "read_file", Arguments: stdjson.RawMessage(`{"path": "a<b>.go"}`)}}},
				{Role: protocol.RoleTool, ToolCallID: "c1", Content: "line\x00nul and \xff invalid utf-8"},
			}}}
	want, err := stdjson.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want[:len(want)-1], []byte(`,"future_field":{"x":[1,2]}}`)...)
	var a, b protocol.StepTask
	if err := stdjson.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := wirejson.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("decoded differently (-encoding/json +wirejson):\n%s", diff)
	}
	var bad protocol.StepTask
	if err := wirejson.Unmarshal([]byte(`{"run": 5}`), &bad); err == nil {
		t.Error("a number for a string field decoded without an error")
	}
}
