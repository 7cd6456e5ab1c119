package process

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// fanHold holds the root's first call, until the test lets it through,
// and the second call of every odd sub-agent: those sub-agents have
// committed their first step and are still running when the even ones
// are done.
func fanHold(c fanCall) bool {
	if c.agent == fanRoot {
		return c.turn == 0
	}
	k, err := strconv.Atoi(c.agent[1:])
	return err == nil && c.turn == 1 && k%2 == 1
}

// leaseOrders name the rows of each crash test. A coordinator's leases
// all live with its one heartbeat, so they all die together after a
// kill: one row, the kill made in the middle of the fan-out whatever the
// timing of the leases.
var leaseOrders = []struct{ name string }{
	{name: "every lease of the killed coordinator dies with its heartbeat"},
}

// via runs f on a client of the cluster the test drives.
type via func(f func(*harness.Client) error) error

// startFanOut lets the root's first call through, then waits for the
// middle of the fan-out, every run of the tree still unfinished holding
// its lease. It returns the tree then.
func startFanOut(t *testing.T, root string, n int, m *fanModel, on via) []protocol.RunState {
	t.Helper()
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if held := m.heldNow(); fmt.Sprint(held) != fmt.Sprint([]fanCall{{fanRoot, 0}}) {
			return fmt.Errorf("the model holds %v, want the root's first call", held)
		}
		return nil
	})
	m.letThrough(fanCall{fanRoot, 0})
	running := []string{root}
	for k := 1; k < n; k += 2 {
		running = append(running, childRun(root, k))
	}
	return waitMidFanOut(t, root, n, m, on, func(c *harness.Client) error {
		ls, err := leaseHolders(t.Context(), c.Conn(), running...)
		if err != nil {
			return err
		}
		for _, run := range running {
			if _, ok := ls[run]; !ok {
				return fmt.Errorf("%s holds no lease", run)
			}
		}
		return nil
	})
}

// waitMidFanOut waits, reading the run index, for the middle of root's
// fan-out of n sub-agents: the root's spawning step not committed, every
// even sub-agent done, every odd one past its first step with its second
// call held by the model, and also holding. It returns the tree then.
func waitMidFanOut(t *testing.T, root string, n int, m *fanModel, on via, also func(*harness.Client) error) []protocol.RunState {
	t.Helper()
	var want []fanCall
	for k := 1; k < n; k += 2 {
		want = append(want, fanCall{childName(k), 1})
	}
	var tree []protocol.RunState
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if held := m.heldNow(); fmt.Sprint(held) != fmt.Sprint(want) {
			return fmt.Errorf("the model holds %v, want %v", held, want)
		}
		return on(func(c *harness.Client) error {
			runs, err := c.Runs(t.Context())
			if err != nil {
				return err
			}
			tree = treeOf(runs, root)
			at := byRun(tree)
			if st := at[root]; st.Status != protocol.StatusRunning || st.Step != 0 {
				return fmt.Errorf("the root is not in its spawning step: %s", describeTree(tree))
			}
			for k := range n {
				st, ok := at[childRun(root, k)]
				switch {
				case !ok:
					return fmt.Errorf("sub-agent %d has not started: %s", k, describeTree(tree))
				case k%2 == 0 && (st.Status != protocol.StatusCompleted || st.Outcome != protocol.OutcomeSuccess):
					return fmt.Errorf("sub-agent %d is not done yet: %s", k, describeTree(tree))
				case k%2 == 1 && (st.Status != protocol.StatusRunning || st.Step != 1):
					return fmt.Errorf("sub-agent %d is not between its steps: %s", k, describeTree(tree))
				}
			}
			return also(c)
		})
	})
	return tree
}

// fanOutCrashed is what the crash tests find once the tree completed.
type fanOutCrashed struct {
	root   string
	n      int
	ws     string
	tree   []protocol.RunState
	traces map[string][]protocol.Record
	m      *fanModel
}

// check checks the tree completed as if nothing had crashed: the root
// finished after its two steps, each sub-agent succeeded after its two,
// each run started once with a whole trace, every outcome composed back
// into the root's observation in the order asked, every edit made once,
// every committed call made and charged once. It returns what the traces
// drew.
func (f *fanOutCrashed) check(t *testing.T) ledger.Usage {
	t.Helper()
	at := byRun(f.tree)
	if len(f.tree) != f.n+1 {
		t.Errorf("the tree holds %d runs, want the root and its %d sub-agents: %s", len(f.tree), f.n, describeTree(f.tree))
	}
	for _, st := range f.tree {
		want := protocol.OutcomeSuccess
		if st.Run == f.root {
			want = protocol.OutcomeFinished
		}
		if st.Status != protocol.StatusCompleted || st.Outcome != want || st.Step != 2 {
			t.Errorf("run %s = %s %s after %d steps (%s), want completed %s after 2", st.Run, st.Status, st.Outcome, st.Step, st.Reason, want)
		}
		recs, ok := f.traces[st.Run]
		if !ok {
			t.Errorf("run %s has no trace", st.Run)
			continue
		}
		clustertest.CheckTrace(t, recs, &protocol.Result{Outcome: st.Outcome, Steps: st.Step, Tokens: st.Tokens})
	}
	if refused, _ := checkComposed(t, f.root, f.n, f.traces[f.root], at); len(refused) > 0 {
		t.Errorf("spawns %v were refused; the tree has room for all %d", refused, f.n)
	}
	checkFiles(t, f.ws, f.root, f.n, at)
	drawn := checkDrawsOnce(t, f.traces)
	checkServedOnce(t, f.m, agentOf(f.root, f.n), f.traces, drawn)
	return drawn
}

// TestFanOutResumeAfterSIGKILL kills a real `harness run` process in the
// middle of a fan-out (the root's turn asked for four sub-agents; two are
// done, two have committed a step and wait in their next provider call)
// and carries the run on with `harness resume ROOT` on the same data
// directory: the tree completes, no sub-agent is started twice, no edit
// is made twice, no committed call is made again, the ledger charges each
// call once, and the root hears all four outcomes.
func TestFanOutResumeAfterSIGKILL(t *testing.T) {
	bin := roleBinaries(t)
	for _, order := range leaseOrders {
		t.Run(order.name, func(t *testing.T) {
			const n, root = 4, "fan"
			m := newFanModel(t, n, fanHold, nil)
			ws := fanWorkspace(t, n)
			raw, err := json.Marshal(fanContract(ws, n, protocol.TreeBudget{MaxAgents: n + 1, MaxSteps: 40}, 0))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "contract.json")
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			data := t.TempDir()
			harnessBin := filepath.Join(bin, "harness")
			first := startProcess(t, harnessBin, m.env(), "run", "--data", data, "--id", root, "--root", ws, "-v", path)
			on := func(f func(*harness.Client) error) error {
				c, err := dialData(t, data)
				if err != nil {
					return err
				}
				defer c.Close()
				return f(c)
			}
			startFanOut(t, root, n, m, on)
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()
			// The calls held died with the process that made them: the
			// resume makes them again, unanswered as they are.
			testkit.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				if held := m.heldNow(); len(held) > 0 {
					return fmt.Errorf("the model still holds %v after the kill", held)
				}
				return nil
			})
			for k := 1; k < n; k += 2 {
				if c := (fanCall{childName(k), 1}); m.cutCalls()[c] != 1 {
					t.Fatalf("%s was not in flight when the process died: cut %d times", c, m.cutCalls()[c])
				}
			}
			m.release()
			t.Logf("at the kill: %s", describeStore(t, data, root))

			// harness resume serves no socket: the tree is read from the
			// store once it has returned, or been stopped.
			resume := startProcess(t, harnessBin, m.env(), "resume", "--data", data, "-v", root)
			done := make(chan error, 1)
			go func() { done <- resume.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("harness resume %s exited with %v, want 0 for a finished run", root, err)
				}
			case <-time.After(time.Minute):
				_ = resume.Process.Signal(syscall.SIGKILL)
				<-done
				t.Fatalf("harness resume %s had not returned after a minute; stopped, the store holds: %s", root, describeStore(t, data, root))
			}

			c, err := harness.Open(t.Context(), data)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f := &fanOutCrashed{root: root, n: n, ws: ws, m: m, traces: map[string][]protocol.Record{}}
			runs, err := c.Runs(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			f.tree = treeOf(runs, root)
			for _, st := range f.tree {
				if f.traces[st.Run], err = c.Run(st.Run).Trace(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			drawn := f.check(t)
			// The embedded ledger lived in the killed process and was
			// rebuilt from the traces by the resume: what the root's last
			// draw saw of the tree is every draw, once, and nothing held.
			st := byRun(f.tree)[root]
			if st.Budgets == nil {
				t.Fatalf("the root's index entry has no budgets")
			}
			if got := usageOf(st.Budgets.TreeSpent); got != drawn || st.Budgets.TreeReserved != (protocol.Spend{}) {
				t.Errorf("the ledger shows the tree spent %+v and holding %+v; the traces drew %+v, each once", got, st.Budgets.TreeReserved, drawn)
			}
		})
	}
}

// describeStore renders root's tree and the leases of its runs as the
// store on data holds them, with nothing running on it, for a log or a
// failure.
func describeStore(t *testing.T, data, root string) string {
	t.Helper()
	c, err := harness.Open(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runs, err := c.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tree := treeOf(runs, root)
	var ids []string
	for _, st := range tree {
		ids = append(ids, st.Run)
	}
	ls, err := leaseHolders(t.Context(), c.Conn(), ids...)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(describeTree(tree))
	for _, id := range ids {
		if owner, ok := ls[id]; ok {
			fmt.Fprintf(&b, "\n  lease of %s: held by %s", id, owner)
		}
	}
	return b.String()
}

// TestFanOutTakeoverAfterSIGKILL kills the coordinator process driving a
// fan-out on a cluster of separate processes (a sandboxer, a worker, a
// real redis-server for the ledger, NATS) in the same middle as
// TestFanOutResumeAfterSIGKILL: another coordinator takes the root and the
// two unfinished sub-agents over, the held calls' answers, made once, are
// used rather than asked for again, and the tree completes with the same
// checks, the Redis ledger charging exactly what the traces drew.
func TestFanOutTakeoverAfterSIGKILL(t *testing.T) {
	bin := roleBinaries(t)
	for _, order := range leaseOrders {
		t.Run(order.name, func(t *testing.T) {
			const n, root = 4, "fan"
			rs := redistest.Start(t)
			l := clustertest.RedisLedger(t, rs)
			m := newFanModel(t, n, fanHold, nil)
			ws := fanWorkspace(t, n)
			url, c := serverAndClient(t)
			env := []string{"NATS_URL=" + url, "REDIS_URL=" + rs.URL()}
			startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
			startProcess(t, filepath.Join(bin, "worker"), append(env, m.env()...), "--id", "w1")
			first := startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "first")
			h, err := c.Submit(t.Context(), fanContract(ws, n, protocol.TreeBudget{MaxAgents: n + 1, MaxSteps: 40}, 0), harness.WithRunID(root))
			if err != nil {
				t.Fatal(err)
			}
			mid := startFanOut(t, root, n, m, func(f func(*harness.Client) error) error { return f(c) })
			for _, st := range mid {
				if st.Coordinator != "first" {
					t.Fatalf("run %s is on %q before the second coordinator started", st.Run, st.Coordinator)
				}
			}
			startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "second")
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()
			// The worker outlives the coordinator: the held calls are
			// answered now, and their turns made durable, with nobody
			// waiting for them.
			m.release()
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFinished {
				t.Errorf("root = %s after %d (%s), want finished", res.Outcome, res.Steps, res.Reason)
			}
			if cut := m.cutCalls(); len(cut) > 0 {
				t.Errorf("held calls were cut off %v: the worker should have finished them", cut)
			}

			f := &fanOutCrashed{root: root, n: n, ws: ws, m: m, traces: map[string][]protocol.Record{}}
			runs, err := c.Runs(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			f.tree = treeOf(runs, root)
			var all [][]protocol.Record
			for _, st := range f.tree {
				if f.traces[st.Run], err = c.Run(st.Run).Trace(t.Context()); err != nil {
					t.Fatal(err)
				}
				all = append(all, f.traces[st.Run])
				// The runs unfinished at the kill finished on the second.
				want := "first"
				if k, ok := childIndex(root, st.Run); !ok || k%2 == 1 {
					want = "second"
				}
				if st.Coordinator != want {
					t.Errorf("run %s finished on %q, want %q", st.Run, st.Coordinator, want)
				}
			}
			f.check(t)
			clustertest.CheckCharged(t, l, root, all...)
		})
	}
}

// childIndex returns the k of a sub-agent's run id childRun(root, k).
func childIndex(root, run string) (int, bool) {
	var k int
	if _, err := fmt.Sscanf(run, root+"-s1c%d", &k); err != nil || childRun(root, k) != run {
		return 0, false
	}
	return k, true
}

// TestFanOutHundredUnderTreeCeiling has a root ask for 100 sub-agents in
// one turn, on two coordinators and four workers sharing a Redis ledger,
// under a tree token ceiling that holds a fraction of what they would
// draw. The model reports each call as using a few tokens more than the
// coordinator reserved for it (it reads each step task's size off the
// bus), so the ceiling can be overrun, but only by those few tokens per
// reservation in flight: the tree's spend stays within the ceiling plus
// one such shortfall per agent that drew. Every draw key is charged once,
// the ledger holds what the traces drew and nothing more, every call the
// model answered is a committed step, and the root's observation holds
// each of the 100 outcomes in the order asked: a sub-agent's own, or a
// refusal for one the ceiling kept from starting.
//
// It runs with the model answering at once, when the elder sub-agents
// are done before their younger siblings are started, and with every call
// taking half a second, as a model's would, when the spawns of the root's
// turn are started while their elder siblings' calls, reserved, are still
// in flight.
func TestFanOutHundredUnderTreeCeiling(t *testing.T) {
	bin := roleBinaries(t)
	for _, tt := range []struct {
		name  string
		delay string // the workers' --turn-delay
	}{
		{name: "answered at once", delay: "0s"},
		{name: "answered in half a second", delay: "500ms"},
	} {
		t.Run(tt.name, func(t *testing.T) { hundredUnderCeiling(t, bin, tt.delay) })
	}
}

func hundredUnderCeiling(t *testing.T, bin, delay string) {
	const (
		n         = 100
		root      = "hundred"
		ceiling   = 60_000 // tokens; 100 sub-agents of two calls of about 2,100 would draw 420,000
		maxOutput = 16
		short     = 3 // tokens each call uses beyond its reservation
	)
	rs := redistest.Start(t)
	l := clustertest.RedisLedger(t, rs)
	url, c := serverAndClient(t)
	tasks := watchTasks(t, c.Conn())
	runOf := map[string]string{fanRoot: root}
	for k := range n {
		runOf[childName(k)] = childRun(root, k)
	}
	m := newFanModel(t, n, nil, func(call fanCall) (int64, int64, error) {
		_, size, ok := tasks.latest(runOf[call.agent], call.turn+1, 30*time.Second)
		if !ok {
			return 0, 0, fmt.Errorf("no step task of %s step %d on the bus", runOf[call.agent], call.turn+1)
		}
		est := estimateOf(size, maxOutput)
		return est.InputTokens + short, est.OutputTokens, nil
	})
	ws := fanWorkspace(t, n)
	env := []string{"NATS_URL=" + url, "REDIS_URL=" + rs.URL()}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
	for i := range 4 {
		startProcess(t, filepath.Join(bin, "worker"), append(env, m.env()...), "--id", fmt.Sprintf("w%d", i+1), "--turn-delay", delay)
	}
	startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "c1")
	startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "c2")
	h, err := c.Submit(t.Context(), fanContract(ws, n, protocol.TreeBudget{MaxAgents: n + 1, MaxTokens: ceiling}, maxOutput), harness.WithRunID(root))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := c.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tree := treeOf(runs, root)
	at := byRun(tree)
	traces := map[string][]protocol.Record{}
	var all [][]protocol.Record
	for _, st := range tree {
		if traces[st.Run], err = c.Run(st.Run).Trace(t.Context()); err != nil {
			t.Fatal(err)
		}
		all = append(all, traces[st.Run])
		clustertest.CheckTrace(t, traces[st.Run], &protocol.Result{Outcome: st.Outcome, Steps: st.Step, Tokens: st.Tokens})
	}
	switch {
	case res.Outcome == protocol.OutcomeBudgetCeilingReached && res.Steps == 1:
	case res.Outcome == protocol.OutcomeFinished && res.Steps == 2:
	default:
		t.Errorf("root = %s after %d (%s), want budget_ceiling_reached after its spawning step, or finished after 2", res.Outcome, res.Steps, res.Reason)
	}

	// Every outcome composed back; a spawn refused only by the ceiling.
	refused, observed := checkComposed(t, root, n, traces[root], at)
	for _, k := range refused {
		if o := observed[k]; !strings.HasPrefix(o.Content, fmt.Sprintf("[spawn refused] ledger: the tree %q", root)) {
			t.Errorf("spawn %d was refused %q, want by the tree's ceiling", k, o.Content)
		}
	}
	outcomes := map[protocol.Outcome]int{}
	coordinators := map[string]int{}
	var unroomed []int // started, refused their first draw, and not reported refused
	for _, st := range tree {
		if st.Run == root {
			continue
		}
		outcomes[st.Outcome]++
		coordinators[st.Coordinator]++
		k, _ := childIndex(root, st.Run)
		switch {
		case st.Outcome == protocol.OutcomeSuccess && st.Step == 2:
		case st.Outcome == protocol.OutcomeBudgetCeilingReached && st.Step == 0:
			// A sub-agent the tree has no room for is refused before its
			// first step, and the call says so (docs/contract.md).
			if o := observed[k]; o.State() != protocol.CallRefused || !strings.HasPrefix(o.Content, "[spawn refused] ") {
				unroomed = append(unroomed, k)
			}
		case st.Outcome == protocol.OutcomeBudgetCeilingReached && st.Step == 1:
		default:
			t.Errorf("sub-agent %s = %s after %d steps (%s), want success after 2 or the ceiling reached before", st.Run, st.Outcome, st.Step, st.Reason)
		}
	}
	t.Logf("%d sub-agents started (%v, on %v), %d spawns observed refused", len(tree)-1, outcomes, coordinators, len(refused))
	if len(unroomed) > 0 {
		slices.Sort(unroomed)
		o := observed[unroomed[0]]
		t.Errorf("%d sub-agents the ceiling left no room for were started and refused their first draw, and are observed as failed sub-agents, not refused spawns: spawn %d (%s) is %q with status %s",
			len(unroomed), unroomed[0], childRun(root, unroomed[0]), o.Content, o.State())
	}
	accounted := 0
	for k := range n {
		if _, ok := at[childRun(root, k)]; ok || slices.Contains(refused, k) {
			accounted++
		}
	}
	if accounted != n {
		t.Errorf("%d of the %d spawns started a sub-agent or were refused, want all accounted for", accounted, n)
	}
	if len(refused) == 0 && outcomes[protocol.OutcomeBudgetCeilingReached] == 0 {
		t.Errorf("the ceiling of %d tokens refused nothing: the test does not exercise it", ceiling)
	}
	checkFiles(t, ws, root, n, at)

	// Every draw once, each exactly its reservation plus the shortfall.
	drawn := checkDrawsOnce(t, traces)
	checkServedOnce(t, m, agentOf(root, n), traces, drawn)
	clustertest.CheckCharged(t, l, root, all...)
	drawing := 0
	for run, recs := range traces {
		drew := false
		for _, r := range recs {
			for _, d := range r.Draws {
				drew = true
				size, ok := tasks.size(d.Key)
				if !ok {
					t.Errorf("%s draws %s, whose step task never crossed the bus", run, d.Key)
					continue
				}
				est := estimateOf(size, maxOutput)
				if d.Spend.Tokens() != est.Tokens()+short {
					t.Errorf("%s draws %d tokens under %s, want its reservation of %d plus %d", run, d.Spend.Tokens(), d.Key, est.Tokens(), short)
				}
			}
		}
		if drew {
			drawing++
		}
	}
	if bad := tasks.problems(); len(bad) > 0 {
		t.Errorf("step tasks: %q", bad)
	}
	// The overrun: whatever the last reservation granted left room for,
	// plus the shortfall of each reservation in flight then, at most one
	// per agent.
	tot, err := l.Totals(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	bound := int64(ceiling + short*drawing)
	t.Logf("the tree spent %d tokens of a %d ceiling (%d agents drew; at most %d allowed)", tot.Spent.Tokens(), ceiling, drawing, bound)
	if tot.Spent.Tokens() > bound {
		t.Errorf("the tree spent %d tokens, over the ceiling of %d by %d: more than the %d its %d drawing agents' reservations in flight could under-estimate",
			tot.Spent.Tokens(), ceiling, tot.Spent.Tokens()-ceiling, short*drawing, drawing)
	}
}

// usageOf is a trace's spend as a ledger usage.
func usageOf(s protocol.Spend) ledger.Usage {
	return ledger.Usage{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CostMicros: s.CostMicros, Steps: s.Steps}
}
