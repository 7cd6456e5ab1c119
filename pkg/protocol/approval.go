package protocol

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Approval is one action that waits for a person, as the harness-approvals
// bucket holds it under its id: the pending action, once a coordinator has
// deferred it, and the decision, once someone has made it. Either may come
// first: a decision sent before the pause was seen still counts.
type Approval struct {
	ID       string    `json:"id"`
	Pending  *Pending  `json:"pending,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
}

// Pending is an action the policy asked a person about: what the agent
// wants to do, and exactly what the person is shown (the content a write
// would produce, the edit, the command). For the provider's own endpoint
// (an ask rule on its host), Tool is empty, Act is "net" and Target the
// endpoint: the run's provider calls wait for it, and Step is the last step
// committed before them.
type Pending struct {
	Run       string          `json:"run"`
	Step      int             `json:"step"`
	Call      int             `json:"call"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Act       string          `json:"act"`
	Target    string          `json:"target"`
	Shown     string          `json:"shown"`
	Rule      string          `json:"rule,omitempty"`
	Layer     string          `json:"layer,omitempty"`
	Time      time.Time       `json:"time"`
}

// Decision is a person's answer to a pending action. Approve false is a
// denial, with Reason. Rewrite, when set, replaces the call's arguments
// (the same tool, acting on what the person chose instead); Remember adds
// a rule allowing the same act on the same target for the rest of the run.
type Decision struct {
	Approve  bool            `json:"approve"`
	Reason   string          `json:"reason,omitempty"`
	Rewrite  json.RawMessage `json:"rewrite,omitempty"`
	Remember bool            `json:"remember,omitempty"`
	By       string          `json:"by,omitempty"`
	Time     time.Time       `json:"time"`
}

// ApprovalID names the approval of one call of one step of a run. It is
// predictable, so a decision can be sent before the pause is seen (for a
// step the run has reached).
func ApprovalID(run string, step, call int) string {
	return run + "." + strconv.Itoa(step) + "." + strconv.Itoa(call)
}

// ProviderApprovalID names the approval of the n-th (from 0) provider
// endpoint a run's policy asked a person about. Its step is 0, which no
// tool call has: it comes before the provider call of whichever step
// found the ask.
func ProviderApprovalID(run string, n int) string { return ApprovalID(run, 0, n) }

// ParseApprovalID splits an approval id into its run, step and call; step
// 0 is a provider endpoint's (ProviderApprovalID). Errors:
// CodeInvalidField for anything ApprovalID did not make.
func ParseApprovalID(id string) (run string, step, call int, err error) {
	bad := FieldError(CodeInvalidField, "id", "use the id the paused run printed, such as RUN.3.0", "%q is not an approval id", id)
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return "", 0, 0, bad
	}
	j := strings.LastIndexByte(id[:i], '.')
	if j < 0 {
		return "", 0, 0, bad
	}
	run = id[:j]
	step, err1 := strconv.Atoi(id[j+1 : i])
	call, err2 := strconv.Atoi(id[i+1:])
	if err1 != nil || err2 != nil || step < 0 || call < 0 || !ValidToken(run) {
		return "", 0, 0, bad
	}
	return run, step, call, nil
}
