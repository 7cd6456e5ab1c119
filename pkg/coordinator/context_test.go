package coordinator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// wireTokens is a request's size as the scripted provider measures it on
// its side of the wire: its JSON at four bytes a token, and the output it
// reserves.
func wireTokens(req *protocol.CompletionRequest) int {
	data, _ := json.Marshal(req)
	return (len(data)+3)/4 + req.MaxOutputTokens
}

// TestLongRunStaysInItsContext runs 300 steps, each reading a different
// 16 KB file, under a context of 24,000 tokens: the run goes on to its
// last step, and no request the provider is sent is over the budget.
func TestLongRunStaysInItsContext(t *testing.T) {
	const steps, budget = 300, 24_000
	ws := t.TempDir()
	for i := range steps {
		body := strings.Repeat(fmt.Sprintf("line %d of file %d, padding the file out to sixteen kilobytes.\n", i, i), 16<<10/60)
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%03d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	largest, total := 0, 0
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		n := wireTokens(req)
		mu.Lock()
		largest, total = max(largest, n), total+n
		mu.Unlock()
		if call > steps {
			return &protocol.Turn{Text: "done"}, nil
		}
		return &protocol.Turn{Usage: protocol.Usage{InputTokens: int64(n), OutputTokens: 20}, ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("r%d", call),
			Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"f%03d.txt"}`, call-1))}}}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	c := contract(ws)
	c.Budget.MaxSteps = steps + 1
	c.Provider.MaxOutputTokens = 1024
	c.Context = &protocol.ContextSpec{MaxTokens: budget}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("long-run"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != steps+1 {
		t.Fatalf("run = %s after %d steps (%s), want finished after %d", res.Outcome, res.Steps, res.Reason, steps+1)
	}
	mu.Lock()
	defer mu.Unlock()
	if largest > budget {
		t.Errorf("the largest request was %d tokens on the wire, over the budget of %d", largest, budget)
	}
	t.Logf("largest request %d tokens of %d; %d prompt tokens over %d calls", largest, budget, total, steps+1)
}

// TestStaleReadIsReadAgain reads a file, rewrites it, and goes on: the
// requests after the write carry what the file holds now and never what
// it held, the re-read is in the trace, and the request rebuilt from the
// trace for that step is the one the model was sent.
func TestStaleReadIsReadAgain(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("OLD-CONTENT"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent []*protocol.CompletionRequest
	turns := []*protocol.Turn{
		{ToolCalls: []protocol.ToolCall{{ID: "read", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)}}},
		{ToolCalls: []protocol.ToolCall{{ID: "write", Name: "write_file", Arguments: json.RawMessage(`{"path":"notes.txt","content":"NEW-CONTENT"}`)}}},
		{ToolCalls: []protocol.ToolCall{{ID: "look", Name: "find", Arguments: json.RawMessage(`{"name_glob":"*.txt"}`)}}},
		{Text: "done"},
	}
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		mu.Lock()
		sent = append(sent, req)
		mu.Unlock()
		return turns[call-1], nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	h, err := cl.Submit(t.Context(), contract(ws), harness.WithRunID("stale-read"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %+v, %v; want finished", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, req := range sent[2:] {
		data, _ := json.Marshal(req)
		if strings.Contains(string(data), "OLD-CONTENT") {
			t.Errorf("request %d after the write still carries the old content", i+3)
		}
		var read string
		for _, m := range req.Messages {
			if m.Role == protocol.RoleTool && m.ToolCallID == "read" {
				read = m.Content
			}
		}
		if !strings.Contains(read, "NEW-CONTENT") {
			t.Errorf("request %d: the read's result is %q, want what the file holds now", i+3, read)
		}
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var reread *protocol.Record
	for i := range recs {
		if len(recs[i].Rereads) > 0 {
			reread = &recs[i]
			break
		}
	}
	if reread == nil || reread.Step != 3 || reread.Rereads[0].CallID != "read" || reread.Assembled == nil || reread.Assembled.Reread != 1 {
		t.Fatalf("the trace's re-read = %+v, want step 3 reading the call \"read\" again", reread)
	}
	// The request rebuilt from the trace is the one sent.
	got, asm, err := h.Request(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(sent[2].Messages)
	rebuilt, _ := json.Marshal(got.Messages)
	if string(want) != string(rebuilt) || asm.Reread != 1 {
		t.Errorf("request rebuilt for step 3 =\n%s\nwant the one sent\n%s", rebuilt, want)
	}
	if _, _, err := coordinator.Request("stale-read", recs, 9); !strings.Contains(fmt.Sprint(err), "no step 9") {
		t.Errorf("Request(step 9) = %v, want no step 9", err)
	}
}
