package coordinator

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/assemble"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestTaskLaidOutIsItsRequestAndItsSizeWhole lays out the step tasks of
// a run of 40 steps as a driver does, its requests assembled under a
// budget that makes the later ones collapse (their prefix changes), its
// system prompt changing once, the task's images riding on the first
// message: each task put together with the one before is the step's
// request, and the size laid out beside it, which the reservation is
// estimated on, is that of the task published whole, to the byte.
func TestTaskLaidOutIsItsRequestAndItsSizeWhole(t *testing.T) {
	tools := []protocol.ToolSpec{{Name: "read_file", Description: "Read a file <whole> & all.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	d := &driver{c: &Coordinator{cfg: Config{TurnTimeout: time.Minute}}, pol: policy.Default(),
		s: &runState{run: "r1", contract: &protocol.Contract{Budget: protocol.Budget{MaxWall: protocol.Duration(time.Hour)}}, started: time.Now()}}
	d.c.workers.heard("", "w1", time.Now()) // the pool's one worker
	in := assemble.Input{System: "You are an agent.", Tools: tools, Task: "Read every file.", Budget: 1_000_000, Output: 512, Memo: &assemble.Memo{}}
	var prev *protocol.CompletionRequest
	extended, collapsed, framed := 0, 0, 0
	for step := 1; step <= 40; step++ {
		if step == 25 {
			in.System = "You are an agent, and briefer."
		}
		if step >= 30 {
			in.Budget = 6000
		}
		out := assemble.Assemble(in)
		req := &protocol.CompletionRequest{Model: "m", System: in.System, Tools: tools, Messages: out.Messages, MaxOutputTokens: 512}
		sizes := out.Sizes
		if step >= 10 { // the task's images, as request adds them to every request
			req.Messages = append([]protocol.Message(nil), req.Messages...)
			req.Messages[0].Images = []protocol.Image{{MediaType: "image/png", Data: []byte("\x89PNG<&>")}}
			sizes = append([]int(nil), sizes...)
			sizes[0] = assemble.MessageLen(&req.Messages[0])
		}
		d.asm = &assembled{req: req, sizes: sizes}
		data, whole, err := d.layTask(step, 1)
		if err != nil {
			t.Fatal(err)
		}
		var task protocol.StepTask
		if err := json.Unmarshal(data, &task); err != nil {
			t.Fatal(err)
		}
		if b := task.Base; b != nil {
			got := task.Request
			got.Messages = append(append([]protocol.Message(nil), prev.Messages[:b.Messages]...), task.Request.Messages...)
			if b.Frame {
				got.System, got.Tools = prev.System, prev.Tools
				framed++
			}
			gj, _ := json.Marshal(&got)
			wj, _ := json.Marshal(req)
			if string(gj) != string(wj) {
				t.Fatalf("step %d: put together\n%s\nwant\n%s", step, gj, wj)
			}
			if b.Messages > 0 {
				extended++
			}
			if b.Messages < len(prev.Messages)-1 {
				collapsed++
			}
		}
		task.Base, task.Request = nil, *req
		w, err := wirejson.MarshalStepTask(&task)
		if err != nil {
			t.Fatal(err)
		}
		if whole != len(w) {
			t.Fatalf("step %d: laid out as %d bytes whole, but whole it is %d (the task as published is %d)", step, whole, len(w), len(data))
		}
		prev = req
		n := step
		call := protocol.ToolCall{ID: fmt.Sprintf("c%d", n), Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"f%d.go"}`, n))}
		in.Steps = append(in.Steps, assemble.Step{N: n, Turn: protocol.Message{Role: protocol.RoleAssistant, Content: "Reading <" + fmt.Sprint(n) + ">.", ToolCalls: []protocol.ToolCall{call}},
			Results: []assemble.Result{{CallID: call.ID, Content: strings.Repeat(fmt.Sprintf("line %d ü & \"q\"\n", n), 60)}}})
	}
	if extended < 20 || collapsed == 0 || framed < 30 {
		t.Errorf("%d tasks extended the one before, %d after a collapse, %d with its frame: the run did not cover what it is for", extended, collapsed, framed)
	}
}

// TestTaskExtendsOnlyWhileOneWorkerServesThePool lays out a run's tasks
// while its pool has no worker heard yet, one, two, and one again once
// the other has not been heard for a minute: only with one does a task
// extend the one before.
func TestTaskExtendsOnlyWhileOneWorkerServesThePool(t *testing.T) {
	d := &driver{c: &Coordinator{cfg: Config{TurnTimeout: time.Minute}}, pol: policy.Default(),
		s: &runState{run: "r1", contract: &protocol.Contract{Provider: protocol.ProviderSpec{Pool: "gpu"}}}}
	in := assemble.Input{System: "sys", Task: "Go.", Budget: 1_000_000}
	now := time.Now()
	out := assemble.Assemble(in)
	d.asm = &assembled{req: &protocol.CompletionRequest{System: in.System, Messages: out.Messages}, sizes: out.Sizes}
	if _, _, err := d.layTask(1, 1); err != nil { // the first, whole whatever the pool
		t.Fatal(err)
	}
	for i, tt := range []struct {
		heard  map[string]time.Time // workers heard on pool gpu, and when
		extend bool
	}{
		{nil, false},
		{map[string]time.Time{"w1": now}, true},
		{map[string]time.Time{"w2": now}, false},
		{map[string]time.Time{"w1": now.Add(2 * soleMemory)}, true}, // w2 not heard for two minutes
	} {
		for w, at := range tt.heard {
			d.c.workers.heard("gpu", w, at)
		}
		d.c.workers.heard("cpu", "w9", now) // another pool's worker counts not
		in.Steps = append(in.Steps, assemble.Step{N: i + 1, Turn: protocol.Message{Role: protocol.RoleAssistant, Content: fmt.Sprint("step ", i)}})
		out := assemble.Assemble(in)
		d.asm = &assembled{req: &protocol.CompletionRequest{System: in.System, Messages: out.Messages}, sizes: out.Sizes}
		data, _, err := d.layTask(i+2, 1)
		if err != nil {
			t.Fatal(err)
		}
		var task protocol.StepTask
		if err := json.Unmarshal(data, &task); err != nil {
			t.Fatal(err)
		}
		if got := task.Base != nil; got != tt.extend {
			t.Errorf("task %d with %v heard: extends = %v, want %v", i+2, tt.heard, got, tt.extend)
		}
	}
}
