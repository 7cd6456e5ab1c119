package faults

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/tools"
)

// The trace checker: what a run's trace must say of the run, held against
// its status, the budget ledger and its workspace. Each check returns what
// it found wrong, in words, and nothing for a sound trace.

// CheckShape checks a finished run's trace record by record: one started
// record first; steps numbered 1, 2, 3... with none repeated or skipped,
// each with an observation per call; pauses and decisions belonging to the
// last step; one finished record, last, with the status's step count.
func CheckShape(recs []protocol.Record, st *protocol.RunState) []string {
	var out []string
	if len(recs) == 0 || recs[0].Kind != protocol.RecordStarted {
		return []string{"the trace does not begin with a started record"}
	}
	step := 0
	for i, r := range recs[1:] {
		switch r.Kind {
		case protocol.RecordStarted:
			out = append(out, fmt.Sprintf("record %d is a second started record", i+1))
		case protocol.RecordStep:
			if r.Step != step+1 {
				out = append(out, fmt.Sprintf("record %d is step %d after step %d", i+1, r.Step, step))
			}
			step = r.Step
			if r.Turn == nil || len(r.Observations) != len(r.Turn.ToolCalls) {
				out = append(out, fmt.Sprintf("step %d lacks its turn or an observation per call", r.Step))
				continue
			}
			for j, o := range r.Observations {
				if o.CallID != r.Turn.ToolCalls[j].ID {
					out = append(out, fmt.Sprintf("step %d observation %d answers %q, not %q", r.Step, j, o.CallID, r.Turn.ToolCalls[j].ID))
				}
			}
		case protocol.RecordPaused, protocol.RecordDecision, protocol.RecordPolicy:
			if r.Step > step {
				out = append(out, fmt.Sprintf("record %d (%s) is for step %d, after step %d", i+1, r.Kind, r.Step, step))
			}
		case protocol.RecordFinished:
			if i+1 != len(recs)-1 {
				out = append(out, fmt.Sprintf("record %d is a finished record before the end", i+1))
			}
		}
	}
	last := recs[len(recs)-1]
	if last.Kind != protocol.RecordFinished || last.Outcome != st.Outcome || last.Step != step || st.Step != step {
		out = append(out, fmt.Sprintf("the trace ends with %s %s at step %d after %d steps; the status says %s at step %d",
			last.Kind, last.Outcome, last.Step, step, st.Outcome, st.Step))
	}
	return out
}

// CheckSpend checks what a run spent against its committed steps: the
// tokens and the cost in its status are the sums over its step records,
// and each step's running totals add up. The budget ledger's totals for the
// run belong here too: they must equal the same sums.
func CheckSpend(st *protocol.RunState, recs []protocol.Record) []string {
	var out []string
	var tokens, cost int64
	for _, r := range recs {
		if r.Kind != protocol.RecordStep || r.Turn == nil {
			continue
		}
		tokens += r.Turn.Usage.Total()
		if r.Tokens != tokens {
			out = append(out, fmt.Sprintf("step %d records %d tokens so far, the steps sum to %d", r.Step, r.Tokens, tokens))
		}
		if r.Cost == nil || !r.Cost.Priced || r.Cost.Micros <= 0 {
			out = append(out, fmt.Sprintf("step %d has no priced cost: %+v", r.Step, r.Cost))
			continue
		}
		cost += r.Cost.Micros
		if r.Cost.TotalMicros != cost {
			out = append(out, fmt.Sprintf("step %d records %d micros so far, the steps sum to %d", r.Step, r.Cost.TotalMicros, cost))
		}
	}
	if st.Tokens != tokens || st.CostMicros != cost {
		out = append(out, fmt.Sprintf("the status says %d tokens and %d micros; the committed steps sum to %d and %d", st.Tokens, st.CostMicros, tokens, cost))
	}
	return out
}

// CheckLedger holds the budget ledger's totals for a run (the root of its
// own tree) against its trace: what the ledger charged is the sum of the
// draws the trace records, each provider call once, and nothing is left
// held.
func CheckLedger(ctx context.Context, l ledger.Ledger, run string, recs []protocol.Record) []string {
	var want ledger.Usage
	keys := map[string]bool{}
	var out []string
	for _, r := range recs {
		for _, d := range r.Draws {
			if keys[d.Key] {
				out = append(out, fmt.Sprintf("the draw %s is recorded twice", d.Key))
			}
			keys[d.Key] = true
			want = want.Add(ledger.Usage{InputTokens: d.InputTokens, OutputTokens: d.OutputTokens, CostMicros: d.CostMicros, Steps: d.Steps})
		}
		if r.Kind == protocol.RecordStep && len(r.Draws) == 0 {
			out = append(out, fmt.Sprintf("step %d records no draw", r.Step))
		}
	}
	tot, err := l.Totals(ctx, run)
	if err != nil {
		return append(out, fmt.Sprintf("ledger totals: %v", err))
	}
	if tot.Spent != want {
		out = append(out, fmt.Sprintf("the ledger charged %+v, the trace's draws sum to %+v", tot.Spent, want))
	}
	if tot.Reserved != (ledger.Usage{}) {
		out = append(out, fmt.Sprintf("the ledger still holds %+v for the finished run", tot.Reserved))
	}
	return out
}

// Op is one tool call of a trace as a replay applies it.
type Op struct {
	Call    protocol.ToolCall
	Obs     protocol.Observation
	Unknown bool // cut off: it may or may not have taken effect
}

// ReplayOps lists the calls a trace says were carried out, in order: every
// call of every step that ran (not refused, not waiting for a person, not
// failed), and every action a person approved, with the arguments the
// person saw or rewrote. A call whose outcome the trace does not know (the
// sandboxer died under it, or never answered) is marked unknown. Errors:
// a step without one observation per call, a decision on no call of the
// trace, an observation status the checker does not know.
func ReplayOps(recs []protocol.Record) ([]Op, error) {
	steps := map[int]*protocol.Record{}
	var ops []Op
	add := func(call protocol.ToolCall, o protocol.Observation) error {
		switch o.State() {
		case protocol.CallAwaitingApproval, protocol.CallNotRun, protocol.CallRefused, protocol.CallFailed:
		case protocol.CallIndeterminate, protocol.CallUnanswered:
			ops = append(ops, Op{Call: call, Obs: o, Unknown: true})
		case protocol.CallOK:
			ops = append(ops, Op{Call: call, Obs: o})
		default:
			return fmt.Errorf("call %s: observation status %q is not one the checker knows", call.ID, o.State())
		}
		return nil
	}
	for i := range recs {
		r := &recs[i]
		switch r.Kind {
		case protocol.RecordStep:
			if r.Turn == nil || len(r.Observations) != len(r.Turn.ToolCalls) {
				return nil, fmt.Errorf("step %d has no turn or not one observation per call", r.Step)
			}
			steps[r.Step] = r
			for j, c := range r.Turn.ToolCalls {
				if err := add(c, r.Observations[j]); err != nil {
					return nil, err
				}
			}
		case protocol.RecordDecision:
			if r.Decision == nil || !r.Decision.Approve || len(r.Observations) == 0 {
				continue
			}
			_, step, ci, err := protocol.ParseApprovalID(r.Approval)
			if err != nil {
				return nil, err
			}
			s := steps[step]
			if s == nil || ci >= len(s.Turn.ToolCalls) {
				return nil, fmt.Errorf("decision on %s names no call of the trace", r.Approval)
			}
			c := s.Turn.ToolCalls[ci]
			if r.Decision.Rewrite != nil {
				c.Arguments = r.Decision.Rewrite
			}
			if err := add(c, r.Observations[0]); err != nil {
				return nil, err
			}
		}
	}
	return ops, nil
}

// ReplayExplains replays ops from the initial workspace, with the same
// tools the sandboxer runs, into directories under base, and returns the
// directory whose result equals final, or "" when none does. Each read is
// checked against what the trace recorded it saw. A call the trace does not
// know the outcome of is tried both ways, applied and not; the trace
// explains the workspace when one way gives it. So a change that landed
// twice, or one the trace says landed and did not, is caught, while a
// change cut off by a crash counts at most once.
func ReplayExplains(ctx context.Context, ops []Op, base string, initial, final map[string]string) (string, error) {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, "w")
	if err != nil {
		return "", err
	}
	if err := WriteTree(dir, initial); err != nil {
		return "", err
	}
	return explore(ctx, ops, base, dir, final)
}

func explore(ctx context.Context, ops []Op, base, dir string, final map[string]string) (string, error) {
	for i, op := range ops {
		if op.Unknown {
			alt, err := os.MkdirTemp(base, "w")
			if err != nil {
				return "", err
			}
			tree, err := ReadTree(dir)
			if err != nil {
				return "", err
			}
			if err := WriteTree(alt, tree); err != nil {
				return "", err
			}
			if ok, err := applyOp(ctx, alt, op); err != nil {
				return "", err
			} else if ok {
				if m, err := explore(ctx, ops[i+1:], base, alt, final); m != "" || err != nil {
					return m, err
				}
			}
			continue // and the way where it never took effect
		}
		ok, err := applyOp(ctx, dir, op)
		if err != nil || !ok {
			return "", err
		}
	}
	tree, err := ReadTree(dir)
	if err != nil || !maps.Equal(tree, final) {
		return "", err
	}
	return dir, nil
}

// applyOp runs one call in dir. It reports false when the call cannot
// have gone this way: it fails where the trace says it ran, or a read sees
// other content than the trace recorded.
func applyOp(ctx context.Context, dir string, op Op) (bool, error) {
	tool, ok := tools.Builtins().Get(op.Call.Name)
	if !ok {
		return false, fmt.Errorf("the trace calls %q, which is no built-in tool", op.Call.Name)
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		return false, err
	}
	defer ws.Close()
	env := &tools.Env{Workspace: ws, Sandbox: floor.New(), Limits: protocol.Limits{}.WithDefaults(), CmdEnv: sandbox.MinimalEnv()}
	out, err := tool.Invoke(ctx, env, op.Call.Arguments)
	if err != nil {
		return op.Unknown, nil // a cut-off call that fails here had no effect either way
	}
	if op.Call.Name == "read_file" && !op.Unknown && out.Content != op.Obs.Content {
		return false, nil
	}
	return true, nil
}

// ReplayOutcome folds the outcome a trace's records lead to: denied by a
// person's denial, success by a passed verification.
func ReplayOutcome(recs []protocol.Record) protocol.Outcome {
	for _, r := range recs {
		switch {
		case r.Kind == protocol.RecordDecision && r.Decision != nil && !r.Decision.Approve:
			return protocol.OutcomeDenied
		case r.Kind == protocol.RecordStep && r.Check != nil && r.Check.Passed:
			return protocol.OutcomeSuccess
		}
	}
	return ""
}

// WriteTree writes files (relative path → content) under dir.
func WriteTree(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadTree reads every regular file under dir (relative path → content).
func ReadTree(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out, err
}
