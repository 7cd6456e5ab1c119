package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestFinishReachesTheIndex fails the run index's first writes of a run's
// outcome, as a NATS node that died under the bucket does: the outcome
// is written again until it lands, so the run does not show running for
// good once it has finished (the lease is given up after it, and nothing
// else would write the entry).
func TestFinishReachesTheIndex(t *testing.T) {
	ws := t.TempDir()
	done := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: "Done.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	})
	var failed atomic.Int32
	// Set before the cluster starts, so restored after it stops.
	t.Cleanup(coordinator.SetIndexPutHook(func(st *protocol.RunState) error {
		if st.Status != protocol.StatusRunning && failed.Add(1) <= 3 {
			return errors.New("nats: no response from stream")
		}
		return nil
	}))
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: done})
	c := sayDone(ws)
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("finish-lost"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatalf("the finished run's outcome never reached the index: %v", err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Errorf("run = %s (%s), want finished", res.Outcome, res.Reason)
	}
	if n := failed.Load(); n < 4 {
		t.Errorf("the outcome was written %d times, want the three that failed and one more", n)
	}
}

// TestDamagedTraceReachesTheIndex resumes a run whose trace does not
// begin with a started record, failing the run index's first writes of
// its failure: the failure is written again until it lands, as a finish
// is.
func TestDamagedTraceReachesTheIndex(t *testing.T) {
	var failed atomic.Int32
	t.Cleanup(coordinator.SetIndexPutHook(func(st *protocol.RunState) error {
		if st.Status == protocol.StatusFailed && failed.Add(1) <= 3 {
			return errors.New("nats: no response from stream")
		}
		return nil
	}))
	cl, _, tr := withTrace(t, harness.Config{AllowFloor: true, Roots: []string{t.TempDir()}, NoTakeover: true,
		Provider: provider.NewScripted(&protocol.Turn{Text: "Done."})})
	const run = "damaged"
	if err := tr.Writer(run, 0).Append(t.Context(), &protocol.Record{Kind: protocol.RecordStep, Step: 1,
		Turn: &protocol.Turn{Text: "a step with no start before it"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cl.Run(run).Resume(ctx)
	if err != nil {
		t.Fatalf("the damaged run's failure never reached the index: %v", err)
	}
	if res.Outcome != protocol.OutcomeFailed || !strings.Contains(res.Reason, "damaged trace") {
		t.Errorf("run = %s (%s), want failed for its damaged trace", res.Outcome, res.Reason)
	}
	if n := failed.Load(); n < 4 {
		t.Errorf("the failure was written %d times, want the three that failed and one more", n)
	}
}

// sayDone is a contract on ws that reads and writes nothing and needs no
// verification: a model that says it is done finishes it in one step.
func sayDone(ws string) *protocol.Contract {
	return &protocol.Contract{Schema: protocol.ContractSchema, Task: "Say done.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}},
		Policy:       &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
}
