package worker

import (
	"encoding/json"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestKeptRequestHoldsNoTaskBytes puts a task together from a kept base
// and then overwrites the bytes the task was decoded from, as a buffer let
// go and used again would be: the request kept for the run's next task
// still holds what the task said, so keeping it does not keep the task's
// bytes (its policy among them) alive.
func TestKeptRequestHoldsNoTaskBytes(t *testing.T) {
	w := &Worker{kept: newTranscripts(1 << 20)}
	base := protocol.CompletionRequest{System: "sys", Messages: []protocol.Message{{Role: protocol.RoleUser, Content: "Task."}}}
	w.kept.keep("r1", "a.1", &base)
	data, err := json.Marshal(&protocol.StepTask{Run: "r1", Step: 2, Attempt: 1, Transcript: "a.2",
		Base: &protocol.TaskBase{Transcript: "a.1", Messages: 1, Frame: true},
		Request: protocol.CompletionRequest{Messages: []protocol.Message{{Role: protocol.RoleAssistant, Content: "Reading.",
			ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var task protocol.StepTask
	if _, err := decodeTask(data, &task); err != nil {
		t.Fatal(err)
	}
	if found, err := w.whole(t.Context(), &task, nil); err != nil || found != "kept" {
		t.Fatalf("whole = %q, %v; want it put together from the kept base", found, err)
	}
	w.kept.keep(task.Run, task.Transcript, &task.Request)
	for i := range data {
		data[i] = 'x'
	}
	kept, ok := w.kept.base("r1", &protocol.TaskBase{Transcript: "a.2", Messages: 2})
	if !ok {
		t.Fatal("the request put together was not kept")
	}
	got, _ := json.Marshal(kept.Messages)
	if want := `[{"role":"user","content":"Task."},{"role":"assistant","content":"Reading.","tool_calls":[{"id":"c1","name":"read_file","arguments":{"path":"a.go"}}]}]`; string(got) != want {
		t.Fatalf("the kept request changed with the task's bytes:\n%s\nwant\n%s", got, want)
	}
}
