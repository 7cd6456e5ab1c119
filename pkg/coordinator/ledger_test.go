package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// readingContract is a run that reads a file at every step and never
// passes verification, so it ends at its step cap (or its budget).
func readingContract(t *testing.T, task string, edit func(c *protocol.Contract)) (*protocol.Contract, []byte) {
	t.Helper()
	c := clustertest.ExampleContract(t)
	c.Task = task
	c.Budget.MaxSteps = 5
	c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "calc.go", Needle: "never there"}}
	if edit != nil {
		edit(c)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, raw
}

func readTurn(call int) *protocol.Turn {
	return &protocol.Turn{Usage: protocol.Usage{InputTokens: 100 + int64(call), OutputTokens: 7},
		ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("c%d", call), Name: "read_file", Arguments: json.RawMessage(`{"path":"calc.go"}`)}}}
}

// gated is a provider that answers every call with a read; the call
// numbered at blocks until release is closed, after reporting on reached.
// It counts its calls, and those begun while down is set.
type gated struct {
	*provider.Scripted
	calls, whileDown atomic.Int32
	down             atomic.Bool
}

func gatedAgent(at int, reached, release chan struct{}) *gated {
	g := &gated{}
	g.Scripted = provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		n := g.calls.Add(1)
		if g.down.Load() {
			g.whileDown.Add(1)
		}
		if int(n) == at {
			close(reached)
			<-release
		}
		return readTurn(int(n)), nil
	})
	return g
}

// askedLedger is a budget ledger that counts the reservations and
// settlements it is asked for, answered or not.
type askedLedger struct {
	ledger.Ledger
	asked atomic.Int32
}

func (l *askedLedger) Reserve(ctx context.Context, r ledger.Reservation) (ledger.Grant, error) {
	l.asked.Add(1)
	return l.Ledger.Reserve(ctx, r)
}

func (l *askedLedger) Settle(ctx context.Context, tree, key string, actual ledger.Usage) (ledger.Settlement, error) {
	l.asked.Add(1)
	return l.Ledger.Settle(ctx, tree, key, actual)
}

func (l *askedLedger) SettleAndReserve(ctx context.Context, key string, actual ledger.Usage, next ledger.Reservation) (ledger.Settlement, ledger.Grant, error) {
	l.asked.Add(1)
	return l.Ledger.SettleAndReserve(ctx, key, actual, next)
}

// watchKinds records a run's events of the given kinds.
func watchKinds(t *testing.T, cl *harness.Cluster, run string, kinds ...string) func() []protocol.Event {
	t.Helper()
	var mu sync.Mutex
	var got []protocol.Event
	stop, err := cl.Run(run).Watch(func(ev *protocol.Event) {
		for _, k := range kinds {
			if ev.Kind == k {
				mu.Lock()
				got = append(got, *ev)
				mu.Unlock()
			}
		}
	})

	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return func() []protocol.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]protocol.Event(nil), got...)
	}
}

// TestLedgerLostMidRun restarts Redis without persistence in the middle of
// a run: the run goes on with its spend intact, rebuilt from the trace, and
// says so.
func TestLedgerLostMidRun(t *testing.T) {
	srv := redistest.Start(t)
	l := clustertest.RedisLedger(t, srv)
	c, raw := readingContract(t, "read and read", nil)
	reached, release := make(chan struct{}), make(chan struct{})
	agent := gatedAgent(3, reached, release)
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{c.Workspace.Root}, Provider: agent, Ledger: l})
	events := watchKinds(t, cl, "lost", protocol.EventLedger, protocol.EventSpendDraw)
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "lost"); err != nil {
		t.Fatal(err)
	}
	<-reached // the third call is reserved and in flight
	srv.Restart()
	close(release)
	res, err := cl.Run("lost").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeStepCapReached || res.Steps != 5 || agent.calls.Load() != 5 {
		t.Fatalf("run = %s after %d steps and %d calls (%s), want step_cap_reached after 5", res.Outcome, res.Steps, agent.calls.Load(), res.Reason)
	}
	recs, err := cl.Run("lost").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckCharged(t, l, "lost", recs)
	testkit.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		var rebuilt, draws int
		for _, ev := range events() {
			if ev.Kind == protocol.EventLedger && strings.Contains(ev.Text, "rebuilt") {
				rebuilt++
			}
			if ev.Kind == protocol.EventSpendDraw {
				draws++
			}
		}
		if rebuilt != 1 || draws != 5 {
			return fmt.Errorf("%d rebuild events and %d spend_draw events, want 1 and 5", rebuilt, draws)
		}
		return nil
	})
	st, err := cl.Run("lost").Status(t.Context())
	if err != nil || st.Budgets == nil || st.Budgets.Run.Steps != 5 || st.Budgets.TreeSpent.Steps != 5 {
		t.Errorf("status budgets = %+v, %v; want 5 steps spent by the run and its tree", st.Budgets, err)
	}
}

// TestLedgerDownWaits stops Redis mid-run: the run makes no provider call
// without a reservation, says in its status that it waits for the ledger,
// and goes on when Redis is back.
func TestLedgerDownWaits(t *testing.T) {
	srv := redistest.Start(t)
	l := &askedLedger{Ledger: clustertest.RedisLedger(t, srv)}
	c, raw := readingContract(t, "read while the ledger is away", nil)
	reached, release := make(chan struct{}), make(chan struct{})
	agent := gatedAgent(2, reached, release)
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{c.Workspace.Root}, Provider: agent, Ledger: l})
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "down"); err != nil {
		t.Fatal(err)
	}
	<-reached
	agent.down.Store(true)
	srv.Stop()
	close(release) // the answer comes back with nowhere to settle it
	testkit.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		st, err := cl.Run("down").Status(t.Context())
		if err != nil {
			return err
		}
		if st.Status != protocol.StatusRunning || !strings.Contains(st.Reason, "waiting for the budget ledger") {
			return fmt.Errorf("status %s (%s), want running and waiting for the ledger", st.Status, st.Reason)
		}
		return nil
	})
	// The coordinator asks the ledger twice more, and is refused each
	// time, after saying it waits: it is still waiting, and had it called
	// the provider without a reservation that call would have begun.
	since := l.asked.Load()
	testkit.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if n := l.asked.Load() - since; n < 2 {
			return fmt.Errorf("the coordinator asked the ledger %d times since it said it waits, want 2", n)
		}
		return nil
	})
	if n, down := agent.calls.Load(), agent.whileDown.Load(); n != 2 || down != 0 {
		t.Fatalf("%d provider calls, %d of them while the ledger was down; want none past the second", n, down)
	}
	agent.down.Store(false)
	srv.Restart() // empty: the tree is rebuilt from the trace
	res, err := cl.Run("down").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeStepCapReached || res.Steps != 5 {
		t.Fatalf("run = %s after %d (%s), want step_cap_reached after 5", res.Outcome, res.Steps, res.Reason)
	}
	recs, err := cl.Run("down").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckCharged(t, l, "down", recs)
	if n := agent.whileDown.Load(); n != 0 {
		t.Errorf("%d provider calls began while the ledger was down, want none", n)
	}
	if st, err := cl.Run("down").Status(t.Context()); err != nil || strings.Contains(st.Reason, "waiting") {
		t.Errorf("finished status = %+v, %v; the wait is over", st, err)
	}
}

// TestTreeCeiling runs a root and a sub-agent on one tree ceiling of four
// provider calls: together they make exactly four, the sub-agent cannot
// raise the ceiling, and both end budget_ceiling_reached.
func TestTreeCeiling(t *testing.T) {
	srv := redistest.Start(t)
	l := clustertest.RedisLedger(t, srv)
	rootC, rootRaw := readingContract(t, "the root", func(c *protocol.Contract) {
		c.Budget.MaxSteps = 10
		c.Budget.Tree = &protocol.TreeBudget{MaxSteps: 4}
	})
	var rootCalls, childCalls atomic.Int32
	rootHeld, releaseRoot := make(chan struct{}), make(chan struct{})
	agent := concurrentAgent(func(req *protocol.CompletionRequest) (*protocol.Turn, error) {
		if strings.Contains(req.Messages[0].Content, "the child") {
			return readTurn(int(childCalls.Add(1))), nil
		}
		if rootCalls.Add(1) == 2 {
			close(rootHeld) // the root's second call is reserved and in flight
			<-releaseRoot
		}
		return readTurn(int(rootCalls.Load())), nil
	})
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{rootC.Workspace.Root}, Provider: agent, Ledger: l})
	if _, err := clustertest.SubmitJSON(t.Context(), cl, rootRaw, "root"); err != nil {
		t.Fatal(err)
	}
	<-rootHeld

	// A sub-agent may not bring a ceiling of its own.
	_, raiser := readingContract(t, "the child", func(c *protocol.Contract) {
		c.Workspace.Root = rootC.Workspace.Root
		c.Parent = "root"
		c.Budget.Tree = &protocol.TreeBudget{MaxSteps: 100}
	})
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raiser, "raiser"); !isCode(err, protocol.CodeInvalidField) {
		t.Errorf("a sub-agent with a tree budget: %v, want invalid_field", err)
	}
	// Nor join a tree that does not exist.
	_, orphan := readingContract(t, "the child", func(c *protocol.Contract) { c.Parent = "nobody" })
	if _, err := clustertest.SubmitJSON(t.Context(), cl, orphan, "orphan"); !isCode(err, protocol.CodeUnknownRun) {
		t.Errorf("a sub-agent of an unknown run: %v, want unknown_run", err)
	}

	// Nor may another tenant's run join it.
	_, foreign := readingContract(t, "the child", func(c *protocol.Contract) {
		c.Workspace.Root = rootC.Workspace.Root
		c.Parent = "root"
	})
	if reply := submitAs(t, cl, "acme", foreign); reply.Error == nil || reply.Error.Code != protocol.CodeUnknownRun {
		t.Errorf("tenant acme's sub-agent of another tenant's run: %+v, want unknown_run", reply)
	}

	_, childRaw := readingContract(t, "the child", func(c *protocol.Contract) {
		c.Workspace.Root = rootC.Workspace.Root
		c.Parent = "root"
		c.Budget.MaxSteps = 10
	})
	if _, err := clustertest.SubmitJSON(t.Context(), cl, childRaw, "child"); err != nil {
		t.Fatal(err)
	}
	child, err := cl.Run("child").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	close(releaseRoot)
	root, err := cl.Run("root").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The root holds two of the four (one spent, one in flight) when the
	// child starts: the child gets the other two.
	if child.Outcome != protocol.OutcomeBudgetCeilingReached || child.Steps != 2 {
		t.Errorf("child = %s after %d (%s), want budget_ceiling_reached after 2", child.Outcome, child.Steps, child.Reason)
	}
	if root.Outcome != protocol.OutcomeBudgetCeilingReached || root.Steps != 2 {
		t.Errorf("root = %s after %d (%s), want budget_ceiling_reached after 2", root.Outcome, root.Steps, root.Reason)
	}
	if n := rootCalls.Load() + childCalls.Load(); n != 4 {
		t.Errorf("%d provider calls in the tree, want the ceiling's 4", n)
	}
	rootRecs, _ := cl.Run("root").Trace(t.Context())
	childRecs, _ := cl.Run("child").Trace(t.Context())
	clustertest.CheckCharged(t, l, "root", rootRecs, childRecs)
	if len(childRecs) == 0 || childRecs[0].Tree != "root" || childRecs[0].Depth != 1 {
		t.Errorf("the child's started record places it in tree %q at depth %d, want root at 1", childRecs[0].Tree, childRecs[0].Depth)
	}
	st, err := cl.Run("child").Status(t.Context())
	if err != nil || st.Tree != "root" || st.Parent != "root" || st.Budgets == nil || st.Budgets.TreeSpent.Steps < 3 {
		t.Errorf("child status = %+v (budgets %+v), %v", st, st.Budgets, err)
	}
}

// concurrentAgent is a provider that answers calls at once, unlike
// provider.Scripted, which answers one at a time: one agent of a tree may
// wait in a call while another's calls go through.
type concurrentAgent func(req *protocol.CompletionRequest) (*protocol.Turn, error)

func (concurrentAgent) Name() string { return "concurrent" }

func (f concurrentAgent) Complete(_ context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	return f(req)
}

// submitAs publishes a contract on a tenant's submit subject and returns
// the coordinator's answer.
func submitAs(t *testing.T, cl *harness.Cluster, tenant string, contract []byte) *protocol.SubmitReply {
	t.Helper()
	nc := cl.Conn()
	inbox := "_INBOX." + tenant + "." + strings.TrimPrefix(nats.NewInbox(), "_INBOX.") // a tenant hears answers in its own inboxes only
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	msg := &nats.Msg{Subject: "harness.submit." + tenant, Data: contract, Header: nats.Header{}}
	msg.Header.Set("Harness-Reply", inbox)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var reply protocol.SubmitReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		t.Fatal(err)
	}
	return &reply
}

func isCode(err error, code protocol.Code) bool {
	return err != nil && protocol.AsError(err).Code == code
}

// TestSpawnAgent has a root agent start sub-agents with spawn_agent: a
// sub-agent works in the same workspace on the same tree ceiling, and its
// outcome is the root's observation; one past the tree's agent cap is
// refused, and a root without a tree budget is not offered the tool.
func TestSpawnAgent(t *testing.T) {
	spawn := func(id, goal string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: "spawn_agent",
			Arguments: json.RawMessage(`{"goal":"` + goal + `","verify_file":"note.go","verify_contains":"hello","max_steps":3}`)}
	}
	for _, tt := range []struct {
		name       string
		tree       *protocol.TreeBudget
		calls      []protocol.ToolCall
		want       protocol.Outcome
		wantObs    []string
		childCalls int32
	}{
		{"a sub-agent does its part, one past the agent cap is refused", &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10},
			[]protocol.ToolCall{spawn("s1", "write the note"), spawn("s2", "write the note again")}, protocol.OutcomeSuccess,
			[]string{`[child "write the note" -> success after 1 steps]`, "[spawn refused] ledger: the tree \"boss\" has all 2 agents"}, 1},
		{"no tree budget, no sub-agents", nil, []protocol.ToolCall{spawn("s1", "write the note")}, protocol.OutcomeStepCapReached,
			[]string{`[unknown tool] "spawn_agent" is not a tool here`}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rootC, raw := readingContract(t, "the root", func(c *protocol.Contract) {
				c.Budget.MaxSteps = 2
				c.Budget.Tree = tt.tree
				c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "note.go", Needle: "hello"}}
			})
			var rootCalls, childCalls atomic.Int32
			var offered atomic.Bool
			agent := concurrentAgent(func(req *protocol.CompletionRequest) (*protocol.Turn, error) {
				if strings.Contains(req.Messages[0].Content, "write the note") {
					childCalls.Add(1)
					return &protocol.Turn{Usage: protocol.Usage{InputTokens: 50, OutputTokens: 5}, ToolCalls: []protocol.ToolCall{{ID: "w1", Name: "write_file",
						Arguments: json.RawMessage(`{"path":"note.go","content":"package calc\n\n// hello\n"}`)}}}, nil
				}
				if rootCalls.Add(1) == 1 {
					for _, tool := range req.Tools {
						if tool.Name == "spawn_agent" {
							offered.Store(true)
						}
					}
					return &protocol.Turn{Usage: protocol.Usage{InputTokens: 80, OutputTokens: 9}, ToolCalls: tt.calls}, nil
				}
				return readTurn(int(rootCalls.Load())), nil
			})
			cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{rootC.Workspace.Root}, Provider: agent})
			res, err := clustertest.RunJSON(t.Context(), cl, raw, "boss")
			if err != nil {
				t.Fatal(err)
			}
			if offered.Load() != (tt.tree != nil) {
				t.Errorf("spawn_agent offered = %v, want %v", offered.Load(), tt.tree != nil)
			}
			if res.Outcome != tt.want {
				t.Fatalf("root = %s after %d (%s), want %s", res.Outcome, res.Steps, res.Reason, tt.want)
			}
			if n := childCalls.Load(); n != tt.childCalls {
				t.Errorf("the sub-agents made %d calls, want %d", n, tt.childCalls)
			}
			recs, err := cl.Run("boss").Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			obs := recs[1].Observations
			if len(obs) != len(tt.wantObs) {
				t.Fatalf("observations = %+v, want %d", obs, len(tt.wantObs))
			}
			for i, want := range tt.wantObs {
				if !strings.HasPrefix(obs[i].Content, want) {
					t.Errorf("observation %d = %q, want it to begin %q", i, obs[i].Content, want)
				}
			}
			if tt.childCalls == 0 {
				return
			}
			child, err := cl.Run("boss-s1c0").Status(t.Context())
			if err != nil || child.Tree != "boss" || child.Parent != "boss" || child.Outcome != protocol.OutcomeSuccess {
				t.Fatalf("sub-agent status = %+v, %v", child, err)
			}
			childRecs, _ := cl.Run("boss-s1c0").Trace(t.Context())
			if childRecs[0].Depth != 1 || childRecs[0].Contract.Policy == nil || childRecs[0].Policy == nil || childRecs[0].ParentPolicy == nil {
				t.Errorf("sub-agent at depth %d with policy %v (effective %v, parent's %v), want depth 1 contained in the root's policy",
					childRecs[0].Depth, childRecs[0].Contract.Policy, childRecs[0].Policy, childRecs[0].ParentPolicy)
			}
		})
	}
}
