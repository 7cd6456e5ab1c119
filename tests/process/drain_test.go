package process

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// TestWorkerDrainsOnSIGTERM sends SIGTERM to the only worker while its
// provider call is in flight, with a second worker started: the first
// finishes the call and publishes its turn, then exits 0; the run goes on
// on the second and succeeds, and nothing in its trace is charged as a
// call lost with its worker.
func TestWorkerDrainsOnSIGTERM(t *testing.T) {
	bin := roleBinaries(t)
	cassette := recordSlow(t)
	url, c := serverAndClient(t)
	ws := clustertest.ExampleWorkspace(t)
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
	startProcess(t, filepath.Join(bin, "coordinator"), env)
	first := startProcess(t, filepath.Join(bin, "worker"), env, "--id", "w1", "--replay", cassette, "--turn-delay", "2s", "--drain", "1m")
	if _, err := clustertest.SubmitJSON(t.Context(), c, slowContract(t, ws), "drained-worker"); err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		m, err := c.Conn().Request(wire.WorkerStatus("w1"), nil, 5*time.Second)
		if err != nil {
			return err
		}
		var st struct{ Inflight int64 }
		if err := json.Unmarshal(m.Data, &st); err != nil {
			return err
		}
		if st.Inflight == 0 {
			return fmt.Errorf("w1 has no call in flight yet")
		}
		return nil
	})
	startProcess(t, filepath.Join(bin, "worker"), env, "--id", "w2", "--replay", cassette)
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("the drained worker exited with %v, want 0", err)
	}
	res, err := c.Run("drained-worker").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("run after the worker drained = %s (%s), want success", res.Outcome, res.Reason)
	}
	checkNothingLost(t, c, "drained-worker", res)
}

// TestStoppingWorkerGivesBackWhatItHasNotCalled sends SIGTERM to a worker
// of one slot while it makes one run's call and holds another run's task
// waiting for that slot, with a second worker started: the first gives
// the waiting task back at once, uncalled, and finishes its call; both
// runs succeed, nothing charged as a call lost with its worker (the task
// given back was delivered twice), and no step asked more than once (the
// mark of the task given back is no answer).
func TestStoppingWorkerGivesBackWhatItHasNotCalled(t *testing.T) {
	bin := roleBinaries(t)
	cassette := recordSlow(t)
	url, c := serverAndClient(t)
	wsA, wsB := clustertest.ExampleWorkspace(t), clustertest.ExampleWorkspace(t)
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", wsA, "--root", wsB)
	startProcess(t, filepath.Join(bin, "coordinator"), env)
	first := startProcess(t, filepath.Join(bin, "worker"), env, "--id", "w1", "--concurrency", "1", "--replay", cassette, "--turn-delay", "5s", "--drain", "1m")
	turns := make(chan *nats.Msg, 64)
	sub, err := c.Conn().ChanSubscribe(wire.TurnsPrefix+">", turns)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for run, ws := range map[string]string{"called": wsA, "waiting": wsB} {
		if _, err := clustertest.SubmitJSON(t.Context(), c, slowContract(t, ws), run); err != nil {
			t.Fatal(err)
		}
	}
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		cons, err := js.Consumer(t.Context(), wire.StreamSteps, wire.WorkerConsumer(protocol.DefaultPool))
		if err != nil {
			return err
		}
		info, err := cons.Info(t.Context())
		if err != nil {
			return err
		}
		if info.NumAckPending != 2 {
			return fmt.Errorf("w1 holds %d step tasks, want both runs' first", info.NumAckPending)
		}
		return nil
	})
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	startProcess(t, filepath.Join(bin, "worker"), env, "--id", "w2", "--replay", cassette)
	if err := first.Wait(); err != nil {
		t.Errorf("the stopped worker exited with %v, want 0", err)
	}
	for _, run := range []string{"called", "waiting"} {
		res, err := c.Run(run).Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeSuccess {
			logTrace(t, c, run)
			t.Fatalf("%s after the worker stopped = %s (%s), want success", run, res.Outcome, res.Reason)
		}
		checkNothingLost(t, c, run, res)
		recs, err := c.Run(run).Trace(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			for _, d := range r.Draws {
				if !strings.Contains(d.Key, ".lost") && !strings.HasSuffix(d.Key, ".1") {
					t.Errorf("%s's step %d drew under %s: the step was asked more than once", run, r.Step, d.Key)
				}
			}
		}
	}
	marked := false
	for len(turns) > 0 {
		var tr protocol.TurnResult
		if m := <-turns; json.Unmarshal(m.Data, &tr) == nil && tr.GivenBack() && tr.Worker == "w1" {
			marked = true
		}
	}
	if !marked {
		t.Error("w1 marked no task given back: the waiting task was not in its hands when it stopped")
	}
}

// TestCoordinatorHandsOverOnSIGTERM sends SIGTERM to the coordinator
// driving a run, with a second one started: the first hands the run's
// lease over (expired at once, not left to run out) and exits 0; the
// second takes the run and it succeeds, nothing charged as lost.
func TestCoordinatorHandsOverOnSIGTERM(t *testing.T) {
	bin := roleBinaries(t)
	cassette := recordSlow(t)
	url, c := serverAndClient(t)
	ws := clustertest.ExampleWorkspace(t)
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	first := startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "first")
	if _, err := clustertest.SubmitJSON(t.Context(), c, slowContract(t, ws), "handed-over"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitStep(t, c, "handed-over", 1)
	startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "second")
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("the stopped coordinator exited with %v, want 0", err)
	}
	// Left to run out, the lease would still be the first's and live for
	// most of its lifetime (renewed every third of it); handed over, it
	// is expired, or the second's already.
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), wire.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(t.Context(), "handed-over"); err == nil {
		var l struct {
			Owner   string
			Expires time.Time
		}
		if err := json.Unmarshal(e.Value(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Owner == "first" && l.Expires.After(time.Now()) {
			t.Errorf("the stopped coordinator left its lease live until %s instead of handing it over", l.Expires.Format(time.RFC3339Nano))
		}
	}
	res, err := c.Run("handed-over").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		logTrace(t, c, "handed-over")
		t.Fatalf("run after the hand-over = %s (%s), want success", res.Outcome, res.Reason)
	}
	if st, err := c.Run("handed-over").Status(t.Context()); err != nil || st.Coordinator != "second" {
		t.Errorf("the run finished under %q (%v), want the second coordinator", st.Coordinator, err)
	}
	checkNothingLost(t, c, "handed-over", res)
}

// logTrace logs a run's trace, record by record, for a failure to show
// what each step saw.
func logTrace(t *testing.T, c *harness.Client, run string) {
	t.Helper()
	recs, err := c.Run(run).Trace(t.Context())
	if err != nil {
		t.Logf("trace of %s: %v", run, err)
		return
	}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		t.Logf("trace of %s: %s", run, b)
	}
}

// checkNothingLost checks a run's trace is whole and charges no call as
// lost with its worker.
func checkNothingLost(t *testing.T, c *harness.Client, run string, res *protocol.Result) {
	t.Helper()
	recs, err := c.Run(run).Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckTrace(t, recs, res)
	for _, r := range recs {
		for _, d := range r.Draws {
			if strings.Contains(d.Key, ".lost") {
				t.Errorf("step %d charges %s as a call lost with its worker", r.Step, d.Key)
			}
		}
	}
}

// TestSandboxerDrainsOnSIGTERM sends SIGTERM to the sandboxer while the
// run's command runs: it lets the command finish and answers it, then
// exits 0; started again under its node id, it serves the rest of the
// run, which succeeds with the command's observation ok, not cut off.
func TestSandboxerDrainsOnSIGTERM(t *testing.T) {
	bin := roleBinaries(t)
	ws := t.TempDir()
	contract := func(root string) *protocol.Contract {
		return &protocol.Contract{Task: "write out.txt slowly", Workspace: protocol.Workspace{Root: root},
			Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "out.txt", Needle: "drained"}},
			Budget:       protocol.Budget{MaxSteps: 3},
			Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "t", Rules: []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: "sh*"}}}},
				Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
	}
	rec := provider.NewRecord(provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "slow", Name: "exec",
		Arguments: json.RawMessage(`{"argv":["sh","-c","echo started > started.txt; sleep 2; echo drained > out.txt"]}`)}}}))
	if res, err := harness.Run(t.Context(), contract(t.TempDir()), harness.WithProvider(rec), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir())); err != nil || res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("recording: %+v, %v", res, err)
	}
	cassette := saveCassette(t, rec)
	url, c := serverAndClient(t)
	env := []string{"NATS_URL=" + url, "HARNESS_ALLOW_FLOOR=1"}
	startProcess(t, filepath.Join(bin, "coordinator"), env)
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	first := startProcess(t, filepath.Join(bin, "sandboxer"), env, "--id", "sb1", "--root", ws, "--backends", "floor", "--drain", "1m")
	h, err := c.Submit(t.Context(), contract(ws), harness.WithRunID("drained-sandboxer"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(ws, "started.txt"))
		return err
	})
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("the drained sandboxer exited with %v, want 0", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || !strings.Contains(string(b), "drained") {
		t.Fatalf("the command in flight did not finish before the sandboxer exited: %q, %v", b, err)
	}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--id", "sb1", "--root", ws, "--backends", "floor")
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("run after the sandboxer drained = %s (%s), want success", res.Outcome, res.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.CallID == "slow" && o.State() != protocol.CallOK {
				t.Errorf("the drained command's observation is %s: %s", o.State(), o.Content)
			}
		}
	}
}
