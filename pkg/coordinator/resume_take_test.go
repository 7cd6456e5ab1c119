package coordinator_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// refusingLedger refuses to register one agent, as a tree at its agent
// cap would, and passes everything else to the ledger it wraps.
type refusingLedger struct {
	ledger.Ledger
	agent string
}

func (l *refusingLedger) Register(ctx context.Context, tree, agent string, depth int) error {
	if agent == l.agent {
		return &ledger.Refusal{Tree: tree, Agent: agent, Scope: ledger.ScopeTree, Dimension: ledger.DimAgents, Asked: 1, Limit: 1}
	}
	return l.Ledger.Register(ctx, tree, agent, depth)
}

// TestResumeRefusedGivesTheWorkspaceBack resumes a run with steps behind
// it, whose admission and workspace open go at once, and has the ledger
// refuse it: the run ends with the refusal, and the workspace opened
// meanwhile is given back to the sandboxer, not left open.
func TestResumeRefusedGivesTheWorkspaceBack(t *testing.T) {
	const run = "refused-on-resume"
	cl, nc, _ := unfinished(t, run, "a refused run called its provider", &refusingLedger{Ledger: ledger.NewMemory(), agent: run})
	ops := watchOps(t, nc)
	res, err := cl.Run(run).Resume(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused {
		t.Fatalf("resumed run = %s (%s), want refused by the ledger", res.Outcome, res.Reason)
	}
	givenBack(t, ops, run)
}

// TestNewRunRefusedGivesTheWorkspaceBack submits a run on a plain root,
// whose admission and workspace open go at once, and has the ledger refuse
// it: the run ends with the refusal, and the workspace opened meanwhile is
// given back to the sandboxer, not left open.
func TestNewRunRefusedGivesTheWorkspaceBack(t *testing.T) {
	const run = "refused-when-new"
	ws := t.TempDir()
	model := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		t.Error("a refused run called its provider")
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl, nc, _ := withTrace(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: model,
		Ledger: &refusingLedger{Ledger: ledger.NewMemory(), agent: run}})
	ops := watchOps(t, nc)
	c := sayDone(ws)
	h, err := cl.Submit(t.Context(), c, harness.WithRunID(run))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused {
		t.Fatalf("run = %s (%s), want refused by the ledger", res.Outcome, res.Reason)
	}
	givenBack(t, ops, run)
}

// watchOps hears every open and every op sent to a sandboxer.
func watchOps(t *testing.T, nc *nats.Conn) chan *nats.Msg {
	t.Helper()
	ops := make(chan *nats.Msg, 64)
	for _, subj := range []string{wire.SandboxOpenSubject, wire.SandboxOps("*")} {
		sub, err := nc.ChanSubscribe(subj, ops)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// givenBack waits, among the ops heard, for run's workspace to be opened
// (beside its admission, which refused it) and closed again.
func givenBack(t *testing.T, ops chan *nats.Msg, run string) {
	t.Helper()
	opened := false
	for deadline := time.After(10 * time.Second); ; {
		select {
		case m := <-ops:
			var op protocol.SandboxOp
			if json.Unmarshal(m.Data, &op) != nil || op.Run != run {
				continue
			}
			switch op.Kind {
			case protocol.OpOpen:
				opened = true
			case protocol.OpClose:
				if !opened {
					t.Fatal("the run's workspace was closed before it was opened")
				}
				return
			}
		case <-deadline:
			if !opened {
				t.Fatal("the run did not open its workspace beside its admission")
			}
			t.Fatal("the workspace the refused run opened was not given back in 10 s")
		}
	}
}

// TestResumeReadsWhatItsLastHolderAppended resumes a run whose trace is
// read while its lease is taken, and has a record appended after that
// read, as the run's last holder could while the lease changed hands: the
// resume reads the trace again and sees it, here a finish, which it
// leaves as it is, rather than driving the run from the read before.
func TestResumeReadsWhatItsLastHolderAppended(t *testing.T) {
	const run = "appended-while-taken"
	// The hook is set before the cluster starts, so restored after it
	// stops; it reaches the trace through tr, set once the cluster is up.
	var appended atomic.Bool
	var tr atomic.Pointer[trace.Trace]
	t.Cleanup(coordinator.SetReadHook(func(r string) {
		if r != run || !appended.CompareAndSwap(false, true) {
			return
		}
		last, err := tr.Load().LastSeq(t.Context(), run)
		if err != nil {
			t.Error(err)
			return
		}
		fin := &protocol.Record{Kind: protocol.RecordFinished, Step: 3, Outcome: protocol.OutcomeCancelled, Reason: "ended by its last holder"}
		if err := tr.Load().Writer(run, last).Append(t.Context(), fin); err != nil {
			t.Error(err)
		}
	}))
	cl, _, written := unfinished(t, run, "a finished run called its provider", nil)
	tr.Store(written)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cl.Run(run).Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !appended.Load() {
		t.Fatal("the resume made no read beside its lease")
	}
	if res.Outcome != protocol.OutcomeCancelled || res.Reason != "ended by its last holder" {
		t.Errorf("resumed run = %s (%s), want the finish its last holder appended", res.Outcome, res.Reason)
	}
}

// unfinished starts the embedded default with a model that must not be
// called (failing the test with never if it is) and ledger (the memory
// ledger for nil), and writes run's trace: three committed steps of reads
// in a workspace of its own, unfinished. It returns the cluster, a
// connection to it and the trace.
func unfinished(t *testing.T, run, never string, l ledger.Ledger) (*harness.Cluster, *nats.Conn, *trace.Trace) {
	t.Helper()
	ws := t.TempDir()
	model := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		t.Error(never)
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl, nc, tr := withTrace(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: model, NoTakeover: true, Ledger: l})
	synthesize(t, tr, run, ws, 3)
	return cl, nc, tr
}

// withTrace starts the embedded default with cfg and returns it, a
// connection to it and its trace, for a test to write runs' records
// itself.
func withTrace(t *testing.T, cfg harness.Config) (*harness.Cluster, *nats.Conn, *trace.Trace) {
	t.Helper()
	cl := clustertest.Start(t, cfg)
	nc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	assets, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return cl, nc, trace.New(js, assets.Trace)
}
