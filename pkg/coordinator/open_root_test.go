package coordinator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestARootTwoSandboxersOpenIsClosedOnBoth runs on a root two sandboxers
// serve. Every open of a root goes to both, and both open the workspace,
// while the run goes on with the first to answer: the other is told to
// close it again, so once the runs are over neither holds any of them.
// Before, the other held every run's workspace, skills and MCP servers
// until it restarted.
func TestARootTwoSandboxersOpenIsClosedOnBoth(t *testing.T) {
	ws := t.TempDir()
	done := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: "Done."}, nil
	})
	// The embedded cluster's own sandboxer serves another root, so the
	// two are the only ones the runs can have.
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{t.TempDir()}, Provider: done})
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	for i, id := range []string{"sb-one", "sb-two"} {
		n, err := newNodeWith(cl, id, ws, regs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.stop)
	}
	c := sayDone(ws)
	const runs = 6
	for i := range runs {
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(fmt.Sprintf("two-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeFinished {
			t.Fatalf("run %d = %v, %v; want finished", i, res, err)
		}
	}
	open := func() (held []string) {
		for i, reg := range regs {
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if strings.HasSuffix(mf.GetName(), "workspaces_open") && mf.GetMetric()[0].GetGauge().GetValue() != 0 {
					held = append(held, fmt.Sprintf("node %d holds %v", i, mf.GetMetric()[0].GetGauge().GetValue()))
				}
			}
		}
		return held
	}
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if held := open(); len(held) > 0 {
			return fmt.Errorf("workspaces of finished runs still open: %s", strings.Join(held, ", "))
		}
		return nil
	})
}
