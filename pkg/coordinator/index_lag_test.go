package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
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

// TestIndexCatchesUpWhileARunWaits commits two steps in quick succession,
// the second within a second of the first, whose progress the run index
// is spared, and then waits on a model that does not answer: the index
// shows the second step while the run waits, not only once it goes on.
func TestIndexCatchesUpWhileARunWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws := t.TempDir()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	agent := provider.NewScriptedFunc(func(_ *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if call <= 2 {
			args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("f%d.txt", call), "content": "x\n"})
			return &protocol.Turn{Text: "Writing.", ToolCalls: []protocol.ToolCall{{ID: fmt.Sprint(call), Name: "write_file", Arguments: args}}}, nil
		}
		<-release // the model thinks, for as long as the test looks
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: agent})
	t.Cleanup(free) // before the cluster's own: its worker is not left in the call
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Write two files.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 5},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	run, err := clustertest.SubmitJSON(ctx, cl, data, "lagging")
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		st, err := cl.Run(run).Status(ctx)
		if err != nil {
			return err
		}
		if st.Status != protocol.StatusRunning || st.Step != 2 {
			return fmt.Errorf("the index shows %s at step %d while the run waits after step 2", st.Status, st.Step)
		}
		return nil
	})
	free()
	res, err := cl.Run(run).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 {
		t.Errorf("run = %s after %d steps, want 3", res.Outcome, res.Steps)
	}
}

// TestShortRunWritesItsIndexTwice runs a one-step run to its end within a
// second: the run index is written at admission and with the outcome,
// and the progress of the step between them, due a second after
// admission, is not written (it would be one more synced write for every
// short run, overwritten at once).
func TestShortRunWritesItsIndexTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws := t.TempDir()
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws},
		Provider: provider.NewScripted(&protocol.Turn{Text: "Done."})})
	nc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		s, err := js.Stream(ctx, "KV_"+wire.BucketRuns)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.LastSeq
	}
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Say done.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 3},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
	before := writes()
	start := time.Now()
	h, err := cl.Submit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if err != nil || res.Outcome != protocol.OutcomeFinished || res.Steps != 1 {
		t.Fatalf("run = %v, %v; want finished after 1 step", res, err)
	}
	took := time.Since(start)
	if n := writes() - before; n != 2 && took < time.Second {
		t.Errorf("the run index was written %d times for a run of one step that took %s, want 2 (admitted, finished)", n, took)
	}
}
