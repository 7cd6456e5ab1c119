package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOneFile is harness run on a single-file contract whose file is
// named relative to the contract, with --copy: the run works on a copy of
// that file alone, the agent's write passes file_equals, and the original
// stays as it was.
func TestRunOneFile(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		calls++
		msg := map[string]any{"role": "assistant", "content": "Done."}
		finish := "stop"
		if calls == 1 {
			finish = "tool_calls"
			msg["tool_calls"] = []map[string]any{{"id": "call_1", "type": "function", "function": map[string]any{
				"name": "write_file", "arguments": `{"path":"notes.txt","content":"sorted\n"}`}}}
		}
		usage := map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			send := func(v map[string]any) {
				b, _ := json.Marshal(v)
				_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
			}
			delta := map[string]any{"role": "assistant", "content": msg["content"]}
			if tc, ok := msg["tool_calls"].([]map[string]any); ok {
				tc[0]["index"] = 0
				delta["tool_calls"] = tc
			}
			send(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []map[string]any{{"index": 0, "delta": delta}}})
			send(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
			send(map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []map[string]any{}, "usage": usage})
			_, _ = w.Write([]byte("data: [DONE]\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion",
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
	}))
	defer srv.Close()

	dir := t.TempDir()
	for name, body := range map[string]string{
		"notes.txt":     "b\na\n",
		"contract.json": `{"schema":"harness.contract/v1","task":"Sort the file.","workspace":{"file":"notes.txt"},"verification":{"file_equals":{"content":"sorted\n"}}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_MODEL": "local-model"}
	data := t.TempDir()
	code, out, errOut := cli(t, t.Context(), vars, "run", "--copy", "--data", data, filepath.Join(dir, "contract.json"))
	if code != exitOK || !strings.Contains(out, "outcome success after 1 step(s)") {
		t.Fatalf("run of a single-file contract = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "b\na\n" {
		t.Errorf("the original file changed under --copy: %q", b)
	}
	copies, _ := filepath.Glob(filepath.Join(data, "workspaces", "*", "*"))
	if len(copies) != 1 || filepath.Base(copies[0]) != "notes.txt" {
		t.Fatalf("the copies are %v, want notes.txt alone", copies)
	}
	if b, _ := os.ReadFile(copies[0]); string(b) != "sorted\n" {
		t.Errorf("the copy holds %q, want the agent's write", b)
	}
}
