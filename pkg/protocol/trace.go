package protocol

import "time"

// TraceFormat is the version of the trace record format this build writes.
// A reader refuses records of a newer format rather than misread them.
const TraceFormat = 1

// Record kinds in the trace.
const (
	RecordStarted  = "started"
	RecordStep     = "step"
	RecordFinished = "finished"
	// RecordPaused ends a step that deferred a call to a person: the run
	// waits, holding nothing, until the approval is decided.
	RecordPaused = "paused"
	// RecordDecision applies a person's decision to the paused call: the
	// action as performed (or refused) and any rule to remember.
	RecordDecision = "decision"
	// RecordPolicy replaces the run's policy from here on: a run resumed
	// under another policy records it, so the trace says what was allowed.
	RecordPolicy = "policy"
)

// Cost is what one provider call cost, from the price table of the
// coordinator that committed it, in micro-units of the table's currency.
// Priced is false when the model had no price: the call cost nothing here,
// which is not to say it was free.
type Cost struct {
	Model  string `json:"model"`
	Micros int64  `json:"micros"`
	Priced bool   `json:"priced"`
	// TotalMicros is the run's cost so far, this call included.
	TotalMicros int64 `json:"total_micros"`
	// Reported is what the provider itself said the call cost, in its own
	// currency (Usage.ReportedCost), beside the price table's figure.
	Reported float64 `json:"reported,omitempty"`
}

// Record is one entry of a run's durable trace on harness.trace.<run>. A
// step commits as exactly one record. Large content is held by reference
// (Observation.Ref, TurnRef), so a record stays small.
type Record struct {
	Format int       `json:"format"`
	Kind   string    `json:"kind"`
	Run    string    `json:"run"`
	Step   int       `json:"step,omitempty"`
	Time   time.Time `json:"time"`

	// started
	Contract    *Contract `json:"contract,omitempty"`
	Coordinator string    `json:"coordinator,omitempty"`
	// Tree is the root run of the agent tree the run belongs to (its own
	// id for a root), Depth its depth below that root.
	Tree  string `json:"tree,omitempty"`
	Depth int    `json:"depth,omitempty"`

	// step
	Turn         *Turn         `json:"turn,omitempty"`
	TurnRef      string        `json:"turn_ref,omitempty"`
	Observations []Observation `json:"observations,omitempty"`
	Note         string        `json:"note,omitempty"`
	Check        *CheckResult  `json:"check,omitempty"`
	Tokens       int64         `json:"tokens,omitempty"`
	Cost         *Cost         `json:"cost,omitempty"`
	Changed      bool          `json:"changed,omitempty"`
	// Draws are the step's settled charges on the budget ledger.
	Draws []Draw `json:"draws,omitempty"`
	// Decided are the approver's answers given at once during the step
	// (a terminal's, an embedder's Approver), each with who decided; a
	// person's decision on a paused run is a decision record instead.
	Decided []Decided `json:"decided,omitempty"`
	// Rereads are the stale reads read again to assemble the step's
	// request: each names the earlier read's call (CallID) and holds what
	// the file holds now, or why it could not be read.
	Rereads []Observation `json:"rereads,omitempty"`
	// Assembled is how the step's request was fitted to the context
	// budget, and what the provider counted it at.
	Assembled *Assembly `json:"assembled,omitempty"`
	// Tools are the tools offered from this step on, when they differ
	// from the step before's (the first step always has them).
	Tools []ToolSpec `json:"tools,omitempty"`
	// Toolchain is what the sandboxer recognised of the workspace when it
	// was first opened, told to the model from this step on.
	Toolchain *Toolchain `json:"toolchain,omitempty"`
	// Skills is the catalogue of the run's skills, as the sandboxer read
	// it when the workspace was first opened: in the system prompt from
	// this step on, and what read_skill reads.
	Skills []Skill `json:"skills,omitempty"`

	// started: the workspace's memory when the run was admitted, oldest
	// first, which its requests carry before everything else.
	Memory []Note `json:"memory,omitempty"`

	// finished, paused
	Outcome Outcome `json:"outcome,omitempty"`
	Reason  string  `json:"reason,omitempty"`
	// finished: what the run changed in its snapshot workspace.
	Patch *Patch `json:"patch,omitempty"`

	// paused, decision
	Approval string    `json:"approval,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	// decision: the rules remembered for the rest of the run.
	Remember []Rule `json:"remember,omitempty"`

	// policy: the run's policy from this record on. started: a
	// sub-agent's effective policy, its parent's contained with its own
	// contract's (allows intersect, denies union, asks kept), which is
	// what it runs under and what every sandbox op carries; absent for a
	// root, which runs under its contract's. A resumed or taken-over run
	// reads it back from here, never from its parent again.
	Policy *Policy `json:"policy,omitempty"`
	// started: a sub-agent's parent's effective policy when the sub-agent
	// started. A policy the sub-agent is resumed under is contained in it
	// too, so no resume widens a sub-agent past its parent.
	ParentPolicy *Policy `json:"parent_policy,omitempty"`
}

// Decided is an approver's answer given at once, during a step: the
// approval id it answers and the decision, whose By names who decided.
type Decided struct {
	Approval string    `json:"approval"`
	Decision *Decision `json:"decision"`
}

// Assembly is how one request was fitted to the run's context budget:
// Budget the tokens it could carry (output reservation included),
// Estimate what its input was estimated at, Bytes the size of that input
// (the request's JSON), Reported what the provider counted its input at
// (zero until the turn answers), BytesPerToken the calibration the
// estimate used; then how many tool results were carried
// whole, cut to a stub, superseded by a later one, read again because a
// write made them stale, and how many steps were collapsed into one line.
type Assembly struct {
	Budget        int     `json:"budget"`
	Estimate      int     `json:"estimate"`
	Bytes         int     `json:"bytes"`
	Reported      int64   `json:"reported,omitempty"`
	BytesPerToken float64 `json:"bytes_per_token"`
	Carried       int     `json:"carried"`
	Stubbed       int     `json:"stubbed,omitempty"`
	Superseded    int     `json:"superseded,omitempty"`
	Reread        int     `json:"reread,omitempty"`
	Collapsed     int     `json:"collapsed,omitempty"`
	Notes         int     `json:"notes,omitempty"`
}

// Note is one entry of a workspace's durable memory: what an agent asked
// to remember under a key, and which run and step wrote it.
type Note struct {
	Key   string    `json:"key"`
	Value string    `json:"value"`
	Run   string    `json:"run,omitempty"`
	Step  int       `json:"step,omitempty"`
	Time  time.Time `json:"time"`
}

// Toolchain is the ecosystem a workspace looks like, from one marker file
// in its root, and its conventional commands (argv; empty when it has
// none): told to the model as defaults, never run by the harness.
type Toolchain struct {
	Ecosystem string   `json:"ecosystem"`
	Marker    string   `json:"marker"`
	Manager   string   `json:"manager,omitempty"`
	Install   []string `json:"install,omitempty"`
	Build     []string `json:"build,omitempty"`
	Test      []string `json:"test,omitempty"`
	Lint      []string `json:"lint,omitempty"`
	Format    []string `json:"format,omitempty"`
	Run       []string `json:"run,omitempty"`
}
