package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// Approver answers an action the policy asks a person about. It returns a
// decision now, or nil to defer to a person: the action is then recorded
// in the approvals bucket and the run pauses, holding nothing, until a
// decision arrives there (harness approve, harness deny, or a plain NATS
// client writing the decision). An error defers too.
type Approver interface {
	Decide(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error)
}

// Durable defers every action to a person. It is the default.
type Durable struct{}

// Decide returns nil: a person decides, durably.
func (Durable) Decide(context.Context, *protocol.Pending) (*protocol.Decision, error) {
	return nil, nil
}

// ApproveAll approves every action as asked. For tests and trusted setups.
type ApproveAll struct{}

// Decide approves.
func (ApproveAll) Decide(context.Context, *protocol.Pending) (*protocol.Decision, error) {
	return &protocol.Decision{Approve: true, By: "approve-all", Time: time.Now().UTC()}, nil
}

// DenyAll denies every action; the model hears "no approver available".
type DenyAll struct{}

// Decide denies.
func (DenyAll) Decide(context.Context, *protocol.Pending) (*protocol.Decision, error) {
	return &protocol.Decision{Reason: "no approver available", By: "deny-all", Time: time.Now().UTC()}, nil
}

// ApproverFunc adapts a function to an Approver.
type ApproverFunc func(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error)

// Decide calls f.
func (f ApproverFunc) Decide(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error) {
	return f(ctx, p)
}

// Pausing for a person and carrying on with the decision.

// pause records that the step waits for a person: the pending action in
// the approvals bucket, a paused record in the trace, the run paused in the
// index. It reports whether a decision was already there, so the run goes
// on at once.
func (d *driver) pause(ctx context.Context, p *protocol.Pending) bool {
	s := d.s
	id := pendingID(s.run, p)
	// Recording it again is harmless: the same pending action, and any
	// decision already there is kept.
	var ap *protocol.Approval
	err := d.persist(ctx, "record the pending action", func() (err error) {
		ctx, cancel := jsCall(ctx)
		defer cancel()
		ap, err = d.c.approvals.Defer(ctx, id, p)
		return err
	}, "approval", id)
	if err != nil {
		d.log.Error("record the pending action", "approval", id, "err", err)
		d.finish(ctx, protocol.OutcomeFailed, "the pending action could not be recorded: "+err.Error())
		return false
	}
	why := fmt.Sprintf("waiting for a person to approve %s %q: harness approve %s or harness deny %s --reason ...", p.Act, p.Target, id, id)
	rec := &protocol.Record{Kind: protocol.RecordPaused, Step: s.step, Approval: id, Outcome: protocol.OutcomeAwaitingApproval, Reason: why}
	if err := d.append(ctx, rec); err != nil {
		d.log.Error("record the pause", "err", err)
		return false
	}
	fault.Hit(fault.DuringApprovalPause)
	_ = s.apply(rec)
	if ap.Decision != nil {
		return true // decided before the pause was seen: it still counts
	}
	d.c.putSettled(ctx, d.pausedState(why))
	d.log.Info("run paused", "approval", id)
	// The run holds nothing while it waits: its lease is given back, not
	// handed over (a lease handed over is taken over at once, by a driver
	// that would find the run paused and leave it again).
	d.settled = true
	return false
}

// pendingOf rebuilds the pending action of an approval id from the last
// committed step, whose turn holds the call.
func (d *driver) pendingOf(id string) (*protocol.Pending, error) {
	_, step, call, err := protocol.ParseApprovalID(id)
	if err != nil {
		return nil, err
	}
	if m := d.s.lastTurn(); m != nil && call < len(m.ToolCalls) {
		c, failed := d.asRead(&m.ToolCalls[call]) // a read_skill call waits as the read of its file
		if failed != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: the call of approval %s names no skill", d.s.run, id)
		}
		v, _ := d.verdict(c)
		return d.pending(step, call, c, v), nil
	}
	return nil, protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: no call for approval %s", d.s.run, id)
}

// pending describes a call for the person who decides it: exactly what it
// would do.
func (d *driver) pending(step, i int, call *protocol.ToolCall, v policy.Verdict) *protocol.Pending {
	return &protocol.Pending{Run: d.s.run, Step: step, Call: i, Tool: call.Name, Arguments: call.Arguments,
		Act: v.Act.String(), Target: v.Target, Shown: shown(call), Rule: v.Rule, Layer: v.Layer, Time: time.Now().UTC()}
}

// shown is what a person deciding a call sees: the content a write would
// produce, the edit, the command, the paths staged, the commit message.
func shown(call *protocol.ToolCall) string {
	var a struct {
		Path    string   `json:"path"`
		Content string   `json:"content"`
		Search  string   `json:"search"`
		Replace string   `json:"replace"`
		Argv    []string `json:"argv"`
		Paths   []string `json:"paths"`
		Message string   `json:"message"`
	}
	_ = json.Unmarshal(call.Arguments, &a)
	switch call.Name {
	case "git_add":
		return "stage for the next commit: " + strings.Join(a.Paths, ", ")
	case "git_commit":
		return "commit what is staged, with the message:\n" + a.Message
	case "write_file":
		return fmt.Sprintf("write %s (%d bytes):\n%s", a.Path, len(a.Content), a.Content)
	case "edit_file":
		return fmt.Sprintf("edit %s, replacing:\n%s\nwith:\n%s", a.Path, a.Search, a.Replace)
	case "exec":
		return "run: " + strings.Join(a.Argv, " ")
	}
	return call.Name + " " + string(call.Arguments)
}

// rememberRules are the rules a person's "remember" adds for the rest of
// the run: an allow of exactly what was approved (for exec, the program and
// the command, since both are checked).
func rememberRules(v policy.Verdict, call *protocol.ToolCall) []protocol.Rule {
	rules := []protocol.Rule{{Act: v.Act.String(), Effect: "allow", Pattern: v.Target}}
	if v.Act == policy.Exec {
		var a struct {
			Argv []string `json:"argv"`
		}
		if json.Unmarshal(call.Arguments, &a) == nil && len(a.Argv) > 0 {
			rules = []protocol.Rule{{Act: "exec", Effect: "allow", Pattern: a.Argv[0]},
				{Act: "exec", Effect: "allow", Pattern: strings.Join(a.Argv, " ")}}
		}
	}
	return rules
}

func decisionWord(d *protocol.Decision) string {
	if d.Approve {
		return "approve"
	}
	return "deny"
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// decide applies a person's decision to the paused call: it performs the
// approved action (rewritten, if the person rewrote it) after checking it
// against the policy again, or ends the run denied. It reports whether the
// run goes on.
func (d *driver) decide(ctx context.Context, ap *protocol.Approval) bool {
	s, p, dec := d.s, ap.Pending, ap.Decision
	rec := &protocol.Record{Kind: protocol.RecordDecision, Step: s.step, Approval: ap.ID, Decision: dec}
	d.c.emit(s.run, s.step, protocol.EventDecided, &protocol.Event{Tool: p.Tool, Target: p.Target, Approval: ap.ID, Text: decisionWord(dec)})
	var outcome protocol.Outcome
	var why string
	switch {
	case p.Tool == "" && !dec.Approve:
		outcome, why = protocol.OutcomeDenied, fmt.Sprintf("a person denied calling the model provider at %s: %s", p.Target, orWord(dec.Reason, "no reason given"))
	case p.Tool == "":
		// The provider's endpoint: nothing to perform, an allow to
		// remember, unless a deny rule covers it now (the net default does
		// not: a worker allows its own endpoints over it).
		if v := d.pol.Check(policy.Net, p.Target); v.Effect == policy.Deny && !v.ByDefault() {
			outcome, why = protocol.OutcomeDenied, fmt.Sprintf("the approved provider endpoint %s is denied by the policy (%s)", p.Target, v.DecidedBy())
		} else {
			rec.Remember = []protocol.Rule{hostRule(p.Target)}
		}
	case !dec.Approve:
		rec.Note = fmt.Sprintf("[%s denied by a person] %q: %s", p.Act, p.Target, orWord(dec.Reason, "no reason given"))
		outcome, why = protocol.OutcomeDenied, fmt.Sprintf("a person denied %s %q: %s", p.Act, p.Target, orWord(dec.Reason, "no reason given"))
	default:
		call := &protocol.ToolCall{ID: ap.ID, Name: p.Tool, Arguments: p.Arguments}
		if dec.Rewrite != nil {
			call.Arguments = dec.Rewrite
		}
		v, bad := d.verdict(call)
		switch {
		case bad != "":
			rec.Note = "[approved, but the rewritten call cannot run] " + bad
		case v.Effect == policy.Deny:
			// An approval cannot move an action across a deny, whether the
			// deny came with a rewrite or while the run was paused.
			rec.Note = v.Refusal()
			outcome, why = protocol.OutcomeDenied, fmt.Sprintf("the approved action %s %q is denied by the policy (%s)", v.Act, v.Target, v.DecidedBy())
		default:
			obs := d.dispatch(ctx, s.step, ap.ID+".approved", call, ap.ID)
			rec.Observations = []protocol.Observation{*obs}
			rec.Changed = obs.Changed
			if dec.Remember {
				rec.Remember = rememberRules(v, call)
			}
			rec.Note = fmt.Sprintf("[approved by a person] %s %q:\n%s", v.Act, v.Target, obs.Content)
		}
	}
	fault.Hit(fault.BeforeCommit)
	if err := d.append(ctx, d.c.blobs.Slim(ctx, rec, d.c.cfg.InlineLimit)); err != nil {
		d.log.Error("record decision", "approval", ap.ID, "err", err)
		return false
	}
	_ = s.apply(rec)
	if err := d.compilePolicy(); err != nil {
		d.finish(ctx, protocol.OutcomeFailed, err.Error())
		return false
	}
	if outcome != "" {
		d.finish(ctx, outcome, why)
		return false
	}
	d.c.putState(ctx, d.runningState())
	return true
}
