package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
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
