package harness_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

var update = flag.Bool("update", false, "rewrite the example's cassette from the scripted agent")

// recorder collects events for assertions.
type recorder struct {
	mu     sync.Mutex
	events []*protocol.Event
}

func (r *recorder) observe(ev *protocol.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("%d:%s", e.Step, e.Kind))
	}
	return out
}

func TestExampleCassette(t *testing.T) {
	c := clustertest.ExampleContract(t)
	rec := provider.NewRecord(provider.NewScripted(clustertest.ExampleTurns()...))
	recData := t.TempDir()
	res, err := harness.Run(t.Context(), c, harness.WithProvider(rec), harness.WithAllowFloor(), harness.WithDataDir(recData), harness.WithRunID("recorded"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("scripted example: outcome %s (%s), want success", res.Outcome, res.Reason)
	}
	path := clustertest.ExampleCassette()
	if *update {
		if err := rec.Save(path); err != nil {
			t.Fatal(err)
		}
		return
	}
	shipped, err := provider.LoadCassette(path)
	if err != nil {
		t.Fatalf("load the shipped cassette: %v (regenerate with go test -run TestExampleCassette -update .)", err)
	}
	// Compare as both look once saved: the file stores JSON indented.
	now := filepath.Join(t.TempDir(), "now.json")
	if err := rec.Save(now); err != nil {
		t.Fatal(err)
	}
	current, err := provider.LoadCassette(now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(shipped.Exchanges, current.Exchanges); diff != "" {
		t.Errorf("the shipped cassette is out of date with the prompt or tools (-shipped +now):\n%s\nregenerate with go test -run TestExampleCassette -update .", diff)
	}
	// The recording replayed gives the same trace as the recorded run.
	replay, err := provider.NewReplay(current)
	if err != nil {
		t.Fatal(err)
	}
	playData := t.TempDir()
	if _, err := harness.Run(t.Context(), clustertest.ExampleContract(t), harness.WithProvider(replay), harness.WithAllowFloor(), harness.WithDataDir(playData), harness.WithRunID("replayed")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(clustertest.Canonical(clustertest.ReadTrace(t, recData, "recorded")), clustertest.Canonical(clustertest.ReadTrace(t, playData, "replayed"))); diff != "" {
		t.Errorf("the replayed run's trace differs from the recorded run's (-recorded +replayed):\n%s", diff)
	}
}

// TestExampleRunsToSuccess is the README's first command, in process: the
// shipped cassette fixes the example and go test verifies it.
func TestExampleRunsToSuccess(t *testing.T) {
	c := clustertest.ExampleContract(t)
	replay := clustertest.ExampleReplay(t)
	var ev recorder
	data := t.TempDir()
	res, err := harness.Run(t.Context(), c, harness.WithProvider(replay), harness.WithAllowFloor(), harness.WithDataDir(data),
		harness.WithObserver(ev.observe), harness.WithRunID("example-1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 || !res.Success {
		t.Fatalf("Run = %s after %d steps (%s), want success after 3", res.Outcome, res.Steps, res.Reason)
	}
	code, err := os.ReadFile(filepath.Join(c.Workspace.Root, "calc.go"))
	if err != nil || !strings.Contains(string(code), "return a + b") {
		t.Fatalf("calc.go after the run = %q, %v; want the fix", code, err)
	}
	recs := clustertest.ReadTrace(t, data, "example-1")
	wantKinds := []string{"started", "step", "step", "step", "finished"}
	if got := clustertest.RecordKinds(recs); !cmp.Equal(got, wantKinds) {
		t.Fatalf("trace kinds = %v, want %v", got, wantKinds)
	}
	// Step by step: what was called, what was seen, what the gate said.
	s1, s2, s3 := recs[1], recs[2], recs[3]
	if s1.Turn.ToolCalls[0].Name != "find" || !strings.Contains(s1.Observations[0].Content, "calc.go") {
		t.Errorf("step 1 = %s → %q, want find listing calc.go", s1.Turn.ToolCalls[0].Name, s1.Observations[0].Content)
	}
	if s1.Check == nil || s1.Check.Passed || !strings.Contains(s1.Check.Detail, "exited 1") {
		t.Errorf("step 1 check = %+v, want a failed go test", s1.Check)
	}
	if len(s2.Observations) != 2 || !strings.Contains(s2.Observations[0].Content, "return a - b") {
		t.Errorf("step 2 observations = %+v, want both files read", s2.Observations)
	}
	if s3.Check == nil || !s3.Check.Passed || s3.Check.Exec == nil || s3.Check.Exec.Backend == "" {
		t.Errorf("step 3 check = %+v, want go test passing with its backend recorded", s3.Check)
	}
	if !s3.Changed || s1.Changed || s2.Changed {
		t.Errorf("changed flags = %v %v %v, want only step 3", s1.Changed, s2.Changed, s3.Changed)
	}
	var tokens int64
	for _, turn := range clustertest.ExampleTurns() {
		tokens += turn.Usage.Total()
	}
	if s3.Tokens != tokens || res.Tokens != tokens {
		t.Errorf("tokens = %d (trace) %d (result), want %d", s3.Tokens, res.Tokens, tokens)
	}
	clustertest.CheckTrace(t, recs, res)
	kinds := ev.kinds()
	for _, want := range []string{"1:token", "1:tool_call", "1:verdict", "1:observation", "1:check", "1:step", "3:verdict", "3:check", "3:step"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("events %v lack %s", kinds, want)
		}
	}

	// Running it again with the same id reports the same run; nothing
	// calls the provider.
	again, err := harness.Run(t.Context(), c, harness.WithProvider(provider.NewScripted()), harness.WithAllowFloor(), harness.WithDataDir(data),
		harness.WithRunID("example-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Outcome != protocol.OutcomeSuccess || again.Steps != 3 {
		t.Errorf("second Run with the same id = %s after %d, want the first run's success after 3", again.Outcome, again.Steps)
	}
}

func TestStopConditions(t *testing.T) {
	readCall := func(step int) *protocol.Turn {
		return &protocol.Turn{Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5},
			ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("c%d", step), Name: "read_file", Arguments: json.RawMessage(`{"path":"calc.go"}`)}}}
	}
	always := func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) { return readCall(call), nil }
	tests := []struct {
		name      string
		edit      func(c *protocol.Contract)
		answer    func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error)
		want      protocol.Outcome
		wantSteps int
		noStep    bool // the run ends before its first step
	}{
		{
			name: "verification that never passes ends at the step cap",
			edit: func(c *protocol.Contract) {
				c.Budget.MaxSteps = 3
				c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "calc.go", Needle: "never there"}}
			},
			answer: always, want: protocol.OutcomeStepCapReached, wantSteps: 3,
		},
		{
			name: "an agent repeating itself is told to re-plan once, then stopped",
			edit: func(c *protocol.Contract) {
				c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "calc.go", Needle: "never there"}}
			},
			answer: func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				last := req.Messages[len(req.Messages)-1].Content
				if call == 4 && !strings.Contains(last, "[re-plan]") {
					return nil, protocol.Errorf(protocol.CodeProviderRequest, "step 4 was not told to re-plan: %q", last)
				}
				return readCall(call), nil
			},
			want: protocol.OutcomeStalled, wantSteps: 6,
		},
		{
			name: "no verification ends on a turn without a tool call",
			edit: func(c *protocol.Contract) { c.Verification = protocol.Verification{None: &struct{}{}} },
			answer: func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				if call < 2 {
					return readCall(call), nil
				}
				return &protocol.Turn{Text: "Done.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
			},
			want: protocol.OutcomeFinished, wantSteps: 2,
		},
		{
			name: "token budget",
			// The first call's reservation (the request's size plus its
			// max output) does not fit 40 tokens, so no call is made.
			edit:   func(c *protocol.Contract) { c.Budget.MaxTokens = 40 },
			answer: always, want: protocol.OutcomeCostBudgetExceeded, noStep: true,
		},
		{
			name: "wall clock",
			edit: func(c *protocol.Contract) { c.Budget.MaxWall = protocol.Duration(300 * time.Millisecond) },
			answer: func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				time.Sleep(120 * time.Millisecond)
				return readCall(call), nil
			},
			want: protocol.OutcomeTimeBudgetExceeded,
		},
		{
			name: "a terminal provider failure escalates",
			answer: func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				return nil, protocol.Errorf(protocol.CodeProviderAuth, "bad key")
			},
			want: protocol.OutcomeEscalatedTerminal,
		},
		{
			name: "a retryable failure is retried, then escalates",
			answer: func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				return nil, protocol.Errorf(protocol.CodeProviderServer, "overloaded")
			},
			want: protocol.OutcomeEscalatedRetryable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clustertest.ExampleContract(t)
			if tt.edit != nil {
				tt.edit(c)
			}
			data := t.TempDir()
			res, err := harness.Run(t.Context(), c, harness.WithProvider(provider.NewScriptedFunc(tt.answer)),
				harness.WithAllowFloor(), harness.WithDataDir(data), harness.WithRunID("stop"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want {
				t.Fatalf("outcome = %s (%s), want %s", res.Outcome, res.Reason, tt.want)
			}
			if tt.noStep && res.Steps != 0 {
				t.Errorf("steps = %d, want none", res.Steps)
			}
			if tt.wantSteps != 0 && res.Steps != tt.wantSteps {
				t.Errorf("steps = %d, want %d", res.Steps, tt.wantSteps)
			}
			clustertest.CheckTrace(t, clustertest.ReadTrace(t, data, "stop"), res)
		})
	}
}

// TestTranscriptIsMultiTurn checks the model sees its own earlier turns and
// the tool results matched to them, not one rebuilt user string.
func TestTranscriptIsMultiTurn(t *testing.T) {
	c := clustertest.ExampleContract(t)
	c.Verification = protocol.Verification{None: &struct{}{}}
	var second *protocol.CompletionRequest
	p := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if call == 1 {
			return &protocol.Turn{Text: "reading", ToolCalls: []protocol.ToolCall{{ID: "abc", Name: "read_file", Arguments: json.RawMessage(`{"path":"calc.go"}`)}}}, nil
		}
		second = req
		return &protocol.Turn{Text: "done"}, nil
	})
	if _, err := harness.Run(t.Context(), c, harness.WithProvider(p), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	if second == nil {
		t.Fatal("the provider was not called twice")
	}
	var roles []string
	for _, m := range second.Messages {
		roles = append(roles, m.Role)
	}
	if want := []string{"user", "assistant", "tool"}; !cmp.Equal(roles, want) {
		t.Fatalf("second request roles = %v, want %v", roles, want)
	}
	if a, tool := second.Messages[1], second.Messages[2]; a.Content != "reading" || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "abc" ||
		tool.ToolCallID != "abc" || !strings.Contains(tool.Content, "func Add") {
		t.Errorf("second request = %+v, want the assistant turn and its matched tool result", second.Messages)
	}
	if !strings.Contains(second.Messages[0].Content, "Task:") || second.System == "" || len(second.Tools) == 0 {
		t.Errorf("request lacks the task, system prompt or tools: %+v", second)
	}
}

// TestProviderEgressIsChecked ends a run refused, before any provider call,
// when its policy denies the provider's host; the host's own allow does
// not outrank the deny.
func TestProviderEgressIsChecked(t *testing.T) {
	c := clustertest.ExampleContract(t)
	c.Policy.Layers = append(c.Policy.Layers, protocol.Layer{Name: "egress", Rules: []protocol.Rule{{Act: "net", Effect: "deny", Pattern: "*.example.com"}}})
	p := clustertest.Endpointed{Scripted: provider.NewScripted(clustertest.ExampleTurns()...)}
	res, err := harness.Run(t.Context(), c, harness.WithProvider(p), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, "api.example.com") || p.Calls() != 0 {
		t.Errorf("run = %s (%s) after %d provider calls, want refused naming the host, with no call", res.Outcome, res.Reason, p.Calls())
	}
	// Without the deny the provider's host is allowed, although net
	// defaults to deny.
	c2 := clustertest.ExampleContract(t)
	p2 := clustertest.Endpointed{Scripted: provider.NewScripted(clustertest.ExampleTurns()...)}
	if res, err := harness.Run(t.Context(), c2, harness.WithProvider(p2), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir())); err != nil || res.Outcome != protocol.OutcomeSuccess {
		t.Errorf("run without the deny = %+v, %v; want success", res, err)
	}
}

// TestCostIsRecordedPerCall prices each provider call from the price table
// and records it in the trace, with the running total in the run index.
func TestCostIsRecordedPerCall(t *testing.T) {
	c := clustertest.ExampleContract(t)
	replay := clustertest.ExampleReplay(t)
	ws := c.Workspace.Root
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	prices := ledger.Prices{"gpt-4.1": {InputPerMillion: 2_000_000, OutputPerMillion: 8_000_000}} // $2 and $8 a million, in micro-dollars
	cl, err := harness.Start(t.Context(), harness.Config{AllowFloor: true, DataDir: t.TempDir(), Roots: []string{ws}, Provider: replay, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := clustertest.RunJSON(t.Context(), cl, raw, "priced")
	if err != nil || res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("run = %+v, %v", res, err)
	}
	recs, err := cl.Run("priced").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, r := range recs {
		if r.Kind != protocol.RecordStep {
			continue
		}
		want, _ := prices.Cost("gpt-4.1", r.Turn.Usage.InputTokens, r.Turn.Usage.OutputTokens)
		total += want
		if r.Cost == nil || !r.Cost.Priced || r.Cost.Micros != want || r.Cost.TotalMicros != total || want == 0 {
			t.Errorf("step %d cost = %+v, want %d priced, %d in all", r.Step, r.Cost, want, total)
		}
	}
	if st, err := cl.Run("priced").Status(t.Context()); err != nil || st.CostMicros != total {
		t.Errorf("index cost = %+v, %v; want %d", st, err, total)
	}
}
