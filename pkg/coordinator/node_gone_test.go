package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// TestRunOnARootOutlivesItsSandboxer runs on a root two sandboxers serve.
// The first holds the workspace for the first step and is gone before
// the second: the run opens the root on the other and carries on there,
// rather than waiting out its ops' time for a node that is not coming
// back. The embedded cluster's own sandboxer serves another root, so the
// two are the only ones the run can have.
func TestRunOnARootOutlivesItsSandboxer(t *testing.T) {
	defer coordinator.SetNodeGone(300 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ws := t.TempDir()

	var cl *harness.Cluster
	var first, second *node
	write := func(id, path string) *protocol.Turn {
		args, _ := json.Marshal(map[string]string{"path": path, "content": "done\n"})
		return &protocol.Turn{Text: "Writing " + path + ".", ToolCalls: []protocol.ToolCall{{ID: id, Name: "write_file", Arguments: args}}}
	}
	agent := provider.NewScriptedFunc(func(_ *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch call {
		case 1:
			return write("w1", "one.txt"), nil
		case 2:
			// The first step ran on the first sandboxer; the second comes
			// up and the first goes before this step's call is sent.
			second = startNode(t, cl, "sb-second", ws)
			first.stop()
			return write("w2", "two.txt"), nil
		}
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl = clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{t.TempDir()}, Provider: agent})
	first = startNode(t, cl, "sb-first", ws)
	defer func() {
		if second != nil {
			second.stop()
		}
	}()

	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Write two files.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "two.txt", Needle: "done"}},
		Budget:       protocol.Budget{MaxSteps: 5},
		Policy:       &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}},
		Sandbox:      protocol.SandboxSpec{Backend: "floor", Limits: protocol.Limits{WallSecs: 2}}}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := clustertest.RunJSON(ctx, cl, data, "outlives")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("outcome = %s after %d steps (%s), want success on the second sandboxer", res.Outcome, res.Steps, res.Reason)
	}
	for _, f := range []string{"one.txt", "two.txt"} {
		if b, err := os.ReadFile(filepath.Join(ws, f)); err != nil || string(b) != "done\n" {
			t.Errorf("%s = %q, %v; want it written", f, b, err)
		}
	}
	recs, err := cl.Run(res.Run).Trace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.Status != protocol.CallOK {
				t.Errorf("step %d: %s is %s (%s), want ok", r.Step, o.Tool, o.Status, o.Content)
			}
		}
	}
}

// node is a sandboxer of the test's own, on a connection of its own.
type node struct {
	stop func()
}

// startNode starts a sandboxer serving root and waits until it answers.
func startNode(t *testing.T, cl *harness.Cluster, id, root string) *node {
	t.Helper()
	nc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	assets, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandboxer.New(nc, sandboxer.Config{AllowFloor: true, ID: id, Ops: assets.Ops, Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sb.Run(ctx) }()
	<-sb.Ready()
	stopped := false
	return &node{stop: func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		nc.Close()
	}}
}
