package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// askContract has no rule for writes or commands, so every write and
// every command asks a person.
func askContract(t *testing.T, root string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "Fix Add in calc.go.",
		"workspace":    map[string]string{"root": root},
		"verification": map[string]any{"none": map[string]any{}},
		"policy":       map[string]any{"defaults": map[string]string{"read": "allow", "write": "ask", "exec": "ask", "net": "deny"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func editCall(id, search, replace string) protocol.ToolCall {
	args, _ := json.Marshal(map[string]string{"path": "calc.go", "search": search, "replace": replace})
	return protocol.ToolCall{ID: id, Name: "edit_file", Arguments: args}
}

// askingAgent fixes Add (a write the policy asks about), then, when
// twice is set, edits the same file again, then stops.
func askingAgent(twice bool) *provider.Scripted {
	return askingAgentWith(editCall("fix", "return a - b", "return a + b"), twice)
}

// askingAgentWith makes first call (which the policy asks about), then,
// when twice is set, edits calc.go's comment, then stops.
func askingAgentWith(first protocol.ToolCall, twice bool) *provider.Scripted {
	turns := []*protocol.Turn{{Text: "Fixing Add.", ToolCalls: []protocol.ToolCall{first}}}
	if twice {
		turns = append(turns, &protocol.Turn{Text: "Documenting it.", ToolCalls: []protocol.ToolCall{editCall("doc", "// Add returns", "// Add returns, fixed,")}})
	}
	turns = append(turns, &protocol.Turn{Text: "Done."})
	return provider.NewScripted(turns...)
}

// waitSettled polls until the run is completed or failed.
func waitSettled(t *testing.T, c *harness.Client, run string) *protocol.RunState {
	t.Helper()
	var st *protocol.RunState
	waitFor(t, 30*time.Second, func() error {
		var err error
		st, err = c.Status(t.Context(), run)
		if err != nil {
			return err
		}
		if st.Status != protocol.StatusCompleted && st.Status != protocol.StatusFailed {
			return errorf("run %s is %s", run, st.Status)
		}
		return nil
	})
	return st
}

func waitPaused(t *testing.T, c *harness.Client, run string) *protocol.RunState {
	t.Helper()
	var st *protocol.RunState
	waitFor(t, 30*time.Second, func() error {
		var err error
		st, err = c.Status(t.Context(), run)
		if err != nil {
			return err
		}
		if st.Status != protocol.StatusPaused {
			return errorf("run %s is %s", run, st.Status)
		}
		return nil
	})
	return st
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
			ws := copyDir(t, "examples/fix-a-test/workspace")
			agent := askingAgent(tt.twice)
			if tt.first != nil {
				agent = askingAgentWith(*tt.first, tt.twice)
			}
			cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: agent})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			const run = "ask"
			id := protocol.ApprovalID(run, 1, 0)
			d := tt.decision
			if tt.early {
				if _, err := cl.Decide(t.Context(), id, &d); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cl.Submit(t.Context(), askContract(t, ws), run); err != nil {
				t.Fatal(err)
			}
			if !tt.early {
				st := waitPaused(t, cl.Client, run)
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
				waitFor(t, 30*time.Second, func() error {
					var err error
					if st, err = cl.Status(t.Context(), run); err != nil || st.Status != protocol.StatusPaused || st.Step < 2 {
						return errorf("state %+v, %v", st, err)
					}
					return nil
				})
			} else {
				st = waitSettled(t, cl.Client, run)
			}
			if st.Outcome != tt.want {
				t.Fatalf("outcome = %s (%s), want %s", st.Outcome, st.Reason, tt.want)
			}
			code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
			if err != nil || strings.Count(string(code), tt.wantCode) != 1 || strings.Count(string(code), "\treturn ") != 1 {
				t.Errorf("calc.go = %q, want %q performed once", code, tt.wantCode)
			}
			recs, err := cl.Trace(t.Context(), run)
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
	ws := copyDir(t, "examples/fix-a-test/workspace")
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: askingAgent(false), NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Submit(t.Context(), askContract(t, ws), "repolicy"); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, cl.Client, "repolicy")
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("repolicy", 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	stricter := &protocol.Policy{Layers: []protocol.Layer{{Name: "frozen", Rules: []protocol.Rule{{Act: "write", Effect: "deny", Pattern: "*.go"}}}}}
	res, err := cl.ResumeWith(t.Context(), "repolicy", stricter)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeDenied || !strings.Contains(res.Reason, "frozen") {
		t.Fatalf("resumed run = %s (%s), want denied by the new layer", res.Outcome, res.Reason)
	}
	recs, err := cl.Trace(t.Context(), "repolicy")
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
		t.Errorf("the trace does not record the new policy: %v", recordKinds(recs))
	}
	if code, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(code), "return a - b") {
		t.Errorf("calc.go changed: %q", code)
	}
}

// TestDecideOverPlainNATS decides an approval with a plain NATS request on
// harness.decide.<id>, as `nats req` would.
func TestDecideOverPlainNATS(t *testing.T) {
	ws := copyDir(t, "examples/fix-a-test/workspace")
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: askingAgent(false)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Submit(t.Context(), askContract(t, ws), "nats-decided"); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, cl.Client, "nats-decided")
	nc := cl.Conn()
	bad, err := nc.Request("harness.decide.nats-decided.1.0", []byte(`{"approve":true,"maybe":1}`), 5*time.Second)
	if err != nil || !strings.Contains(string(bad.Data), `"malformed"`) {
		t.Fatalf("a malformed decision got %v; want a malformed error", err)
	}
	m, err := nc.Request("harness.decide.nats-decided.1.0", []byte(`{"approve":true}`), 5*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"approve":true`) {
		t.Fatalf("decide = %s, %v", m.Data, err)
	}
	if st := waitSettled(t, cl.Client, "nats-decided"); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s (%s), want finished", st.Outcome, st.Reason)
	}
}

// bucketLoser is a provider that, on its first call, deletes the approvals
// bucket and brings it back a moment later: the pending action its turn
// asks about is due while JetStream cannot take it, as when NATS is
// restarting.
type bucketLoser struct {
	provider.Provider
	js   jetstream.JetStream
	once sync.Once
	back chan error
}

func (b *bucketLoser) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	b.once.Do(func() {
		if err := b.js.DeleteKeyValue(ctx, streams.BucketApprovals); err != nil {
			b.back <- err
			return
		}
		go func() {
			time.Sleep(1500 * time.Millisecond)
			_, err := streams.Ensure(context.Background(), b.js, streams.Config{})
			b.back <- err
		}()
	})
	return b.Provider.Complete(ctx, req)
}

// TestPauseOutlastsTheApprovalsBucket has the approvals bucket missing
// when a run pauses: the coordinator keeps trying to record the pending
// action instead of failing the run, the run pauses once the bucket is
// back, and a decision then carries it on.
func TestPauseOutlastsTheApprovalsBucket(t *testing.T) {
	ws := copyDir(t, "examples/fix-a-test/workspace")
	loser := &bucketLoser{Provider: askingAgent(false), back: make(chan error, 1)}
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: loser})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if loser.js, err = jetstream.New(cl.Conn()); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Submit(t.Context(), askContract(t, ws), "bucket-lost"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-loser.back:
		if err != nil {
			t.Fatalf("losing and restoring the approvals bucket: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent was never called")
	}
	waitPaused(t, cl.Client, "bucket-lost")
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("bucket-lost", 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if st := waitSettled(t, cl.Client, "bucket-lost"); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s (%s), want finished", st.Outcome, st.Reason)
	}
	code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
	if err != nil || strings.Count(string(code), "return a + b") != 1 {
		t.Errorf("calc.go = %q, want the approved fix applied once", code)
	}
}
