package coordinator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// act decides one tool call and, if allowed, has the sandboxer carry it
// out. It returns the observation, and the pending action when the policy
// asks a person and no approver answered at once: then nothing ran, and the
// step ends waiting. Nothing here fails the run: every failure is an
// observation the model can act on.
func (d *driver) act(ctx context.Context, step, i int, call *protocol.ToolCall, rec *protocol.Record) (*protocol.Observation, *protocol.Pending) {
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	if !d.offers(call.Name) {
		obs.Status, obs.IsError = protocol.CallFailed, true
		obs.Content = fmt.Sprintf("[unknown tool] %q is not a tool here; the tools are: %s", call.Name, d.toolNames())
		return obs, nil
	}
	if call.Name == RememberTool && d.remembering {
		return d.remember(ctx, step, i, call), nil // not a path act: no policy check
	}
	// A read_skill call is judged and carried out as the read of its
	// skill's file; its observation keeps the name the model called.
	name := call.Name
	call, failed := d.asRead(call)
	if failed != nil {
		return failed, nil
	}
	dispatch := func(opID, approval string) *protocol.Observation {
		o := d.dispatch(ctx, step, opID, call, approval)
		o.Tool = name
		return o
	}
	v, bad := d.verdict(call)
	if bad != "" {
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, bad
		return obs, nil
	}
	d.c.emit(d.s.run, step, protocol.EventVerdict, &protocol.Event{Tool: call.Name, Target: v.Target, Effect: v.Effect.String(), Rule: v.Rule, Layer: v.Layer})
	if v.Effect == policy.Ask {
		p := d.pending(step, i, call, v)
		id := protocol.ApprovalID(d.s.run, step, i)
		d.c.emit(d.s.run, step, protocol.EventApproval, &protocol.Event{Tool: call.Name, Target: v.Target, Approval: id})
		dec, err := d.c.cfg.Approver.Decide(ctx, p)
		if err != nil {
			d.log.Warn("approver failed; deferring to a person", "approval", id, "err", err)
		}
		if dec == nil {
			obs.Status, obs.Approval = protocol.CallAwaitingApproval, id
			// The id stays out of what the model reads: it names the run, and
			// a transcript must not depend on which run it is.
			obs.Content = fmt.Sprintf("[awaiting approval] %s %q needs a person's approval; the run pauses here until they decide.", v.Act, v.Target)
			return obs, p
		}
		d.c.emit(d.s.run, step, protocol.EventDecided, &protocol.Event{Tool: call.Name, Target: v.Target, Approval: id, Text: decisionWord(dec)})
		rec.Decided = append(rec.Decided, protocol.Decided{Approval: id, Decision: dec})
		if !dec.Approve {
			obs.Status, obs.IsError = protocol.CallRefused, true
			obs.Content = fmt.Sprintf("[%s denied] %q: %s", v.Act, v.Target, orWord(dec.Reason, "a person said no"))
			return obs, nil
		}
		if dec.Rewrite != nil {
			call = &protocol.ToolCall{ID: call.ID, Name: call.Name, Arguments: dec.Rewrite}
			if v, bad = d.verdict(call); bad != "" {
				obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, bad
				return obs, nil
			}
		}
		if v.Effect == policy.Deny {
			return d.refuse(step, call, v, obs), nil
		}
		if dec.Remember {
			rec.Remember = append(rec.Remember, rememberRules(v, call)...)
		}
		return dispatch(fmt.Sprintf("%s.%d.%d.1", d.s.run, step, i), id), nil
	}
	if v.Effect != policy.Allow {
		return d.refuse(step, call, v, obs), nil
	}
	return dispatch(fmt.Sprintf("%s.%d.%d.1", d.s.run, step, i), ""), nil
}

// refuse renders a policy refusal as an observation, and publishes it.
func (d *driver) refuse(step int, call *protocol.ToolCall, v policy.Verdict, obs *protocol.Observation) *protocol.Observation {
	obs.Status, obs.IsError, obs.Content = protocol.CallRefused, true, v.Refusal()
	obs.Refused = &protocol.Refusal{Act: v.Act.String(), Target: v.Target, Effect: v.Effect.String(), Rule: v.Rule, Layer: v.Layer}
	d.c.emit(d.s.run, step, protocol.EventRefused, &protocol.Event{Tool: call.Name, Target: v.Target, Refused: obs.Refused})
	return obs
}

func (d *driver) offers(name string) bool {
	for _, t := range d.tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// verdict decides a call under the run's policy, by what its tool
// declares it acts on (its spec's Gate) when it is not a built-in.
func (d *driver) verdict(call *protocol.ToolCall) (policy.Verdict, string) {
	for i := range d.tools {
		if d.tools[i].Name == call.Name {
			return gate.VerdictOf(d.pol, call, d.tools[i].Gate)
		}
	}
	return gate.Verdict(d.pol, call)
}

func (d *driver) toolNames() string {
	s := ""
	for i, t := range d.tools {
		if i > 0 {
			s += ", "
		}
		s += t.Name
	}
	return s
}

// target is what a tool call acts on, for events: its path, pattern or
// program.
func target(call *protocol.ToolCall) string {
	var args map[string]any
	if json.Unmarshal(call.Arguments, &args) != nil {
		return ""
	}
	for _, k := range []string{"path", "pattern", "name_glob", "glob"} {
		if v, ok := args[k].(string); ok {
			return v
		}
	}
	if argv, ok := args["argv"].([]any); ok {
		s := ""
		for i, a := range argv {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprint(a)
		}
		return s
	}
	return ""
}
