package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// heldAgent is a provider whose calls wait until release is closed.
type heldAgent struct {
	provider.Provider
	release chan struct{}
}

func (h *heldAgent) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Provider.Complete(ctx, req)
}

// pausedAsk starts a cluster serving a copy of the example's workspace to
// the asking agent, without takeovers when noTakeover is set, submits
// AskContract as run and waits until the run pauses on the agent's edit.
func pausedAsk(t *testing.T, run string, noTakeover bool) (*harness.Cluster, string) {
	t.Helper()
	ws := clustertest.ExampleWorkspace(t)
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: clustertest.AskingAgent(false), NoTakeover: noTakeover})
	if _, err := clustertest.SubmitJSON(t.Context(), cl, clustertest.AskContract(t, ws), run); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitPaused(t, cl.Client, run)
	return cl, ws
}

// TestDurableApproval pauses a run on an action the policy asks about,
// records a person's decision the way `harness approve` does, and checks
// the run carries on with exactly that decision.
func TestDurableApproval(t *testing.T) {
	writeCall := protocol.ToolCall{ID: "w", Name: "write_file", Arguments: json.RawMessage(`{"path":"calc.go","content":"package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"}`)}
	execCall := protocol.ToolCall{ID: "x", Name: "exec", Arguments: json.RawMessage(`{"argv":["sed","-i","s/a - b/a + b/","calc.go"]}`)}
	tests := []struct {
		name     string
		first    *protocol.ToolCall // default: the edit
		twice    bool
		decision protocol.Decision
		early    bool // decided before the run pauses
		want     protocol.Outcome
		wantCode string // calc.go's Add body afterwards
		pauses   int
	}{
		{name: "approve", decision: protocol.Decision{Approve: true}, want: protocol.OutcomeFinished, wantCode: "return a + b", pauses: 1},
		{name: "deny", decision: protocol.Decision{Reason: "not today"}, want: protocol.OutcomeDenied, wantCode: "return a - b", pauses: 1},
		{name: "rewrite", decision: protocol.Decision{Approve: true, Rewrite: json.RawMessage(`{"path":"calc.go","search":"return a - b","replace":"return b + a"}`)},
			want: protocol.OutcomeFinished, wantCode: "return b + a", pauses: 1},
		{name: "a rewrite cannot cross a deny", decision: protocol.Decision{Approve: true, Rewrite: json.RawMessage(`{"path":".env","search":"x","replace":"y"}`)},
			want: protocol.OutcomeDenied, wantCode: "return a - b", pauses: 1},
		{name: "remember allows the same write for the rest of the run", twice: true, decision: protocol.Decision{Approve: true, Remember: true},
			want: protocol.OutcomeFinished, wantCode: "return a + b", pauses: 1},
		{name: "without remember the same write asks again", twice: true, decision: protocol.Decision{Approve: true},
			want: protocol.OutcomeAwaitingApproval, wantCode: "return a + b", pauses: 2},
		{name: "a decision sent before the pause still counts", early: true, decision: protocol.Decision{Approve: true},
			want: protocol.OutcomeFinished, wantCode: "return a + b", pauses: 0},
		{name: "an approved write writes the content the person saw", first: &writeCall, decision: protocol.Decision{Approve: true},
			want: protocol.OutcomeFinished, wantCode: "return a + b", pauses: 1},
		{name: "an approved exec runs that command", first: &execCall, decision: protocol.Decision{Approve: true},
			want: protocol.OutcomeFinished, wantCode: "return a + b", pauses: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := clustertest.ExampleWorkspace(t)
			var agent provider.Provider = clustertest.AskingAgent(tt.twice)
			if tt.first != nil {
				agent = clustertest.AskingAgentWith(*tt.first, tt.twice)
			}
			release := make(chan struct{})
			if tt.early {
				// The model answers only once the early decision is in, so
				// it is made while the run is in its first step, unpaused.
				agent = &heldAgent{Provider: agent, release: release}
			} else {
				close(release)
			}
			cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: agent})
			const run = "ask"
			id := protocol.ApprovalID(run, 1, 0)
			d := tt.decision
			if _, err := cl.Decide(t.Context(), id, &d); !errors.Is(err, protocol.ErrUnknownRun) {
				t.Fatalf("a decision before the run exists = %v, want unknown_run", err)
			}
			if _, err := clustertest.SubmitJSON(t.Context(), cl, clustertest.AskContract(t, ws), run); err != nil {
				t.Fatal(err)
			}
			if tt.early {
				if _, err := cl.Decide(t.Context(), protocol.ApprovalID(run, 2, 0), &d); !errors.Is(err, protocol.ErrUnknownRun) {
					t.Fatalf("an early decision for a step the run has not reached = %v, want unknown_run", err)
				}
				if _, err := cl.Decide(t.Context(), id, &d); err != nil {
					t.Fatal(err)
				}
				close(release)
			}
			if !tt.early {
				st := clustertest.WaitPaused(t, cl.Client, run)
				if st.Outcome != protocol.OutcomeAwaitingApproval || !strings.Contains(st.Reason, "harness approve "+id) {
					t.Fatalf("paused state = %+v, want awaiting_approval naming %s", st, id)
				}
				aps, err := cl.Approvals(t.Context())
				if err != nil || len(aps) != 1 || aps[0].Pending == nil || !strings.Contains(aps[0].Pending.Shown, "a + b") {
					t.Fatalf("approvals = %+v, %v; want the pending edit showing what it would write", aps, err)
				}
				if _, err := cl.Decide(t.Context(), id, &d); err != nil {
					t.Fatal(err)
				}
				if _, err := cl.Decide(t.Context(), id, &d); err == nil {
					t.Error("a second decision on the same approval was accepted")
				}
			}
			var st *protocol.RunState
			if tt.want == protocol.OutcomeAwaitingApproval {
				testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
					var err error
					if st, err = cl.Run(run).Status(t.Context()); err != nil || st.Status != protocol.StatusPaused || st.Step < 2 {
						return fmt.Errorf("state %+v, %v", st, err)
					}
					return nil
				})
			} else {
				st = clustertest.WaitSettled(t, cl.Client, run)
			}
			if st.Outcome != tt.want {
				t.Fatalf("outcome = %s (%s), want %s", st.Outcome, st.Reason, tt.want)
			}
			code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
			if err != nil || strings.Count(string(code), tt.wantCode) != 1 || strings.Count(string(code), "\treturn ") != 1 {
				t.Errorf("calc.go = %q, want %q performed once", code, tt.wantCode)
			}
			recs, err := cl.Run(run).Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			pauses, decisions := 0, 0
			for _, r := range recs {
				switch r.Kind {
				case protocol.RecordPaused:
					pauses++
				case protocol.RecordDecision:
					decisions++
				}
			}
			// An early decision still leaves the pause and the decision in
			// the trace; it only never shows as paused.
			wantPauses := max(tt.pauses, 1)
			if pauses != wantPauses || decisions != 1 {
				t.Errorf("trace has %d pauses and %d decisions, want %d and 1", pauses, decisions, wantPauses)
			}
		})
	}
}

// TestResumeUnderAnotherPolicy approves a paused write, then resumes the
// run under a policy that denies it: the deny added while paused holds,
// and the new policy is in the trace.
func TestResumeUnderAnotherPolicy(t *testing.T) {
	cl, ws := pausedAsk(t, "repolicy", true)
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("repolicy", 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	stricter := &protocol.Policy{Layers: []protocol.Layer{{Name: "frozen", Rules: []protocol.Rule{{Act: "write", Effect: "deny", Pattern: "*.go"}}}}}
	res, err := cl.Run("repolicy").Resume(t.Context(), harness.WithPolicy(stricter))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeDenied || !strings.Contains(res.Reason, "frozen") {
		t.Fatalf("resumed run = %s (%s), want denied by the new layer", res.Outcome, res.Reason)
	}
	recs, err := cl.Run("repolicy").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r.Kind == protocol.RecordPolicy && r.Policy != nil && r.Policy.Layers[0].Name == "frozen" {
			found = true
		}
	}
	if !found {
		t.Errorf("the trace does not record the new policy: %v", clustertest.RecordKinds(recs))
	}
	if code, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(code), "return a - b") {
		t.Errorf("calc.go changed: %q", code)
	}
}

// TestDecideOverPlainNATS decides an approval with a plain NATS request on
// harness.decide.<id>, as `nats req` would.
func TestDecideOverPlainNATS(t *testing.T) {
	cl, _ := pausedAsk(t, "nats-decided", false)
	nc := cl.Conn()
	bad, err := nc.Request("harness.decide.nats-decided.1.0", []byte(`{"approve":true,"maybe":1}`), 5*time.Second)
	if err != nil || !strings.Contains(string(bad.Data), `"malformed"`) {
		t.Fatalf("a malformed decision got %v; want a malformed error", err)
	}
	m, err := nc.Request("harness.decide.nats-decided.1.0", []byte(`{"approve":true}`), 5*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"approve":true`) {
		t.Fatalf("decide = %s, %v", m.Data, err)
	}
	if st := clustertest.WaitSettled(t, cl.Client, "nats-decided"); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s (%s), want finished", st.Outcome, st.Reason)
	}
}

// bucketLoser is a provider that, on its first call, deletes the approvals
// bucket: the pending action its turn asks about is due while JetStream
// cannot take it, as when NATS is restarting. The test brings the bucket
// back once the coordinator has said it tries again.
type bucketLoser struct {
	provider.Provider
	js   jetstream.JetStream
	once sync.Once
	lost chan error
}

func (b *bucketLoser) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	b.once.Do(func() { b.lost <- b.js.DeleteKeyValue(ctx, wire.BucketApprovals) })
	return b.Provider.Complete(ctx, req)
}

// logSignal is a log handler that closes seen at the first record whose
// message is msg, and drops every record.
type logSignal struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logSignal) WithGroup(string) slog.Handler            { return h }

func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// TestPauseOutlastsTheApprovalsBucket has the approvals bucket missing
// when a run pauses: the coordinator keeps trying to record the pending
// action instead of failing the run, the run pauses once the bucket is
// back, and a decision then carries it on.
func TestPauseOutlastsTheApprovalsBucket(t *testing.T) {
	ws := clustertest.ExampleWorkspace(t)
	loser := &bucketLoser{Provider: clustertest.AskingAgent(false), lost: make(chan error, 1)}
	retried := &logSignal{msg: "record the pending action; trying again", seen: make(chan struct{})}
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: loser, Logger: slog.New(retried)})
	var err error
	if loser.js, err = jetstream.New(cl.Conn()); err != nil {
		t.Fatal(err)
	}
	if _, err := clustertest.SubmitJSON(t.Context(), cl, clustertest.AskContract(t, ws), "bucket-lost"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-loser.lost:
		if err != nil {
			t.Fatalf("deleting the approvals bucket: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent was never called")
	}
	// The bucket comes back only after the coordinator failed to record
	// the pending action and said it tries again.
	select {
	case <-retried.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the coordinator never said it tries again to record the pending action")
	}
	if st, err := cl.Run("bucket-lost").Status(t.Context()); err != nil || st.Status != protocol.StatusRunning {
		t.Fatalf("while the bucket is missing the run is %+v (%v), want it running", st, err)
	}
	if _, err := wire.Ensure(t.Context(), loser.js, wire.Config{}); err != nil {
		t.Fatalf("restoring the approvals bucket: %v", err)
	}
	clustertest.WaitPaused(t, cl.Client, "bucket-lost")
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("bucket-lost", 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if st := clustertest.WaitSettled(t, cl.Client, "bucket-lost"); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s (%s), want finished", st.Outcome, st.Reason)
	}
	code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
	if err != nil || strings.Count(string(code), "return a + b") != 1 {
		t.Errorf("calc.go = %q, want the approved fix applied once", code)
	}
}

// TestDecisionsOnlyForWhatExists sends decisions over plain NATS for ids
// that name nothing the run waits for or has reached, each refused with a
// coded error, and one for the pending action, recorded with who decided.
func TestDecisionsOnlyForWhatExists(t *testing.T) {
	cl, _ := pausedAsk(t, "asker", false)
	decide := func(id, body string) (*protocol.Approval, *protocol.Error) {
		t.Helper()
		m, err := cl.Conn().Request("harness.decide."+id, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("decide %s: %v", id, err)
		}
		var a struct {
			Approval *protocol.Approval `json:"approval"`
			Error    *protocol.Error    `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatalf("decide %s answered %s: %v", id, m.Data, err)
		}
		return a.Approval, a.Error
	}
	for _, tt := range []struct {
		id   string
		want protocol.Code
	}{
		{"ghost.1.0", protocol.CodeUnknownRun}, // no such run
		{"asker.2.0", protocol.CodeUnknownRun}, // a step the paused run has not reached
		{"asker.1.1", protocol.CodeUnknownRun}, // a call of step 1 that asked nobody
		{"asker.0.0", protocol.CodeUnknownRun}, // a provider endpoint nobody asked about
	} {
		if _, perr := decide(tt.id, `{"approve":true}`); perr == nil || perr.Code != tt.want {
			t.Errorf("decide %s = %v, want %s", tt.id, perr, tt.want)
		}
	}
	if ap, perr := decide("asker.1.0", `{"approve":true,"by":"alice"}`); perr != nil || ap.Decision == nil || ap.Decision.By != "alice" {
		t.Fatalf("decide the pending action = %+v, %v; want it decided by alice", ap, perr)
	}
	if _, perr := decide("asker.1.0", `{"approve":false}`); perr == nil || perr.Code != protocol.CodeRunFinished {
		t.Errorf("a second decision = %v, want run_finished", perr)
	}
	if st := clustertest.WaitSettled(t, cl.Client, "asker"); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s (%s), want finished", st.Outcome, st.Reason)
	}
	recs, err := cl.Run("asker").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Kind == protocol.RecordDecision && (r.Decision == nil || r.Decision.By != "alice") {
			t.Errorf("decision record = %+v, want it by alice", r.Decision)
		}
	}
	aps, err := cl.Approvals(t.Context())
	if err != nil || len(aps) != 1 {
		t.Errorf("approvals = %+v, %v; want the one decided, nothing for the refused ids", aps, err)
	}
}

// TestRememberAnswersAnAskRule approves, with remember, a write that an
// ask rule (not the default) asks about: the same write asks no more for
// the rest of the run.
func TestRememberAnswersAnAskRule(t *testing.T) {
	ws := clustertest.ExampleWorkspace(t)
	var c map[string]any
	if err := json.Unmarshal(clustertest.AskContract(t, ws), &c); err != nil {
		t.Fatal(err)
	}
	c["policy"] = map[string]any{
		"layers":   []map[string]any{{"name": "careful", "rules": []map[string]string{{"act": "write", "effect": "ask", "pattern": "calc.go"}}}},
		"defaults": map[string]string{"read": "allow", "write": "allow", "exec": "deny", "net": "deny"},
	}
	raw, _ := json.Marshal(c)
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: clustertest.AskingAgent(true)})
	if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, "remembers"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitPaused(t, cl.Client, "remembers")
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("remembers", 1, 0), &protocol.Decision{Approve: true, Remember: true}); err != nil {
		t.Fatal(err)
	}
	var st *protocol.RunState
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		var err error
		st, err = cl.Run("remembers").Status(t.Context())
		if err != nil || st.Status == protocol.StatusRunning || st.Status == protocol.StatusPaused && st.Step < 2 {
			return fmt.Errorf("state %+v, %v", st, err)
		}
		return nil
	})
	if st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s at step %d (%s), want finished: the remembered write asks no more", st.Outcome, st.Step, st.Reason)
	}
	code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
	if err != nil || !strings.Contains(string(code), "Add returns, fixed,") {
		t.Errorf("calc.go = %q, want both edits", code)
	}
}
