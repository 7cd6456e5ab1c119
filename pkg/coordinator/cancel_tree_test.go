package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
)

// treeAgent spawns one sub-agent at the root's first turn; the
// sub-agent's own call waits until it is abandoned, signalling it began.
type treeAgent struct{ childBegan chan struct{} }

func (treeAgent) Name() string { return "tree" }

func (a treeAgent) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	if strings.Contains(req.Messages[0].Content, "the part") {
		a.childBegan <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &protocol.Turn{Usage: protocol.Usage{InputTokens: 80, OutputTokens: 9}, ToolCalls: []protocol.ToolCall{{ID: "s1", Name: "spawn_agent",
		Arguments: json.RawMessage(`{"goal":"the part","verify_file":"note.go","verify_contains":"hello","max_steps":3}`)}}}, nil
}

// TestCancelATree cancels a root run while its sub-agent's provider call
// is in flight: the root ends cancelled, and the sub-agent with it, its
// trace saying the parent was cancelled and by whom.
func TestCancelATree(t *testing.T) {
	root, raw := readingContract(t, "the root", func(c *protocol.Contract) {
		c.Budget.MaxSteps = 3
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 3, MaxSteps: 10}
	})
	agent := treeAgent{childBegan: make(chan struct{}, 1)}
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{root.Workspace.Root}, Provider: agent, NoTakeover: true})
	run, err := clustertest.SubmitJSON(t.Context(), cl, raw, "boss")
	if err != nil {
		t.Fatal(err)
	}
	<-agent.childBegan
	var child string
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		runs, err := cl.Runs(t.Context())
		if err != nil {
			return err
		}
		for _, st := range runs {
			if st.Parent == run {
				child = st.Run
				return nil
			}
		}
		return errNoChild
	})
	if _, err := cl.Run(run).Cancel(t.Context(), "ops:alice", "the whole tree"); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Run(run).Wait(t.Context())
	if err != nil || res.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("root after the cancel = %+v, %v; want cancelled", res, err)
	}
	cres, err := cl.Run(child).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cres.Outcome != protocol.OutcomeCancelled || !strings.Contains(cres.Reason, "its parent "+run+" was cancelled") || !strings.Contains(cres.Reason, "ops:alice") {
		t.Fatalf("sub-agent after its parent's cancel = %s (%s), want cancelled naming the parent and who", cres.Outcome, cres.Reason)
	}
}

var errNoChild = errors.New("no sub-agent in the index yet")
