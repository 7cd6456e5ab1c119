package harness_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// pausedRun runs the asking agent on the embedded default until it pauses
// on its edit of calc.go, and returns the data directory and workspace.
func pausedRun(t *testing.T, run string) (data, ws string) {
	t.Helper()
	ws = clustertest.ExampleWorkspace(t)
	c, err := protocol.DecodeContract(clustertest.AskContract(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	data = t.TempDir()
	res, err := harness.Run(t.Context(), c, harness.WithProvider(clustertest.AskingAgent(false)), harness.WithAllowFloor(), harness.WithDataDir(data), harness.WithRunID(run))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("run = %s (%s), want it paused awaiting approval", res.Outcome, res.Reason)
	}
	return data, ws
}

// finishingAgent answers the turn after a decision: it is done.
func finishingAgent() harness.Option {
	return harness.WithProvider(provider.NewScripted(&protocol.Turn{Text: "Done."}))
}

func countKind(recs []protocol.Record, kind string) int {
	n := 0
	for _, r := range recs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

// TestResumeWithDecision decides a paused run's action and carries it on
// in one call, as io-harness's resume_with_decision: deferred again,
// approved, denied, approved as rewritten; a repeat of the same call does
// nothing twice.
func TestResumeWithDecision(t *testing.T) {
	tests := []struct {
		name      string
		d         *protocol.Decision
		want      protocol.Outcome
		code      string // calc.go's Add body afterwards
		decisions int    // decision records in the trace
	}{
		{name: "defer again", d: nil, want: protocol.OutcomeAwaitingApproval, code: "return a - b"},
		{name: "approve", d: &protocol.Decision{Approve: true}, want: protocol.OutcomeFinished, code: "return a + b", decisions: 1},
		{name: "deny", d: &protocol.Decision{Reason: "not on a Friday"}, want: protocol.OutcomeDenied, code: "return a - b", decisions: 1},
		{name: "approve rewritten", d: &protocol.Decision{Approve: true, Rewrite: json.RawMessage(`{"path":"calc.go","search":"return a - b","replace":"return b + a"}`)},
			want: protocol.OutcomeFinished, code: "return b + a", decisions: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const run = "decided"
			data, ws := pausedRun(t, run)
			id := protocol.ApprovalID(run, 1, 0)
			for i := range 2 { // the second time, as after a crash: the same outcome, nothing done twice
				res, err := harness.ResumeWithDecision(t.Context(), run, id, tt.d, finishingAgent(), harness.WithAllowFloor(), harness.WithDataDir(data))
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if res.Outcome != tt.want {
					t.Fatalf("call %d: outcome %s (%s), want %s", i+1, res.Outcome, res.Reason, tt.want)
				}
			}
			code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
			if err != nil || strings.Count(string(code), tt.code) != 1 || strings.Count(string(code), "\treturn ") != 1 {
				t.Errorf("calc.go = %q, want %q once", code, tt.code)
			}
			recs := clustertest.ReadTrace(t, data, run)
			if n := countKind(recs, protocol.RecordDecision); n != tt.decisions {
				t.Errorf("trace has %d decision records, want %d: %v", n, tt.decisions, clustertest.RecordKinds(recs))
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		const run = "refused"
		data, ws := pausedRun(t, run)
		id := protocol.ApprovalID(run, 1, 0)
		if _, err := harness.ResumeWithDecision(t.Context(), run, protocol.ApprovalID("another", 1, 0), &protocol.Decision{Approve: true},
			finishingAgent(), harness.WithAllowFloor(), harness.WithDataDir(data)); !errors.Is(err, protocol.ErrInvalidField) {
			t.Errorf("another run's approval = %v, want ErrInvalidField", err)
		}
		// Decided one way already, it will not be decided the other.
		cl, err := harness.Start(t.Context(), harness.Config{AllowFloor: true, DataDir: data, Roots: []string{ws}, Provider: provider.NewScripted(&protocol.Turn{Text: "Done."}), NoTakeover: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.Decide(t.Context(), id, &protocol.Decision{Approve: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Run(run).Resume(t.Context(), harness.WithDecision(id, &protocol.Decision{Reason: "changed my mind"})); !errors.Is(err, protocol.ErrRunFinished) {
			t.Errorf("a denial after an approval = %v, want ErrRunFinished", err)
		}
		res, err := cl.Run(run).Resume(t.Context(), harness.WithDecision(id, &protocol.Decision{Approve: true}))
		if err != nil || res.Outcome != protocol.OutcomeFinished {
			t.Errorf("the same approval again = %+v, %v; want the run carried on to finished", res, err)
		}
	})
}

// TestResumeFromStoredPolicy resumes a run under the policy stored with
// it: the one a resume recorded, not the contract's, and never one passed
// along.
func TestResumeFromStoredPolicy(t *testing.T) {
	const run = "stored"
	data, ws := pausedRun(t, run)
	frozen := &protocol.Policy{Layers: []protocol.Layer{{Name: "frozen", Rules: []protocol.Rule{{Act: "write", Effect: "deny", Pattern: "*.go"}}}}}
	if _, err := harness.ResumeFromStoredPolicy(t.Context(), run, harness.WithPolicy(frozen), finishingAgent(), harness.WithDataDir(data)); !errors.Is(err, protocol.ErrInvalidField) {
		t.Fatalf("ResumeFromStoredPolicy with a policy = %v, want ErrInvalidField", err)
	}
	// A resume under another policy records it; the run still waits.
	res, err := harness.Resume(t.Context(), run, harness.WithPolicy(frozen), finishingAgent(), harness.WithAllowFloor(), harness.WithDataDir(data))
	if err != nil || res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("resume under the frozen policy = %+v, %v; want still awaiting approval", res, err)
	}
	// Someone approves the edit while no process runs it.
	cl, err := harness.Start(t.Context(), harness.Config{AllowFloor: true, DataDir: data, Roots: []string{ws}, Provider: provider.NewScripted(), NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID(run, 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	_ = cl.Close() // a role still starting up reports the cancellation; nothing ran
	// The stored policy is the frozen one: the approval cannot cross its deny.
	res, err = harness.ResumeFromStoredPolicy(t.Context(), run, finishingAgent(), harness.WithDataDir(data))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeDenied || !strings.Contains(res.Reason, "frozen") {
		t.Errorf("resumed from the stored policy = %s (%s), want denied by the frozen layer", res.Outcome, res.Reason)
	}
	if code, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(code), "return a - b") {
		t.Errorf("calc.go changed: %q", code)
	}
	if n := countKind(clustertest.ReadTrace(t, data, run), protocol.RecordPolicy); n != 1 {
		t.Errorf("trace has %d policy records, want the one Resume recorded", n)
	}
}
