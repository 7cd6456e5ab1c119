package process

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	convertTool "github.com/ioharness/harness/examples/custom-tool/convert"
	"github.com/ioharness/harness/examples/custom-tool/wordcount"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/tools"
)

// TestCustomToolAcrossProcesses runs a contract naming word_count and
// convert_units on a cluster of role processes with two sandboxers serving
// its workspace, the stock one and the example's custom one
// (examples/custom-tool), which alone has word_count, and two workers, the
// stock one and the example's (examples/custom-tool/worker), which alone
// has convert_units. The run goes to the custom sandboxer (the model's
// answers, recorded with the tools offered, are replayed only to a request
// offering them), a call of convert_units is made on the custom worker, a
// call counts a file's words, a call on a file the policy denies is
// refused by the rule on that path, and a contract naming a tool none has
// is refused before its first step.
func TestCustomToolAcrossProcesses(t *testing.T) {
	bin := roleBinaries(t)
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "custom-sandboxer"), "./examples/custom-tool")
	build.Dir = clustertest.Repo(".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example's sandboxer: %v\n%s", err, out)
	}
	build = exec.Command("go", "build", "-o", filepath.Join(bin, "custom-worker"), "./examples/custom-tool/worker")
	build.Dir = clustertest.Repo(".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example's worker: %v\n%s", err, out)
	}
	workspace := func() string {
		ws := t.TempDir()
		for name, body := range map[string]string{"notes.txt": "one two three", "secret.txt": "do not count me"} {
			if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return ws
	}
	contract := func(ws string, names ...string) *protocol.Contract {
		return &protocol.Contract{Task: "count the words", Workspace: protocol.Workspace{Root: ws}, Tools: names,
			Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 4}, Sandbox: protocol.SandboxSpec{Backend: "floor"},
			Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "secrets", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "secret.txt"}}}},
				Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
	}
	both := func(ws string) *protocol.Contract {
		c := contract(ws, "word_count", "convert_units")
		c.Policy.Layers = append(c.Policy.Layers, protocol.Layer{Name: "team", Rules: []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: "convert_units"}}})
		return c
	}
	call := func(path string) *protocol.Turn {
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c-" + path, Name: "word_count", Arguments: json.RawMessage(`{"path":"` + path + `"}`)}}}
	}
	// The model's answers, recorded on a one-process cluster whose
	// sandboxer has the tool.
	convert := &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c-convert", Name: "convert_units", Arguments: json.RawMessage(`{"value":2,"from":"h","to":"min"}`)}}}
	rec := provider.NewRecord(provider.NewScripted(convert, call("notes.txt"), call("secret.txt"), &protocol.Turn{Text: "done"}))
	set, err := tools.Extend(tools.Builtins(), wordcount.Tool{})
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace()
	one := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: rec, NoTakeover: true, Tools: set, WorkerTools: []tools.Tool{convertTool.Tool{}}, AllowFloor: true})
	if res := waitRun(t, one.Client, both(ws), "recorded"); res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("the recorded run = %s (%s)", res.Outcome, res.Reason)
	}
	cassette := saveCassette(t, rec)

	url, c := serverAndClient(t)
	ws = workspace()
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--id", "stock", "--root", ws, "--backends", "floor", "--allow-floor")
	startProcess(t, filepath.Join(bin, "custom-sandboxer"), env, "--id", "custom", "--root", ws, "--backends", "floor", "--allow-floor")
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	startProcess(t, filepath.Join(bin, "custom-worker"), env, "--id", "custom-worker", "--replay", cassette)
	startProcess(t, filepath.Join(bin, "coordinator"), env)

	res := waitRun(t, c, both(ws), "counted")
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("across processes: %s (%s), want finished", res.Outcome, res.Reason)
	}
	recs, err := c.Run("counted").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var obs []protocol.Observation
	for _, r := range recs {
		obs = append(obs, r.Observations...)
	}
	if len(obs) != 3 || obs[0].Content != "2 h = 120 min" || obs[1].Content != "notes.txt: 3 words" || obs[2].Status != protocol.CallRefused || obs[2].Refused == nil || obs[2].Refused.Layer != "secrets" {
		t.Fatalf("observations = %+v, want 2 h converted on the worker, notes.txt counted and secret.txt refused by the secrets layer", obs)
	}
	res = waitRun(t, c, contract(ws, "page_rank"), "missing")
	if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, "page_rank") || res.Steps != 0 {
		t.Errorf("a contract naming a tool no sandboxer has = %s after %d steps (%s), want refused before step 1 naming page_rank", res.Outcome, res.Steps, res.Reason)
	}
}

// waitRun submits c under id and waits for its result.
func waitRun(t *testing.T, cl *harness.Client, c *protocol.Contract, id string) *protocol.Result {
	t.Helper()
	h, err := cl.Submit(t.Context(), c, harness.WithRunID(id))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}
