package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

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
// offered the same tools, rather than waiting out its ops' time for a
// node that is not coming back. The embedded cluster's own sandboxer serves another root, so the
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
	var toolsBefore, toolsAfter []string // offered to the model before the move and after it
	names := func(req *protocol.CompletionRequest) (out []string) {
		for _, tl := range req.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		switch call {
		case 1:
			toolsBefore = names(req)
			return write("w1", "one.txt"), nil
		case 2:
			// The first step ran on the first sandboxer; the second comes
			// up and the first goes before this step's call is sent.
			var err error
			if second, err = newNode(cl, "sb-second", ws); err != nil {
				return nil, err
			}
			first.stop()
			return write("w2", "two.txt"), nil
		case 3:
			toolsAfter = names(req)
			return write("w3", "three.txt"), nil
		}
		return &protocol.Turn{Text: "Done."}, nil
	})
	// The nodes stop after the cluster, which closes the run's workspace
	// on the node holding it as the run ends.
	t.Cleanup(func() {
		for _, n := range []*node{first, second} {
			if n != nil {
				n.stop()
			}
		}
	})
	cl = clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{t.TempDir()}, Provider: agent})
	first, err := newNode(cl, "sb-first", ws)
	if err != nil {
		t.Fatal(err)
	}
	// An operator watching the events hears of the move, on the subject
	// docs/operations.md gives `nats sub`.
	const watched = "harness.events.*.workspace_moved"
	if s := wire.Event("*", protocol.EventWorkspaceMoved); s != watched {
		t.Fatalf("the workspace_moved events go to %s, docs/operations.md watches %s", s, watched)
	}
	moved := make(chan *protocol.Event, 4)
	enc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	if _, err := enc.Subscribe(watched, func(m *nats.Msg) {
		var ev protocol.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			moved <- &ev
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}

	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Write three files.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "three.txt", Needle: "done"}},
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
	for _, f := range []string{"one.txt", "two.txt", "three.txt"} {
		if b, err := os.ReadFile(filepath.Join(ws, f)); err != nil || string(b) != "done\n" {
			t.Errorf("%s = %q, %v; want it written", f, b, err)
		}
	}
	if !slices.Contains(toolsBefore, coordinator.RememberTool) || !slices.Equal(toolsBefore, toolsAfter) {
		t.Errorf("tools offered = %v before the move, %v after it; want the same, remember among them", toolsBefore, toolsAfter)
	}
	select {
	case ev := <-moved:
		if ev.Run != res.Run || ev.Target != "sb-second" || ev.Tool != "write_file" || ev.Step != 2 || !strings.Contains(ev.Text, "sb-first") {
			t.Errorf("workspace_moved event = %+v, want run %s, step 2, write_file moved from sb-first to sb-second", ev, res.Run)
		}
	case <-ctx.Done():
		t.Fatal("no workspace_moved event was heard")
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

// newNode starts a sandboxer serving root and waits until it is ready.
func newNode(cl *harness.Cluster, id, root string) (*node, error) {
	return newNodeWith(cl, id, root, nil)
}

// newNodeWith is newNode with the sandboxer's metrics registered in reg.
func newNodeWith(cl *harness.Cluster, id, root string, reg prometheus.Registerer) (*node, error) {
	nc, err := nats.Connect("", nats.InProcessServer(cl.Server()), nats.UserInfo(cl.Credentials()))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	assets, err := wire.Ensure(context.Background(), js, wire.Config{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	sb, err := sandboxer.New(nc, sandboxer.Config{AllowFloor: true, ID: id, Ops: assets.Ops, Roots: []string{root}, Metrics: reg})
	if err != nil {
		nc.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sb.Run(ctx) }()
	<-sb.Ready()
	var once sync.Once
	return &node{stop: func() {
		once.Do(func() {
			cancel()
			<-done
			nc.Close()
		})
	}}, nil
}
