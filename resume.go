package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/ioharness/harness/pkg/protocol"
)

// ResumeFromStoredPolicy carries on a run of the data directory as Resume
// does, under the policy stored with the run and nothing else: the last
// policy a resume recorded in its trace, else its contract's (a contract
// that set none ran under the default policy, and still does). A
// permissive policy never takes its place. It is io-harness 0.17's
// resume_from_stored_policy; Resume with WithPolicy is its resume_with.
//
// Errors: as Resume; a *protocol.Error with CodeInvalidField when a policy
// is passed with WithPolicy (use Resume to change the policy).
func ResumeFromStoredPolicy(ctx context.Context, run string, opts ...Option) (*protocol.Result, error) {
	if policyOf(opts) != nil {
		return nil, protocol.FieldError(protocol.CodeInvalidField, "policy", "use Resume with WithPolicy to carry the run on under another policy",
			"ResumeFromStoredPolicy takes the policy stored with run %s; it was given another", run)
	}
	return Resume(ctx, run, opts...)
}

// ResumeWithDecision records a person's decision on the action a run of
// the data directory waits for (approval is the id the paused run printed,
// RUN.STEP.CALL), then carries the run on as Resume does. It is io-harness
// 0.17's resume_with_decision:
//
//   - a nil decision defers again: nothing is written, and the result says
//     the run still awaits approval;
//   - a denial ends the run denied, and the model hears the reason;
//   - an approval performs the action once, rewritten if the decision
//     rewrites it, after checking it against the run's policy again, so a
//     deny added while the run was paused still holds.
//
// WithPolicy carries the run on under that policy, recorded in the trace.
// A run that has already finished reports its outcome and records nothing.
// Calling again with the same decision (after a crash, say) carries on.
//
// Errors: as Resume; protocol.ErrInvalidField for an approval id that is
// not one of run's, or a rewrite that is not JSON; protocol.ErrRunFinished
// when the approval was already decided otherwise.
func ResumeWithDecision(ctx context.Context, run, approval string, d *protocol.Decision, opts ...Option) (*protocol.Result, error) {
	if err := approvalOf(run, approval); err != nil {
		return nil, err
	}
	return resumeEmbedded(ctx, run, opts, func(cl *Cluster, pol *protocol.Policy) (*protocol.Result, error) {
		return cl.ResumeWithDecision(ctx, run, approval, d, pol)
	})
}

// ResumeWithDecision is the package's ResumeWithDecision on this cluster:
// it records d on the approval, then resumes the run under pol (nil for
// the stored policy) and waits for its outcome. Errors: as the package's.
func (c *Cluster) ResumeWithDecision(ctx context.Context, run, approval string, d *protocol.Decision, pol *protocol.Policy) (*protocol.Result, error) {
	if err := approvalOf(run, approval); err != nil {
		return nil, err
	}
	st, err := c.Status(ctx, run)
	if err != nil {
		return nil, err
	}
	if st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed {
		return c.withPatch(ctx, resultOf(st)), nil
	}
	if d == nil {
		return resultOf(st), nil // deferred again: nothing is written
	}
	if _, err := c.Decide(ctx, approval, d); err != nil {
		if !errors.Is(err, protocol.ErrRunFinished) {
			return nil, err
		}
		ap, gerr := c.approvals.Get(ctx, approval)
		if gerr != nil || ap.Decision == nil || !sameDecision(ap.Decision, d) {
			return nil, err
		}
	}
	return c.ResumeWith(ctx, run, pol)
}

// approvalOf checks that approval is an approval id of run.
func approvalOf(run, approval string) error {
	r, _, _, err := protocol.ParseApprovalID(approval)
	if err != nil {
		return err
	}
	if r != run {
		return protocol.FieldError(protocol.CodeInvalidField, "approval", "use the approval id the paused run printed, RUN.STEP.CALL",
			"approval %s is not one of run %s", approval, run)
	}
	return nil
}

// sameDecision reports whether two decisions say the same thing (who made
// them and when aside).
func sameDecision(a, b *protocol.Decision) bool {
	return a.Approve == b.Approve && a.Reason == b.Reason && a.Remember == b.Remember && sameJSON(a.Rewrite, b.Rewrite)
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// policyOf is the policy opts pass with WithPolicy, or nil.
func policyOf(opts []Option) *protocol.Policy {
	var cfg Config
	var ro runOptions
	for _, o := range opts {
		o(&cfg, &ro)
	}
	return ro.policy
}
