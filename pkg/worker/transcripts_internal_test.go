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
	kept, _, ok := w.kept.base("r1", &protocol.TaskBase{Transcript: "a.2", Messages: 2})
	if !ok {
		t.Fatal("the request put together was not kept")
	}
	got, _ := json.Marshal(kept.Messages)
	if want := `[{"role":"user","content":"Task."},{"role":"assistant","content":"Reading.","tool_calls":[{"id":"c1","name":"read_file","arguments":{"path":"a.go"}}]}]`; string(got) != want {
		t.Fatalf("the kept request changed with the task's bytes:\n%s\nwant\n%s", got, want)
	}
}

// TestExtensionsOfOneBaseDoNotShare puts three tasks together on one kept
// request: the next step's (kept in turn, as serve keeps it before its
// call), a second attempt of that step, and the step after. A kept request
// has room past its end, which a task extending it may take for its own
// messages; two tasks extending the same request (an attempt given up on
// and the one after it, both in hand) must not both write there, and a
// task extending the request kept after it, or a shorter prefix of it,
// must not write over messages the earlier ones' calls still read.
func TestExtensionsOfOneBaseDoNotShare(t *testing.T) {
	w := &Worker{kept: newTranscripts(1 << 20)}
	msgs := make([]protocol.Message, 1, 16) // room past its end
	msgs[0] = protocol.Message{Role: protocol.RoleUser, Content: "Task."}
	w.kept.keep("r1", "a.1", &protocol.CompletionRequest{Messages: msgs})
	task := func(step, attempt, base int, baseName, name, text string) *protocol.StepTask {
		t.Helper()
		data, err := json.Marshal(&protocol.StepTask{Run: "r1", Step: step, Attempt: attempt, Transcript: name,
			Base:    &protocol.TaskBase{Transcript: baseName, Messages: base},
			Request: protocol.CompletionRequest{Messages: []protocol.Message{{Role: protocol.RoleUser, Content: text}}}})
		if err != nil {
			t.Fatal(err)
		}
		var tk protocol.StepTask
		if _, err := decodeTask(data, &tk); err != nil {
			t.Fatal(err)
		}
		if found, err := w.whole(t.Context(), &tk, nil); err != nil || found != "kept" {
			t.Fatalf("whole = %q, %v; want it put together from the kept base", found, err)
		}
		return &tk
	}
	first := task(2, 1, 1, "a.1", "a.2", "first attempt")
	second := task(2, 2, 1, "a.1", "b.2", "second attempt")
	w.kept.keep("r1", first.Transcript, &first.Request)
	shorter := task(3, 1, 1, "a.2", "c.3", "a shorter prefix")
	next := task(3, 2, 2, "a.2", "a.3", "next step")
	for _, c := range []struct {
		tk   *protocol.StepTask
		want []string
	}{
		{first, []string{"Task.", "first attempt"}},
		{second, []string{"Task.", "second attempt"}},
		{shorter, []string{"Task.", "a shorter prefix"}},
		{next, []string{"Task.", "first attempt", "next step"}},
	} {
		var got []string
		for _, m := range c.tk.Request.Messages {
			got = append(got, m.Content)
		}
		if len(got) != len(c.want) || got[len(got)-1] != c.want[len(c.want)-1] || got[1] != c.want[1] {
			t.Errorf("step %d attempt %d's request = %q, want %q", c.tk.Step, c.tk.Attempt, got, c.want)
		}
	}
}
