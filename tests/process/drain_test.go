package process

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
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
		t.Fatalf("run after the hand-over = %s (%s), want success", res.Outcome, res.Reason)
	}
	if st, err := c.Run("handed-over").Status(t.Context()); err != nil || st.Coordinator != "second" {
		t.Errorf("the run finished under %q (%v), want the second coordinator", st.Coordinator, err)
	}
	checkNothingLost(t, c, "handed-over", res)
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
