package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The fault suite's agent: an OpenAI-compatible HTTP server whose answer is
// a pure function of the transcript it is sent, so a worker that dies and
// a task that is redelivered get the same turn again. It makes three
// changes, each visible if it ever lands twice, and behaves as a careful
// model should when a call's outcome is unknown: it looks at the file, and
// makes the change again only if it is not there.

// agentEffect is one change the agent makes.
type agentEffect struct {
	tool   string
	args   string
	file   string // the file the change shows in
	marker string // the line it adds
}

// agentEffects are the agent's changes, in order. Each appends a line, so
// a change applied twice shows twice. The third is the one a contract of
// kind ask or deny asks a person about.
var agentEffects = []agentEffect{
	{tool: "edit_file", args: `{"path":"log.txt","search":"END","replace":"line-one\nEND"}`, file: "log.txt", marker: "line-one"},
	{tool: "exec", args: `{"argv":["sh","-c","echo line-two >> exec.log"]}`, file: "exec.log", marker: "line-two"},
	{tool: "edit_file", args: `{"path":"approved.txt","search":"END","replace":"line-three\nEND"}`, file: "approved.txt", marker: "line-three"},
}

// agentWorkspace is the workspace every fault run starts from.
var agentWorkspace = map[string]string{"log.txt": "END\n", "approved.txt": "END\n"}

// agentFinal is the workspace a run of the kind must end with: every change
// once, and for deny the third never.
func agentFinal(kind string) map[string]string {
	third := "line-three\nEND\n"
	if kind == "deny" {
		third = "END\n"
	}
	return map[string]string{"log.txt": "line-one\nEND\n", "exec.log": "line-two\n", "approved.txt": third}
}

// chatMessage is the part of an OpenAI chat message the agent reads.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m *chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	return string(m.Content)
}

// agentCall is one tool call the agent answers with.
type agentCall struct{ id, name, args string }

// nextTurn decides the agent's next turn from the transcript: the text, and
// the call to make (none when every change is in).
func nextTurn(msgs []chatMessage) (string, *agentCall) {
	results := map[string]string{}
	type made struct {
		id      string
		at      int // index of the assistant message
		resultN int // index of the tool result message
	}
	var calls []made
	for i, m := range msgs {
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				calls = append(calls, made{id: c.ID, at: i})
			}
		case "tool":
			results[m.ToolCallID] = m.text()
			for j := range calls {
				if calls[j].id == m.ToolCallID {
					calls[j].resultN = i
				}
			}
		}
	}
	// noteAfter is the first user message after message i that starts
	// with prefix.
	noteAfter := func(i int, prefix string) (string, bool) {
		for _, m := range msgs[i+1:] {
			if m.Role == "user" && strings.HasPrefix(m.text(), prefix) {
				return m.text(), true
			}
		}
		return "", false
	}
	for k, e := range agentEffects {
		attempts, looks := 0, 0
		status := "todo"
		for _, c := range calls {
			switch {
			case strings.HasPrefix(c.id, fmt.Sprintf("e%da", k+1)):
				attempts++
				status = outcomeOf(results[c.id])
				if status == "await" {
					if note, ok := noteAfter(c.resultN, "[approved by a person]"); ok {
						_, after, _ := strings.Cut(note, ":\n")
						status = outcomeOf(after)
					}
				}
			case strings.HasPrefix(c.id, fmt.Sprintf("l%dn", k+1)):
				looks++
				r := results[c.id]
				switch {
				case outcomeOf(r) != "done":
					status = "unknown" // the look itself was cut off: look again
				case strings.Contains(r, e.marker):
					status = "done"
				default:
					status = "todo" // the change is not there: make it again
				}
			}
		}
		switch status {
		case "done":
			continue
		case "todo":
			return fmt.Sprintf("Change %d of 3.", k+1), &agentCall{id: fmt.Sprintf("e%da%d", k+1, attempts+1), name: e.tool, args: e.args}
		default: // unknown, or waiting for a person (the run should not ask then)
			return fmt.Sprintf("Change %d may or may not have happened; looking.", k+1),
				&agentCall{id: fmt.Sprintf("l%dn%d", k+1, looks+1), name: "read_file", args: fmt.Sprintf(`{"path":%q}`, e.file)}
		}
	}
	return "All three changes are in.", nil
}

// outcomeOf classifies what a call's result says about its effect: done,
// unknown (cut off: it may or may not have landed), or await (deferred to
// a person).
func outcomeOf(result string) string {
	switch {
	case strings.HasPrefix(result, "[awaiting approval]"):
		return "await"
	case strings.HasPrefix(result, "[indeterminate]"), strings.HasPrefix(result, "[tool failed]"), strings.HasPrefix(result, "[not run]"):
		return "unknown"
	case strings.HasPrefix(result, "[") && strings.Contains(result[:min(len(result), 40)], "failed]"):
		return "unknown"
	case result == "":
		return "unknown"
	}
	return "done"
}

// startAgent serves the agent on the OpenAI chat completions API, streamed
// or not, with usage that depends on the request only.
func startAgent(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model    string        `json:"model"`
			Stream   bool          `json:"stream"`
			Messages []chatMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		text, call := nextTurn(req.Messages)
		msg := map[string]any{"role": "assistant", "content": text}
		finish := "stop"
		if call != nil {
			finish = "tool_calls"
			msg["tool_calls"] = []map[string]any{{"index": 0, "id": call.id, "type": "function",
				"function": map[string]any{"name": call.name, "arguments": call.args}}}
		}
		in := 200 + 25*len(req.Messages)
		usage := map[string]any{"prompt_tokens": in, "completion_tokens": 30, "total_tokens": in + 30}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-fault", "object": "chat.completion", "model": req.Model,
				"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(choices []map[string]any, usage any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fault", "object": "chat.completion.chunk", "model": req.Model,
				"choices": choices, "usage": usage})
			_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		}
		chunk([]map[string]any{{"index": 0, "delta": map[string]any{"role": "assistant", "content": text}}}, nil)
		if call != nil {
			chunk([]map[string]any{{"index": 0, "delta": map[string]any{"tool_calls": msg["tool_calls"]}}}, nil)
		}
		chunk([]map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
		chunk([]map[string]any{}, usage)
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFaultAgent checks the suite's agent on the transcripts it meets: the
// straight path, a cut-off change it finds in place, one it finds missing,
// and an approval.
func TestFaultAgent(t *testing.T) {
	user := func(s string) chatMessage { b, _ := json.Marshal(s); return chatMessage{Role: "user", Content: b} }
	said := func(id, name string) chatMessage {
		m := chatMessage{Role: "assistant", Content: json.RawMessage(`"..."`)}
		m.ToolCalls = append(m.ToolCalls, struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		}{ID: id})
		m.ToolCalls[0].Function.Name = name
		return m
	}
	result := func(id, s string) chatMessage {
		b, _ := json.Marshal(s)
		return chatMessage{Role: "tool", ToolCallID: id, Content: b}
	}
	task := user("Task: ...")
	tests := []struct {
		name string
		msgs []chatMessage
		want string // the next call's id, "" for the final turn
	}{
		{name: "first", msgs: []chatMessage{task}, want: "e1a1"},
		{name: "after the first", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "edited log.txt")}, want: "e2a1"},
		{name: "a cut-off change is looked at", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "[indeterminate] cut off")}, want: "l1n1"},
		{name: "found in place", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "[indeterminate] cut off"),
			said("l1n1", "read_file"), result("l1n1", "1\tline-one\n2\tEND")}, want: "e2a1"},
		{name: "found missing", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "[tool failed] the sandboxer did not answer"),
			said("l1n1", "read_file"), result("l1n1", "1\tEND")}, want: "e1a2"},
		{name: "a cut-off look is repeated", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "[indeterminate] cut off"),
			said("l1n1", "read_file"), result("l1n1", "[indeterminate] cut off")}, want: "l1n2"},
		{name: "approved", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "ok"), said("e2a1", "exec"), result("e2a1", "ok"),
			said("e3a1", "edit_file"), result("e3a1", "[awaiting approval] write"), user("[approved by a person] write \"approved.txt\":\nedited")}, want: ""},
		{name: "approved but cut off", msgs: []chatMessage{task, said("e1a1", "edit_file"), result("e1a1", "ok"), said("e2a1", "exec"), result("e2a1", "ok"),
			said("e3a1", "edit_file"), result("e3a1", "[awaiting approval] write"), user("[approved by a person] write \"approved.txt\":\n[indeterminate] x")}, want: "l3n1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, call := nextTurn(tt.msgs)
			got := ""
			if call != nil {
				got = call.id
			}
			if got != tt.want {
				t.Errorf("next call = %q, want %q", got, tt.want)
			}
		})
	}
}
