package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// blocking is a provider whose calls wait until they are abandoned,
// signalling each one it begins.
type blocking struct{ began chan struct{} }

func (b *blocking) Name() string { return "blocking" }

func (b *blocking) Complete(ctx context.Context, _ *protocol.CompletionRequest) (*protocol.Turn, error) {
	b.began <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func cancelContract(ws string, defaults *protocol.Defaults) *protocol.Contract {
	return &protocol.Contract{Task: "work until stopped", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Sandbox: protocol.SandboxSpec{Backend: "floor"},
		Budget: protocol.Budget{MaxSteps: 5, MaxTokens: 1 << 20},
		Policy: &protocol.Policy{Defaults: defaults,
			Layers: []protocol.Layer{{Name: "t", Rules: []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: "sh*"}}}}}}
}

// TestCancelWhileTheModelThinks cancels a run whose provider call is in
// flight: the run ends cancelled at once with who and why in its trace,
// and the abandoned call is charged at its estimate, in the record.
func TestCancelWhileTheModelThinks(t *testing.T) {
	ws := t.TempDir()
	p := &blocking{began: make(chan struct{}, 1)}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: p, NoTakeover: true, AllowFloor: true})
	h, err := cl.Submit(t.Context(), cancelContract(ws, nil), harness.WithRunID("thinking"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.began
	mark, err := h.Cancel(t.Context(), "ops:alice", "wrong branch")
	if err != nil {
		t.Fatal(err)
	}
	if mark.By != "ops:alice" || mark.Reason != "wrong branch" || mark.Run != h.ID() {
		t.Errorf("cancel = %+v, want by ops:alice for wrong branch", mark)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeCancelled || !strings.Contains(res.Reason, "ops:alice") || !strings.Contains(res.Reason, "wrong branch") {
		t.Fatalf("outcome = %s (%s), want cancelled by ops:alice: wrong branch", res.Outcome, res.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Kind != protocol.RecordFinished || last.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("last record = %s %s, want finished cancelled", last.Kind, last.Outcome)
	}
	if len(last.Draws) != 1 || last.Draws[0].Spend.InputTokens == 0 {
		t.Errorf("the abandoned call's charge = %+v, want one draw at its estimate", last.Draws)
	}
	// Again: the first cancel stands.
	again, err := h.Cancel(t.Context(), "ops:bob", "me too")
	if err != nil || again.By != "ops:alice" {
		t.Errorf("cancelling again = %+v, %v; want the first cancel, by ops:alice", again, err)
	}
	if _, err := cl.Run("no-such-run").Cancel(t.Context(), "", ""); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("cancel of a typo'd id = %v, want unknown_run", err)
	}
}

// TestCancelKillsTheCommand cancels a run while its command runs: the
// command's process is gone when the run has ended, long before its own
// end.
func TestCancelKillsTheCommand(t *testing.T) {
	ws := t.TempDir()
	script := `echo $$ > pid; sleep 300; echo late > late`
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "1", Name: "exec",
		Arguments: json.RawMessage(fmt.Sprintf(`{"argv":["sh","-c",%q]}`, script))}}})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, AllowFloor: true})
	c := cancelContract(ws, nil)
	c.Sandbox.Limits.WallSecs = 600
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("sleeping"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(ws, "pid"))
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	if _, err := h.Cancel(t.Context(), "", "too slow"); err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("outcome = %s (%s), want cancelled", res.Outcome, res.Reason)
	}
	testkit.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if err := syscall.Kill(pid, 0); err == nil {
			return fmt.Errorf("the command's process %d still runs", pid)
		}
		return nil
	})
}

// TestCancelPausedRun cancels a run that waits for a person and holds no
// driver; then a finished run cannot be cancelled.
func TestCancelPausedRun(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "1", Name: "write_file",
		Arguments: json.RawMessage(`{"path":"a.txt","content":"a"}`)}}}, &protocol.Turn{Text: "done"})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, AllowFloor: true})
	h, err := cl.Submit(t.Context(), cancelContract(ws, &protocol.Defaults{Write: "ask"}), harness.WithRunID("paused"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("first wait = %+v, %v; want awaiting_approval", res, err)
	}
	if _, err := h.Cancel(t.Context(), "", ""); err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil || res.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("after the cancel = %+v, %v; want cancelled", res, err)
	}
	// Its decision comes too late.
	if _, err := h.Decide(t.Context(), protocol.ApprovalID(h.ID(), 1, 0), &protocol.Decision{Approve: true}); !errors.Is(err, protocol.ErrRunFinished) {
		t.Errorf("a decision after the cancel = %v, want run_finished", err)
	}

	done, err := cl.Submit(t.Context(), cancelContract(ws, &protocol.Defaults{Write: "allow"}), harness.WithRunID("done"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := done.Cancel(t.Context(), "", ""); !errors.Is(err, protocol.ErrRunFinished) {
		t.Errorf("cancel of a finished run = %v, want run_finished", err)
	}
}

// TestObserverCancels has an observer return FlowCancel at the first tool
// call: the run ends cancelled by "observer" instead of running its steps.
func TestObserverCancels(t *testing.T) {
	ws := t.TempDir()
	p := &blocking{began: make(chan struct{}, 8)}
	res, err := harness.Run(t.Context(), cancelContract(ws, nil), harness.WithProvider(p), harness.WithDataDir(t.TempDir()), harness.WithAllowFloor(),
		harness.WithFlow(func(ev *protocol.Event) harness.Flow {
			if ev.Kind == protocol.EventStep || ev.Kind == protocol.EventStarted {
				return harness.FlowCancel
			}
			return harness.FlowContinue
		}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeCancelled || !strings.Contains(res.Reason, "observer") {
		t.Fatalf("outcome = %s (%s), want cancelled by the observer", res.Outcome, res.Reason)
	}
}
