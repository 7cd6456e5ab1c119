package coordinator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// The boundary against the agent itself, through its own sub-agents, its
// provider's host and its turns (issue 12, items 6 to 8): each test runs
// the real roles of an embedded cluster with a scripted model.

// writeCall is a write_file call of content to path.
func writeCall(id, path, content string) protocol.ToolCall {
	args, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return protocol.ToolCall{ID: id, Name: "write_file", Arguments: args}
}

// firstTurn reports whether req is its run's first provider call.
func firstTurn(req *protocol.CompletionRequest) bool { return len(req.Messages) == 1 }

// refusedBy returns the refusal of the observation of call in a run's
// trace, or nil when the call was not refused.
func refusedBy(recs []protocol.Record, call string) *protocol.Refusal {
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.CallID == call {
				return o.Refused
			}
		}
	}
	return nil
}

// TestSubmittedSubAgentIsContained submits a contract naming a parent with
// a policy wider than the parent's: the sub-agent runs under the parent's
// policy contained with its own, recorded in its started record, so it
// cannot write what the parent may not.
func TestSubmittedSubAgentIsContained(t *testing.T) {
	parent := clustertest.ExampleContract(t)
	parent.Task = "the parent"
	parent.Verification = protocol.Verification{None: &struct{}{}}
	// The parent waits for a person on its first write, so it is there,
	// paused, for the sub-agent to name.
	parent.Policy.Layers = append(parent.Policy.Layers, protocol.Layer{Name: "careful", Rules: []protocol.Rule{{Act: "write", Effect: "ask", Pattern: "notes.md"}}})
	ws := parent.Workspace.Root
	agent := concurrentAgent(func(req *protocol.CompletionRequest) (*protocol.Turn, error) {
		switch {
		case !firstTurn(req):
			return &protocol.Turn{Text: "Done."}, nil
		case strings.Contains(req.Messages[0].Content, "the parent"):
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{writeCall("n", "notes.md", "notes\n")}}, nil
		}
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{
			writeCall("test", "calc_test.go", "package calc\n"), // denied by the parent's rule
			writeCall("other", "other.txt", "x\n"),              // denied by the parent's default
			writeCall("code", "calc.go", "package calc\n\n// rewritten by the sub-agent\n"),
		}}, nil
	})
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: agent})
	raw, _ := json.Marshal(parent)
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "parent"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitPaused(t, cl.Client, "parent")

	child := clustertest.ExampleContract(t)
	child.Task = "the child"
	child.Workspace.Root = ws
	child.Parent = "parent"
	child.Verification = protocol.Verification{None: &struct{}{}}
	child.Policy = &protocol.Policy{Layers: []protocol.Layer{{Name: "wide", Rules: []protocol.Rule{{Act: "write", Effect: "allow", Pattern: "*"}}}},
		Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "ask", Net: "deny"}}
	raw, _ = json.Marshal(child)
	res, err := clustertest.RunJSON(t.Context(), cl, raw, "child")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("child = %s (%s), want finished", res.Outcome, res.Reason)
	}
	recs, err := cl.Run("child").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Policy == nil || recs[0].ParentPolicy == nil {
		t.Fatalf("the child's started record has effective policy %v and parent policy %v, want both", recs[0].Policy, recs[0].ParentPolicy)
	}
	if r := refusedBy(recs, "test"); r == nil || r.Rule != "*_test.go" || r.Layer != "example" {
		t.Errorf("the child's write of calc_test.go was refused by %+v, want the parent's rule *_test.go in layer example", r)
	}
	if r := refusedBy(recs, "other"); r == nil || r.Effect != "deny" || r.Rule != "" {
		t.Errorf("the child's write of other.txt was refused by %+v, want the parent's write default, deny", r)
	}
	if r := refusedBy(recs, "code"); r != nil {
		t.Errorf("the child's write of calc.go, which both allow, was refused: %+v", r)
	}
	if test, _ := os.ReadFile(filepath.Join(ws, "calc_test.go")); string(test) == "package calc\n" {
		t.Errorf("the child overwrote calc_test.go, which its parent may not write")
	}
	if _, err := os.Stat(filepath.Join(ws, "other.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the child wrote other.txt, which its parent may not: %v", err)
	}
	if code, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(code), "rewritten by the sub-agent") {
		t.Errorf("calc.go = %q, want the child's write", code)
	}

	// The parent's own errors stand: an unknown parent is refused.
	child.Parent = "nobody"
	raw, _ = json.Marshal(child)
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "orphan"); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("a contract naming an unknown parent = %v, want unknown_run", err)
	}
	// No contract names the layer of a person's remembered approvals.
	child.Parent = ""
	child.Policy.Layers[0].Name = "remembered"
	raw, _ = json.Marshal(child)
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "forger"); !errors.Is(err, protocol.ErrInvalidField) {
		t.Errorf("a contract with a layer named remembered = %v, want invalid_field", err)
	}
}

// spawnCall is a spawn_agent call with the given arguments.
func spawnCall(id string, args map[string]any) protocol.ToolCall {
	b, _ := json.Marshal(args)
	return protocol.ToolCall{ID: id, Name: "spawn_agent", Arguments: b}
}

// TestSpawnAgentNarrows has the agent spawn sub-agents: deny_write takes a
// path away from one (recorded in its started record as a layer of its
// own, and refused with that rule named), arguments that would widen or
// say nothing are refused before anything starts, and a verify_file the
// parent may not read is no oracle.
func TestSpawnAgentNarrows(t *testing.T) {
	root, _ := readingContract(t, "the root", func(c *protocol.Contract) {
		c.Budget.MaxSteps = 2
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 3, MaxSteps: 20}
		c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "note.go", Needle: "hello"}}
		c.Policy.Layers = append(c.Policy.Layers, protocol.Layer{Name: "private", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "private/*"}}})
	})
	note := map[string]any{"verify_file": "note.go", "verify_contains": "hello", "max_steps": 1}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range note {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	calls := []protocol.ToolCall{
		spawnCall("empty", with(map[string]any{"goal": "  "})),
		spawnCall("no-needle", with(map[string]any{"goal": "write the note", "verify_contains": ""})),
		spawnCall("secret", map[string]any{"goal": "write the note", "verify_file": ".env", "verify_contains": "KEY"}),
		spawnCall("private", map[string]any{"goal": "write the note", "verify_file": "private/key.txt", "verify_contains": "x"}),
		spawnCall("widen", with(map[string]any{"goal": "write the note", "allow_write": []string{"*"}})),
		spawnCall("blank", with(map[string]any{"goal": "write the note", "deny_write": []string{""}})),
		// Its own file: the sub-agents of one turn run side by side, and
		// the free one's note.go must not pass the narrowed one's check.
		spawnCall("narrowed", with(map[string]any{"goal": "write the note", "verify_file": "narrow.go", "deny_write": []string{"narrow.go"}, "deny_net": []string{"*.example.com"}})),
		spawnCall("free", with(map[string]any{"goal": "write the note"})),
	}
	var rootCalls atomic.Int32
	agent := concurrentAgent(func(req *protocol.CompletionRequest) (*protocol.Turn, error) {
		if task := req.Messages[0].Content; strings.Contains(task, "write the note") {
			// Each writes the file its check reads.
			file := strings.Fields(strings.SplitN(task, "the file ", 2)[1])[0]
			return &protocol.Turn{Usage: protocol.Usage{InputTokens: 50, OutputTokens: 5},
				ToolCalls: []protocol.ToolCall{writeCall("w", file, "package calc\n\n// hello\n")}}, nil
		}
		if rootCalls.Add(1) == 1 {
			return &protocol.Turn{Usage: protocol.Usage{InputTokens: 80, OutputTokens: 9}, ToolCalls: calls}, nil
		}
		return readTurn(int(rootCalls.Load())), nil
	})
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{root.Workspace.Root}, Provider: agent})
	raw, _ := json.Marshal(root)
	res, err := clustertest.RunJSON(t.Context(), cl, raw, "boss")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("root = %s after %d (%s), want success", res.Outcome, res.Steps, res.Reason)
	}
	recs, err := cl.Run("boss").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"[spawn refused] give a goal",
		"[spawn refused] give a goal",
		"[spawn refused] the verification reads .env",
		"[spawn refused] the verification reads private/key.txt",
		"[spawn refused] give a goal",
		"[spawn refused] every deny_write pattern is a non-empty glob",
		`[child "write the note" -> step_cap_reached after 1 steps]`,
		`[child "write the note" -> success after 1 steps]`,
	}
	obs := recs[1].Observations
	if len(obs) != len(want) {
		t.Fatalf("observations = %+v, want %d", obs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(obs[i].Content, w) {
			t.Errorf("observation of %s = %q, want it to begin %q", calls[i].ID, obs[i].Content, w)
		}
	}
	// Only the two that started are runs of the tree.
	for i := range 6 {
		if _, err := cl.Run(fmt.Sprintf("boss-s1c%d", i)).Status(t.Context()); !errors.Is(err, protocol.ErrUnknownRun) {
			t.Errorf("refused spawn %s left a run: %v", calls[i].ID, err)
		}
	}
	narrowed, err := cl.Run("boss-s1c6").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	eff := narrowed[0].Policy
	if eff == nil || narrowed[0].ParentPolicy == nil {
		t.Fatalf("the narrowed sub-agent's started record has policy %v, parent policy %v; want both", eff, narrowed[0].ParentPolicy)
	}
	var spawnLayer *protocol.Layer
	for i := range eff.Layers {
		if eff.Layers[i].Name == coordinator.SpawnLayer {
			spawnLayer = &eff.Layers[i]
		}
	}
	wantRules := []protocol.Rule{{Act: "write", Effect: "deny", Pattern: "narrow.go"}, {Act: "net", Effect: "deny", Pattern: "*.example.com"}}
	if spawnLayer == nil || fmt.Sprint(spawnLayer.Rules) != fmt.Sprint(wantRules) {
		t.Errorf("the narrowed sub-agent's spawn layer = %+v, want %v", spawnLayer, wantRules)
	}
	if r := refusedBy(narrowed, "w"); r == nil || r.Rule != "narrow.go" || r.Layer != coordinator.SpawnLayer {
		t.Errorf("the narrowed sub-agent's write of narrow.go was refused by %+v, want rule narrow.go in layer spawn", r)
	}
}

// TestRefusedSpawnTakesNoSlot spawns when the parent's own budget cannot
// pay for the sub-agent's first call: the spawn is refused before the
// sub-agent is submitted, so the tree registers no agent for it.
func TestRefusedSpawnTakesNoSlot(t *testing.T) {
	root, raw := readingContract(t, "the root", func(c *protocol.Contract) {
		c.Budget.MaxSteps = 1
		c.Budget.MaxTokens = 100_000
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2}
		c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "note.go", Needle: "hello"}}
	})
	var childCalls atomic.Int32
	agent := concurrentAgent(func(req *protocol.CompletionRequest) (*protocol.Turn, error) {
		if strings.Contains(req.Messages[0].Content, "write the note") {
			childCalls.Add(1)
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{writeCall("w", "note.go", "package calc\n\n// hello\n")}}, nil
		}
		// The turn that asks for the sub-agent spends nearly all the
		// parent's own budget.
		return &protocol.Turn{Usage: protocol.Usage{InputTokens: 99_990, OutputTokens: 5},
			ToolCalls: []protocol.ToolCall{spawnCall("s", map[string]any{"goal": "write the note", "verify_file": "note.go", "verify_contains": "hello"})}}, nil
	})
	l := ledger.NewMemory()
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{root.Workspace.Root}, Provider: agent, Ledger: l})
	if _, err := clustertest.RunJSON(t.Context(), cl, raw, "boss"); err != nil {
		t.Fatal(err)
	}
	recs, err := cl.Run("boss").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 || len(recs[1].Observations) != 1 || !strings.HasPrefix(recs[1].Observations[0].Content, `[spawn refused] ledger: the run "boss" tokens budget of 5 has 5 left`) {
		t.Fatalf("the spawn's observation = %+v, want a ledger refusal naming the parent's 5 tokens left", recs[1:])
	}
	if n := childCalls.Load(); n != 0 {
		t.Errorf("the refused sub-agent made %d provider calls", n)
	}
	if _, err := cl.Run("boss-s1c0").Status(t.Context()); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("the refused sub-agent is a run: %v", err)
	}
	tot, err := l.Totals(t.Context(), "boss")
	if err != nil {
		t.Fatal(err)
	}
	if len(tot.Agents) != 1 {
		t.Errorf("the tree registered %d agents (%v), want the root alone", len(tot.Agents), tot.Agents)
	}
}

// askingHost is a contract whose policy asks a person before any
// connection to *.example.com, the scripted provider's host.
func askingHost(t *testing.T) *protocol.Contract {
	c := clustertest.ExampleContract(t)
	c.Verification = protocol.Verification{None: &struct{}{}}
	c.Policy.Layers = append(c.Policy.Layers, protocol.Layer{Name: "egress", Rules: []protocol.Rule{{Act: "net", Effect: "ask", Pattern: "*.example.com"}}})
	return c
}

// TestProviderHostAskIsAsked puts an ask rule on the provider's own host:
// no call is made until a person approves (the run pauses durably, and
// carries on once approved, the host remembered), an approver's denial
// ends the run denied, and an approver's approval goes on at once.
func TestProviderHostAskIsAsked(t *testing.T) {
	t.Run("a person decides, durably", func(t *testing.T) {
		p := clustertest.Endpointed{Scripted: provider.NewScripted(&protocol.Turn{Text: "Done."})}
		c := askingHost(t)
		cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{c.Workspace.Root}, Provider: p})
		raw, _ := json.Marshal(c)
		if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "egress"); err != nil {
			t.Fatal(err)
		}
		st := clustertest.WaitPaused(t, cl.Client, "egress")
		id := protocol.ProviderApprovalID("egress", 0)
		if !strings.Contains(st.Reason, id) || !strings.Contains(st.Reason, "api.example.com:443") || p.Calls() != 0 {
			t.Fatalf("paused run = %q after %d provider calls, want it waiting on %s for the provider's host, with no call", st.Reason, p.Calls(), id)
		}
		ap, err := cl.Client.Approvals(t.Context())
		if err != nil || len(ap) != 1 || ap[0].ID != id || ap[0].Pending == nil || ap[0].Pending.Act != "net" || ap[0].Pending.Target != "api.example.com:443" {
			t.Fatalf("approvals = %+v, %v; want the provider's host pending as %s", ap, err, id)
		}
		if _, err := cl.Decide(t.Context(), id, &protocol.Decision{Approve: true, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		if st := clustertest.WaitSettled(t, cl.Client, "egress"); st.Outcome != protocol.OutcomeFinished || p.Calls() != 1 {
			t.Fatalf("approved run = %s (%s) after %d provider calls, want finished after one", st.Outcome, st.Reason, p.Calls())
		}
		recs, err := cl.Run("egress").Trace(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var dec *protocol.Record
		for i := range recs {
			if recs[i].Kind == protocol.RecordDecision {
				dec = &recs[i]
			}
		}
		if dec == nil || dec.Approval != id || dec.Decision.By != "alice" || len(dec.Remember) != 1 || dec.Remember[0].Pattern != "api.example.com:443" {
			t.Errorf("decision record = %+v, want alice's approval of %s remembering the host", dec, id)
		}
	})
	t.Run("the approver denies", func(t *testing.T) {
		p := clustertest.Endpointed{Scripted: provider.NewScripted(&protocol.Turn{Text: "Done."})}
		res, err := harness.Run(t.Context(), askingHost(t), harness.WithProvider(p), harness.WithDataDir(t.TempDir()), harness.WithAllowFloor(),
			harness.WithApprover(coordinator.DenyAll{}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeDenied || !strings.Contains(res.Reason, "api.example.com:443") || !strings.Contains(res.Reason, `"*.example.com"`) || p.Calls() != 0 {
			t.Errorf("run = %s (%s) after %d provider calls, want denied naming the host and the rule, with no call", res.Outcome, res.Reason, p.Calls())
		}
	})
	t.Run("the approver approves", func(t *testing.T) {
		p := clustertest.Endpointed{Scripted: provider.NewScripted(&protocol.Turn{Text: "Done."})}
		data := t.TempDir()
		res, err := harness.Run(t.Context(), askingHost(t), harness.WithProvider(p), harness.WithDataDir(data), harness.WithAllowFloor(),
			harness.WithApprover(coordinator.ApproveAll{}), harness.WithRunID("approved"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeFinished || p.Calls() != 1 {
			t.Fatalf("run = %s (%s) after %d provider calls, want finished after one", res.Outcome, res.Reason, p.Calls())
		}
		recs := clustertest.ReadTrace(t, data, "approved")
		if len(recs) < 2 || len(recs[1].Remember) != 1 || recs[1].Remember[0].Pattern != "api.example.com:443" {
			t.Fatalf("step 1 remembers %+v, want the approved host", recs[1:])
		}
		if d := recs[1].Decided; len(d) != 1 || d[0].Approval != protocol.ProviderApprovalID("approved", 0) || d[0].Decision.By != "approve-all" {
			t.Errorf("step 1 records the decisions %+v, want the approver's, by approve-all", d)
		}
	})
}

// TestOversizeTurnIsChargedOnce has the provider answer with a turn larger
// than the bus carries: the worker settles its usage and reports
// too_large, and the run ends after that one call, charged, instead of
// calling the provider again on every redelivery. A conversation grown too
// large to send as a step task ends the run the same way.
func TestOversizeTurnIsChargedOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		turns []*protocol.Turn
		calls int
		spent int64 // tokens the trace and the ledger hold
		why   string
	}{
		{"a turn over the message limit", []*protocol.Turn{{Text: strings.Repeat("x", 9<<20), Usage: protocol.Usage{InputTokens: 1000, OutputTokens: 2000}}},
			1, 3000, "the provider's answer is"},
		{"a conversation over the message limit", []*protocol.Turn{
			{Text: strings.Repeat("a", 5<<20), Usage: protocol.Usage{InputTokens: 10, OutputTokens: 20}, ToolCalls: []protocol.ToolCall{{ID: "r1", Name: "read_file", Arguments: json.RawMessage(`{"path":"calc.go"}`)}}},
			{Text: strings.Repeat("b", 5<<20), Usage: protocol.Usage{InputTokens: 10, OutputTokens: 20}, ToolCalls: []protocol.ToolCall{{ID: "r2", Name: "read_file", Arguments: json.RawMessage(`{"path":"calc.go"}`)}}},
			{Text: "never asked"},
		}, 2, 60, "the conversation is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := clustertest.ExampleContract(t)
			c.Verification = protocol.Verification{None: &struct{}{}}
			c.Budget.MaxWall = protocol.Duration(2 * time.Minute)
			c.Budget.MaxTokens = 0
			// A context no request reaches: the whole conversation is sent.
			c.Context = &protocol.ContextSpec{MaxTokens: 50_000_000}
			p := provider.NewScripted(tt.turns...)
			l := ledger.NewMemory()
			cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{c.Workspace.Root}, Provider: p, Ledger: l})
			raw, _ := json.Marshal(c)
			res, err := clustertest.RunJSON(t.Context(), cl, raw, "big")
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeEscalatedTerminal || !strings.Contains(res.Reason, "too_large") || !strings.Contains(res.Reason, tt.why) {
				t.Errorf("run = %s (%s), want escalated_terminal for a too_large message: %s", res.Outcome, res.Reason, tt.why)
			}
			if n := p.Calls(); n != tt.calls {
				t.Errorf("the provider was called %d times, want %d", n, tt.calls)
			}
			recs, err := cl.Run("big").Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := clustertest.TraceSpend(t, recs); got.Tokens() != tt.spent {
				t.Errorf("the trace holds %d tokens spent, want %d", got.Tokens(), tt.spent)
			}
			tot, err := l.Totals(t.Context(), "big")
			if err != nil || tot.Spent.Tokens() != tt.spent || tot.Reserved.Tokens() != 0 {
				t.Errorf("the ledger holds %+v spent and %+v reserved (%v), want %d tokens spent and nothing held", tot.Spent, tot.Reserved, err, tt.spent)
			}
		})
	}
}
