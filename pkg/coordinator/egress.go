package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// The provider's own endpoint under the run's policy. A worker checks it
// before every call: the endpoint is allowed by a layer of the worker's
// own, so the net default never refuses it, but a deny rule does (the run
// ends refused) and so does an ask rule, which the worker cannot answer:
// it makes no call and reports the verdict. The coordinator, which only
// learns the endpoint from that report, puts the ask to the run's
// approver as it does a tool call's: an answer now goes on at once, a
// deferral pauses the run durably before the step (the approval
// protocol.ProviderApprovalID), and a denial ends the run denied. An
// approval is remembered as an allow of the endpoint for the rest of the
// run, which answers the ask rule from then on (never a deny).

// hostPending is the error of a provider call that waits for a person to
// approve its endpoint.
type hostPending struct{ p *protocol.Pending }

func (h *hostPending) Error() string {
	return fmt.Sprintf("the provider's endpoint %s waits for a person's approval", h.p.Target)
}

// hostDenied is the error of a provider call whose endpoint a person or
// the approver denied, or that asks again after its approval.
type hostDenied struct{ why string }

func (h *hostDenied) Error() string { return h.why }

// askHost puts a worker's ask about its provider's endpoint to the
// approver. It returns nil when the endpoint is approved now (and
// remembered), a *hostPending when a person decides later, or a
// *hostDenied.
func (d *driver) askHost(ctx context.Context, step int, r *protocol.Refusal) error {
	s := d.s
	if d.hostAsked == nil {
		d.hostAsked = map[string]bool{}
	}
	if d.hostAsked[r.Target] {
		return &hostDenied{why: fmt.Sprintf("the provider's endpoint %s still asks for approval after it was approved (%s); the run cannot call its provider",
			r.Target, netDecidedBy(r))}
	}
	d.hostAsked[r.Target] = true
	p := hostPendingOf(s, len(d.hostDecided), r)
	id := pendingID(s.run, p)
	d.c.emit(s.run, step, protocol.EventVerdict, &protocol.Event{Target: r.Target, Effect: r.Effect, Rule: r.Rule, Layer: r.Layer})
	d.c.emit(s.run, step, protocol.EventApproval, &protocol.Event{Target: r.Target, Approval: id})
	dec, err := d.c.cfg.Approver.Decide(ctx, p)
	if err != nil {
		d.log.Warn("approver failed; deferring to a person", "approval", id, "err", err)
	}
	if dec == nil {
		return &hostPending{p: p}
	}
	d.c.emit(s.run, step, protocol.EventDecided, &protocol.Event{Target: r.Target, Approval: id, Text: decisionWord(dec)})
	if !dec.Approve {
		// The run ends here, and its finished record says who denied.
		return &hostDenied{why: fmt.Sprintf("calling the model provider at %s needs a person's approval (%s), and %s denied it: %s",
			r.Target, netDecidedBy(r), orWord(dec.By, "the approver"), orWord(dec.Reason, "no reason given"))}
	}
	d.hostDecided = append(d.hostDecided, protocol.Decided{Approval: id, Decision: dec})
	rule := hostRule(r.Target)
	d.hostRemember = append(d.hostRemember, rule)
	d.pol = d.pol.Remember(policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: rule.Pattern})
	return nil
}

// hostPendingOf is the pending action of an ask about the provider's
// endpoint: no tool, numbered by the run's provider approvals so far, those
// committed and the undecided ones of the step in hand.
func hostPendingOf(s *runState, uncommitted int, r *protocol.Refusal) *protocol.Pending {
	return &protocol.Pending{Run: s.run, Step: s.step, Call: s.hostAsks + uncommitted, Act: policy.Net.String(), Target: r.Target,
		Shown: fmt.Sprintf("call the model provider at %s for the run's next turn", r.Target), Rule: r.Rule, Layer: r.Layer,
		Time: time.Now().UTC()}
}

// hostRule is the rule an approval of the provider's endpoint remembers.
func hostRule(endpoint string) protocol.Rule {
	return protocol.Rule{Act: policy.Net.String(), Effect: policy.Allow.String(), Pattern: endpoint}
}

// pendingID is the approval id of a pending action: a tool call's by its
// step and call, the provider endpoint's by its number.
func pendingID(run string, p *protocol.Pending) string {
	if p.Tool == "" {
		return protocol.ProviderApprovalID(run, p.Call)
	}
	return protocol.ApprovalID(run, p.Step, p.Call)
}

// netDecidedBy names what decided a refusal of a provider endpoint: its
// rule and layer, or the net default.
func netDecidedBy(r *protocol.Refusal) string {
	return policy.Verdict{Effect: policy.Ask, Rule: r.Rule, Layer: r.Layer, Act: policy.Net, Target: r.Target}.DecidedBy()
}
