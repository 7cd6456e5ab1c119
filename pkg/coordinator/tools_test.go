package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/examples/custom-tool/wordcount"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/tools"
)

// TestContractTools runs contracts on a sandboxer built with an extra
// tool, word_count, which declares that a call reads the file its "path"
// names: a contract that names the tool is offered it, a call counts a
// file's words, and a call on a file the policy denies is refused by the
// rule on that path, as read_file would be; a contract that does not name
// it is not offered it; and a contract naming a tool no sandboxer has is
// refused before its first step, saying which.
func TestContractTools(t *testing.T) {
	ws := t.TempDir()
	for name, body := range map[string]string{"notes.txt": "one two three", "secret.txt": "do not count me"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	offered := map[string][]string{} // task -> the tools its first request offered
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		task := req.Messages[0].Content
		mu.Lock()
		if _, ok := offered[task]; !ok {
			for _, s := range req.Tools {
				offered[task] = append(offered[task], s.Name)
			}
		}
		mu.Unlock()
		steps := 0
		for _, m := range req.Messages {
			if m.Role == protocol.RoleTool {
				steps++
			}
		}
		if !strings.Contains(task, "count") || steps == 2 {
			return &protocol.Turn{Text: "done"}, nil
		}
		path := []string{"notes.txt", "secret.txt"}[steps]
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c", Name: "word_count", Arguments: json.RawMessage(`{"path":"` + path + `"}`)}}}, nil
	})
	set, err := tools.Extend(tools.Builtins(), wordcount.Tool{})
	if err != nil {
		t.Fatal(err)
	}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, Tools: set})
	run := func(id, task string, names []string) (*protocol.Result, []protocol.Record) {
		t.Helper()
		c := contract(ws)
		c.Task, c.Tools = task, names
		c.Policy.Layers = []protocol.Layer{{Name: "secrets", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "secret.txt"}}}}
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(id))
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		recs, err := h.Trace(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return res, recs
	}

	res, recs := run("counts", "count the words", []string{"word_count"})
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run naming word_count = %s (%s), want finished", res.Outcome, res.Reason)
	}
	var obs []protocol.Observation
	for _, r := range recs {
		obs = append(obs, r.Observations...)
	}
	if len(obs) != 2 {
		t.Fatalf("observations = %+v, want the two word_count calls", obs)
	}
	if obs[0].Status != protocol.CallOK || obs[0].Content != "notes.txt: 3 words" {
		t.Errorf("word_count notes.txt = %s %q, want ok and 3 words", obs[0].Status, obs[0].Content)
	}
	if obs[1].Status != protocol.CallRefused || obs[1].Refused == nil || obs[1].Refused.Layer != "secrets" || strings.Contains(obs[1].Content, "4 words") {
		t.Errorf("word_count secret.txt = %s %q (refused by %+v), want refused by the secrets layer's rule on the path", obs[1].Status, obs[1].Content, obs[1].Refused)
	}

	if res, _ := run("plain", "say done", nil); res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run naming no tools = %s (%s)", res.Outcome, res.Reason)
	}
	mu.Lock()
	for task, got := range offered {
		switch {
		case strings.HasPrefix(task, "Task: count the words") && (!slices.Contains(got, "word_count") || !slices.Contains(got, "read_file")):
			t.Errorf("a run naming word_count was offered %v, want it beside the built-ins", got)
		case strings.HasPrefix(task, "Task: say done") && slices.Contains(got, "word_count"):
			t.Errorf("a run naming no tools was offered %v, want no word_count", got)
		}
	}
	if len(offered) != 2 {
		t.Errorf("%d runs asked the model, want 2", len(offered))
	}
	asked := len(offered)
	mu.Unlock()

	res, recs = run("missing", "count with a tool nobody has", []string{"word_count", "page_rank"})
	if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, "page_rank") || !strings.Contains(res.Reason, "unsupported") {
		t.Errorf("run naming a tool no sandboxer has = %s (%s), want refused naming page_rank", res.Outcome, res.Reason)
	}
	for _, r := range recs {
		if r.Kind == protocol.RecordStep {
			t.Errorf("the refused run took step %d", r.Step)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(offered) != asked {
		t.Errorf("the refused run asked the model")
	}
}
