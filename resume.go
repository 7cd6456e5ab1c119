package harness

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/ioharness/harness/pkg/protocol"
)

// ResumeFromStoredPolicy is io-harness 0.17's resume_from_stored_policy:
// Resume under the policy stored with the run and nothing else (the last
// policy a resume recorded in its trace, else its contract's; a contract
// that set none ran under the default policy, and still does). A
// permissive policy never takes its place. Errors: as Resume; a
// *protocol.Error with CodeInvalidField when WithPolicy is passed (use
// Resume to change the policy).
func ResumeFromStoredPolicy(ctx context.Context, run string, opts ...ResumeOption) (*protocol.Result, error) {
	var cfg Config
	var co callOptions
	for _, o := range opts {
		o.applyResume(&cfg, &co)
	}
	if co.policy != nil {
		return nil, protocol.FieldError(protocol.CodeInvalidField, "policy", "use Resume with WithPolicy to carry the run on under another policy",
			"ResumeFromStoredPolicy takes the policy stored with run %s; it was given another", run)
	}
	return Resume(ctx, run, opts...)
}

// ResumeWithDecision is io-harness 0.17's resume_with_decision: Resume
// with WithDecision(approval, d).
func ResumeWithDecision(ctx context.Context, run, approval string, d *protocol.Decision, opts ...ResumeOption) (*protocol.Result, error) {
	return Resume(ctx, run, append(opts, WithDecision(approval, d))...)
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
