package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/examples/custom-tool/convert"
	"github.com/ioharness/harness/examples/custom-tool/wordcount"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
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

	// No worker holds word_count, and none is asked for its info: only a
	// worker holding a tool hears on its subject, so the coordinator
	// knows at once that none does.
	infos := watchAsOperator(t, cl, "$SRV.INFO.harness-worker")
	res, recs := run("counts", "count the words", []string{"word_count"})
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run naming word_count = %s (%s), want finished", res.Outcome, res.Reason)
	}
	if n, _, _ := infos.Pending(); n != 0 {
		t.Errorf("the workers were asked for their info %d times for a tool none holds, want none", n)
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

// TestWorkerTools runs contracts whose tools are held by a worker built
// with them, beside a sandboxer's: the run is offered both, a call of the
// worker's tool is made on the worker and its answer observed, a deny
// rule on its name refuses it before it runs, a call whose start is
// journalled without its end (a coordinator died under it) is reported as
// indeterminate and not made again, and a worker cannot be built with a
// reserved name or a tool that claims a workspace path.
func TestWorkerTools(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one two three"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	offered := map[string][]string{}
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		task := req.Messages[0].Content
		mu.Lock()
		if _, ok := offered[task]; !ok {
			for _, s := range req.Tools {
				offered[task] = append(offered[task], s.Name)
			}
		}
		mu.Unlock()
		for _, m := range req.Messages {
			if m.Role == protocol.RoleTool {
				return &protocol.Turn{Text: "done"}, nil
			}
		}
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{
			{ID: "c1", Name: "convert_units", Arguments: json.RawMessage(`{"value":3,"from":"km","to":"m"}`)},
			{ID: "c2", Name: "word_count", Arguments: json.RawMessage(`{"path":"notes.txt"}`)},
		}}, nil
	})
	set, err := tools.Extend(tools.Builtins(), wordcount.Tool{})
	if err != nil {
		t.Fatal(err)
	}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, Tools: set, WorkerTools: []tools.Tool{convertCounted{}}})
	run := func(id, task string, rules []protocol.Rule) []protocol.Observation {
		t.Helper()
		c := contract(ws)
		c.Task, c.Tools = task, []string{"convert_units", "word_count"}
		c.Policy.Layers = []protocol.Layer{{Name: "team", Rules: append(rules, protocol.Rule{Act: "exec", Effect: "allow", Pattern: "convert_units"})}}
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(id))
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeFinished {
			t.Fatalf("run %s = %s (%s), want finished", id, res.Outcome, res.Reason)
		}
		obs := observations(t, h)
		if len(obs) != 2 {
			t.Fatalf("run %s observed %+v, want the two calls", id, obs)
		}
		return obs
	}

	converted.Store(0)
	obs := run("both", "convert and count", nil)
	if obs[0].Status != protocol.CallOK || obs[0].Content != "3 km = 3000 m" || converted.Load() != 1 {
		t.Errorf("convert_units on the worker = %s %q (%d calls made), want ok, 3000 m, once", obs[0].Status, obs[0].Content, converted.Load())
	}
	if obs[1].Status != protocol.CallOK || obs[1].Content != "notes.txt: 3 words" {
		t.Errorf("word_count on the sandboxer = %s %q", obs[1].Status, obs[1].Content)
	}
	mu.Lock()
	var got []string
	for task, names := range offered {
		if strings.HasPrefix(task, "Task: convert and count") {
			got = names
		}
	}
	if !slices.Contains(got, "convert_units") || !slices.Contains(got, "word_count") || !slices.Contains(got, "read_file") {
		t.Errorf("offered %v, want the worker's tool beside the sandboxer's and the built-ins", got)
	}
	mu.Unlock()

	converted.Store(0)
	obs = run("denied", "convert, denied", []protocol.Rule{{Act: "exec", Effect: "deny", Pattern: "convert_*"}})
	if obs[0].Status != protocol.CallRefused || obs[0].Refused == nil || obs[0].Refused.Layer != "team" || converted.Load() != 0 {
		t.Errorf("a denied convert_units = %s %q (refused by %+v, %d calls made), want refused by the team's rule, never made", obs[0].Status, obs[0].Content, obs[0].Refused, converted.Load())
	}

	// The start of the call the run "cut" will make is in the journal
	// without its end, as a coordinator that died under it leaves it.
	nc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := js.KeyValue(t.Context(), wire.BucketOps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Create(t.Context(), wire.OpKey("cut.1.0.1"), []byte(`{"done":false}`)); err != nil {
		t.Fatal(err)
	}
	converted.Store(0)
	obs = run("cut", "convert, cut off", nil)
	if obs[0].Status != protocol.CallIndeterminate || converted.Load() != 0 {
		t.Errorf("a call begun before a crash = %s %q (%d calls made), want indeterminate, not made again", obs[0].Status, obs[0].Content, converted.Load())
	}

	for _, bad := range []tools.Tool{named{"read_file"}, named{"mcp__x__y"}, pathTool{}} {
		if _, err := worker.New(nc, agent, worker.Config{Tools: []tools.Tool{bad}}); err == nil {
			t.Errorf("a worker built with %s was made, want refused", bad.Spec().Name)
		}
	}
	if _, err := worker.New(nc, agent, worker.Config{Tools: []tools.Tool{convert.Tool{}, convert.Tool{}}}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("a worker built with one tool twice: %v, want refused as a duplicate", err)
	}
}

// converted counts the calls convertCounted made.
var converted atomic.Int32

// convertCounted is convert_units, counting its calls; it is not
// read-only, so a call cut off is indeterminate.
type convertCounted struct{}

func (convertCounted) Spec() protocol.ToolSpec { return convert.Tool{}.Spec() }
func (convertCounted) Invoke(ctx context.Context, env *tools.Env, args json.RawMessage) (*tools.Output, error) {
	converted.Add(1)
	return convert.Tool{}.Invoke(ctx, env, args)
}

// named is a tool with a given name and nothing else.
type named struct{ name string }

func (n named) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{Name: n.name, Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (named) Invoke(context.Context, *tools.Env, json.RawMessage) (*tools.Output, error) {
	return &tools.Output{}, nil
}

// pathTool declares a read of a path, which no worker has.
type pathTool struct{ named }

func (pathTool) Spec() protocol.ToolSpec { return named{"peek"}.Spec() }
func (pathTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "read", Arg: "path"} }

// TestDocumentsNeedTheirTag: on a cluster built without the document
// tags, a contract naming a document tool, or checking a document's text,
// is refused before its first step with an error naming the tag to build
// with.
func TestDocumentsNeedTheirTag(t *testing.T) {
	if documents.Holds("pdf") {
		t.Skip("this build holds the pdf tools: TestDocumentRun covers it")
	}
	var calls atomic.Int32
	agent := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		calls.Add(1)
		return &protocol.Turn{Text: "done"}, nil
	})
	ws := t.TempDir()
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	for _, tc := range []struct {
		name string
		edit func(*protocol.Contract)
		want string
	}{
		{"tool", func(c *protocol.Contract) { c.Tools = []string{"pdf_fill_form"} }, "-tags pdf"},
		{"check", func(c *protocol.Contract) {
			c.Verification = protocol.Verification{DocumentContains: &protocol.ContainsCheck{Path: "report.docx", Needle: "total"}}
		}, "-tags docx"},
	} {
		c := contract(ws)
		tc.edit(c)
		h, err := cl.Submit(t.Context(), c, harness.WithRunID("doc-"+tc.name))
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, tc.want) || !strings.Contains(res.Reason, "unsupported") || res.Steps != 0 {
			t.Errorf("%s: %s after %d steps (%s), want refused before step 1 naming %s", tc.name, res.Outcome, res.Steps, res.Reason, tc.want)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("the refused runs asked the model %d times", calls.Load())
	}
}

// TestWorkerToolPanics: a worker tool that panics fails its call, saying
// so, and the worker goes on serving the run's turns.
func TestWorkerToolPanics(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, _ int) (*protocol.Turn, error) {
		for _, m := range req.Messages {
			if m.Role == protocol.RoleTool {
				return &protocol.Turn{Text: "done"}, nil
			}
		}
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "b", Name: "boom", Arguments: json.RawMessage(`{}`)}}}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, WorkerTools: []tools.Tool{panicky{named{"boom"}}}})
	c := contract(ws)
	c.Tools = []string{"boom"}
	c.Policy.Layers = []protocol.Layer{{Name: "team", Rules: []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: "boom"}}}}
	h, err := cl.Submit(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	obs := observations(t, h)
	if res.Outcome != protocol.OutcomeFinished || len(obs) != 1 || !obs[0].IsError || !strings.Contains(obs[0].Content, "failed inside") {
		t.Fatalf("a panicking worker tool: run %s (%s), observations %+v; want the call failed and the run finished", res.Outcome, res.Reason, obs)
	}
}

// panicky panics when called.
type panicky struct{ named }

func (panicky) Invoke(context.Context, *tools.Env, json.RawMessage) (*tools.Output, error) {
	panic("the tool's own bug")
}

// TestToolsComingUpAreWaitedFor: a run naming a tool that no process
// answering holds yet waits a moment for one that does (a worker started
// beside the coordinator, a rolling restart) rather than being refused:
// the worker holding convert_units starts only once the run's coordinator
// has looked for it twice and found the sandboxer without it, and the run
// finishes with the call made on that worker.
func TestToolsComingUpAreWaitedFor(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, _ int) (*protocol.Turn, error) {
		for _, m := range req.Messages {
			if m.Role == protocol.RoleTool {
				return &protocol.Turn{Text: "done"}, nil
			}
		}
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "convert_units", Arguments: json.RawMessage(`{"value":2,"from":"km","to":"m"}`)}}}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	nc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	asked := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("$SRV.INFO.harness-sandboxer", asked)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := contract(ws)
	c.Tools = []string{"convert_units"}
	c.Policy.Layers = []protocol.Layer{{Name: "team", Rules: []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: "convert_units"}}}}
	converted.Store(0)
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("late-tool"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the coordinator looked, found the sandboxer without convert_units, and looks again
		select {
		case <-asked:
		case <-t.Context().Done():
			t.Fatal("the coordinator did not look for the run's tools twice")
		}
	}
	w, err := worker.New(testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials())), agent,
		worker.Config{ID: "late", Pools: []string{"late"}, Tools: []tools.Tool{convertCounted{}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	defer func() { cancel(); <-stopped }()

	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("a run whose tool's worker came up after it was submitted = %s (%s), want finished", res.Outcome, res.Reason)
	}
	if obs := observations(t, h); len(obs) != 1 || obs[0].Status != protocol.CallOK || obs[0].Content != "2 km = 2000 m" || converted.Load() != 1 {
		t.Errorf("convert_units = %+v (%d calls made), want made once on the late worker", obs, converted.Load())
	}
}
