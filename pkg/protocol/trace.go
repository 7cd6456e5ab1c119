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
)

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

	// step
	Turn         *Turn         `json:"turn,omitempty"`
	TurnRef      string        `json:"turn_ref,omitempty"`
	Observations []Observation `json:"observations,omitempty"`
	Note         string        `json:"note,omitempty"`
	Check        *CheckResult  `json:"check,omitempty"`
	Tokens       int64         `json:"tokens,omitempty"`
	Changed      bool          `json:"changed,omitempty"`

	// finished
	Outcome Outcome `json:"outcome,omitempty"`
	Reason  string  `json:"reason,omitempty"`
}
