package protocol

import "time"

// Outcome is how a run ended, as stored in the trace. The strings are those
// of io-harness 0.17.
type Outcome string

// Outcomes.
const (
	OutcomeSuccess              Outcome = "success"
	OutcomeFinished             Outcome = "finished"
	OutcomeStepCapReached       Outcome = "step_cap_reached"
	OutcomeTimeBudgetExceeded   Outcome = "time_budget_exceeded"
	OutcomeCostBudgetExceeded   Outcome = "cost_budget_exceeded"
	OutcomeDenied               Outcome = "denied"
	OutcomeAwaitingApproval     Outcome = "awaiting_approval"
	OutcomeStalled              Outcome = "stalled"
	OutcomeEscalatedRetryable   Outcome = "escalated_retryable"
	OutcomeEscalatedTerminal    Outcome = "escalated_terminal"
	OutcomeBudgetCeilingReached Outcome = "budget_ceiling_reached"
	OutcomeRefused              Outcome = "refused"
	OutcomeCancelled            Outcome = "cancelled"
	OutcomeFailed               Outcome = "failed"
	// OutcomeModelRefused: the model refused the task (its finish reason
	// said refusal), and was not talked round.
	OutcomeModelRefused Outcome = "model_refused"
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeSuccess, OutcomeFinished, OutcomeStepCapReached, OutcomeTimeBudgetExceeded, OutcomeCostBudgetExceeded,
	OutcomeDenied, OutcomeAwaitingApproval, OutcomeStalled, OutcomeEscalatedRetryable, OutcomeEscalatedTerminal,
	OutcomeBudgetCeilingReached, OutcomeRefused, OutcomeCancelled, OutcomeFailed, OutcomeModelRefused}

// Status is where a run stands.
type Status string

// Run statuses.
const (
	StatusRunning   Status = "running"
	StatusPaused    Status = "paused"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// StatusOf is the status a run has once it ended with o.
func StatusOf(o Outcome) Status {
	switch o {
	case OutcomeAwaitingApproval:
		return StatusPaused
	case OutcomeFailed:
		return StatusFailed
	case "":
		return StatusRunning
	}
	return StatusCompleted
}

// Result is how a run ended.
type Result struct {
	Run      string    `json:"run"`
	Outcome  Outcome   `json:"outcome"`
	Success  bool      `json:"success"`
	Steps    int       `json:"steps"`
	Tokens   int64     `json:"tokens"`
	Reason   string    `json:"reason,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Patch is what the run changed in its snapshot workspace, once it
	// finished; nil for a workspace that lives on a sandboxer.
	Patch *Patch `json:"patch,omitempty"`
}

// RunState is the run index entry (KV bucket harness-runs): where a run
// stands now. The trace is the truth; this is a cache of it.
type RunState struct {
	Run        string  `json:"run"`
	Status     Status  `json:"status"`
	Outcome    Outcome `json:"outcome,omitempty"`
	Step       int     `json:"step"`
	Tokens     int64   `json:"tokens"`
	CostMicros int64   `json:"cost_micros,omitempty"`
	// Usage is what the run's committed turns reported, summed: the
	// input with its cache reads and writes, the output with its
	// reasoning, and the providers' own cost.
	Usage       *Usage    `json:"usage,omitempty"`
	Task        string    `json:"task"`
	Coordinator string    `json:"coordinator,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Started     time.Time `json:"started"`
	Updated     time.Time `json:"updated"`
	// Tree is the root run of the run's agent tree (its own id for a
	// root); Parent the run this one is a sub-agent of, if any.
	Tree   string `json:"tree,omitempty"`
	Parent string `json:"parent,omitempty"`
	// Pool is the worker pool its turns go to; Tenant the tenant that
	// submitted it, if one did.
	Pool   string `json:"pool,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Budgets is where the run and its tree stand against their ceilings,
	// as of the run's last draw.
	Budgets *Budgets `json:"budgets,omitempty"`
}

// SubmitReply answers a submitted contract on the subject named in its
// Harness-Reply header: the run id, or the typed error that refused it.
type SubmitReply struct {
	Run   string `json:"run,omitempty"`
	Error *Error `json:"error,omitempty"`
}

// ResumeRequest asks the cluster's coordinators, on harness.resume.RUN, to
// carry a run on from the step after its last committed one; one
// coordinator of the queue group takes it. An empty body keeps the stored
// policy.
type ResumeRequest struct {
	// Policy carries the run on under this policy, recorded in the trace
	// as the run's policy from then on; nil keeps the stored one.
	Policy *Policy `json:"policy,omitempty"`
}

// ResumeReply answers a ResumeRequest: the coordinator that took the run
// and its clock when it did (the run's state changes after Since), or the
// typed error: CodeUnknownRun, CodeFenced while another coordinator drives
// it, CodeUnavailable when the coordinator that heard had no room (ask
// again), a policy that does not validate.
type ResumeReply struct {
	Coordinator string    `json:"coordinator,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Error       *Error    `json:"error,omitempty"`
}

// CancelRequest asks, on harness.cancel.RUN, that a run stop now and end
// cancelled, with its sub-agents. An empty body is a cancel with no
// reason.
type CancelRequest struct {
	// Reason is why, for the trace; By who asks (the NATS user, where the
	// server says it, takes its place).
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// Cancel is a cancellation asked for a run, as the harness-cancels bucket
// keeps it: the run's driver, wherever it is, stops at once and ends the
// run cancelled, naming who and why.
type Cancel struct {
	Run    string    `json:"run"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

// CancelReply answers a CancelRequest: the cancellation recorded (the
// first one, when the run was cancelled before), or the typed error:
// CodeUnknownRun; CodeRunFinished for a run that ended otherwise before.
type CancelReply struct {
	Cancel *Cancel `json:"cancel,omitempty"`
	Error  *Error  `json:"error,omitempty"`
}
