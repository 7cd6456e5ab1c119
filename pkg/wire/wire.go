// Package wire holds the names and topology of harness on NATS: the
// subjects every role publishes and subscribes on, the JetStream streams,
// consumers, key-value buckets and object stores they share, and Ensure,
// which creates them idempotently. Every role ensures (or, with Bind,
// binds to) them at start, so any role may come up first. The names here
// are the wire names documented in docs/protocol.md; operators and the
// e2e suite type them, so they do not change.
//
// Connecting, credentials and TLS are not here: a role is given a
// *nats.Conn.
package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// Subjects and their prefixes.
const (
	SubjectSubmit = "harness.submit"
	StepsPrefix   = "harness.steps."
	TurnsPrefix   = "harness.turns."
	// WholeTaskPrefix is where workers ask for a step task's request
	// whole (WholeTask); every coordinator hears it, and the one holding
	// the run answers.
	WholeTaskPrefix = "harness.task."
	// StoredPrefix is where the turns stream republishes each turn once
	// it has stored it: harness.stored.turns.<run>.<step>.<attempt>. A
	// coordinator acts on a turn heard here, never on the publish itself,
	// which core subscribers hear before the stream has stored it (or
	// refused it).
	StoredPrefix       = "harness.stored.turns."
	TracePrefix        = "harness.trace."
	EventsPrefix       = "harness.events."
	SandboxOpenSubject = "harness.sandbox.open"
	SandboxPrefix      = "harness.sandbox."

	// SandboxSnapshotSubject takes the open of a snapshot workspace, in a
	// queue group: one sandboxer materialises it.
	SandboxSnapshotSubject = "harness.sandbox.snapshot"

	// AnswersPrefix is where the coordinator that took a submitted
	// contract says what became of it, for the coordinator that heard the
	// request (`nats req harness.submit`) to answer it: a submission's
	// request and its stored copy reach two different coordinators, and
	// JetStream keeps no reply subject. Coordinators' own.
	AnswersPrefix = "harness.answers."
)

// MaxSubmitBytes is the largest message the submit stream stores: a
// contract at its limit and its headers.
const MaxSubmitBytes = protocol.MaxContractBytes + 4096

// AnswerKey names what became of a submitted message, the same for its
// request and its stored copy: every message under one idempotency key
// (msgID) on one subject shares it, as they share a run; without a key,
// every message of the same content on the subject does.
func AnswerKey(subject, msgID string, data []byte) string {
	h := sha256.New()
	if msgID != "" {
		h.Write([]byte("id\x00" + subject + "\x00" + msgID))
	} else {
		h.Write([]byte("body\x00" + subject + "\x00"))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Answer returns the subject of the answer to a submitted message.
func Answer(key string) string { return AnswersPrefix + key }

// Stream, bucket and consumer names.
const (
	StreamSubmit    = "HARNESS_SUBMIT"
	StreamSteps     = "HARNESS_STEPS"
	StreamTurns     = "HARNESS_TURNS"
	StreamTrace     = trace.StreamName
	BucketRuns      = "harness-runs"
	BucketLeases    = "harness-leases"
	BucketApprovals = "harness-approvals"
	BucketCancels   = "harness-cancels"
	BucketOps       = "harness-ops"
	BucketBlobs     = "harness-blobs"
	// BucketWorkspaces holds workspace snapshots and the patches runs bring
	// back, apart from the trace's blobs so it can be sized and pruned on
	// its own.
	BucketWorkspaces = "harness-workspaces"
	// BucketMemory holds each workspace's notes, the remember tool's.
	BucketMemory = "harness-memory"

	ConsumerCoordinators = "coordinators"
)

// Headers.
const (
	// HeaderReply names the subject a submitter wants its answer on: the run
	// id, or a typed error. JetStream keeps no reply subject of its own for
	// a stored message, so it travels as a header.
	HeaderReply = "Harness-Reply"
)

// Steps returns the subject of a worker pool's step tasks.
func Steps(pool string) string { return StepsPrefix + pool }

// WholeTask returns the subject a worker asks a step task's request whole
// on, when it holds not the task's base: harness.task.<run>.<step>.<attempt>.
func WholeTask(run string, step, attempt int) string {
	return WholeTaskPrefix + run + "." + strconv.Itoa(step) + "." + strconv.Itoa(attempt)
}

// Turn returns the subject the turn of one provider call is published on:
// harness.turns.<run>.<step>.<attempt>, so the answer to any one call can
// be looked up exactly, whatever was published after it.
func Turn(run string, step, attempt int) string {
	return TurnsPrefix + run + "." + strconv.Itoa(step) + "." + strconv.Itoa(attempt)
}

// Stored returns the wildcard subject every turn of a run is republished
// on once the turns stream has stored it.
func Stored(run string) string { return StoredPrefix + run + ".>" }

// Trace returns the subject of a run's trace.
func Trace(run string) string { return TracePrefix + run }

// Event returns the subject of one live event of a run.
func Event(run, kind string) string { return EventsPrefix + run + "." + kind }

// Rejected returns the subject a refused contract's event goes to, by the
// error's name: harness.events.rejected.<code>.
func Rejected(code string) string { return EventsPrefix + "rejected." + code }

// SandboxOps returns the subject a sandboxer node takes operations on.
func SandboxOps(node string) string { return SandboxPrefix + node + ".op" }

// WorkerConsumer names the durable consumer of a worker pool.
func WorkerConsumer(pool string) string { return "workers-" + pool }

// DecidePrefix starts the subject a plain NATS client decides an approval
// on: harness.decide.<approval id>, with a JSON protocol.Decision as the
// body. The reply is {"approval": ...} or {"error": ...}.
const DecidePrefix = "harness.decide."

// ResumePrefix starts the subject a client asks the coordinators to carry
// a run on: harness.resume.<run>, with a protocol.ResumeRequest (or an
// empty body) and a protocol.ResumeReply in answer. One coordinator of the
// queue group takes each request.
const ResumePrefix = "harness.resume."

// CancelPrefix starts the subject a client cancels a run on:
// harness.cancel.<run>, with a protocol.CancelRequest (or an empty body)
// and a protocol.CancelReply in answer. One coordinator of the queue group
// takes each request; the one driving the run, wherever it is, stops it.
const CancelPrefix = "harness.cancel."

// Cancel returns the subject that cancels run.
func Cancel(run string) string { return CancelPrefix + run }

// Resume returns the subject that resumes run.
func Resume(run string) string { return ResumePrefix + run }

// CoordinatorStatus returns the subject a coordinator answers its status
// on.
func CoordinatorStatus(id string) string { return "harness.coordinator." + id + ".status" }

// WorkerToolPrefix starts the subject a worker's tool takes its calls on:
// harness.worker.tool.<name>, shared by every worker holding the tool.
const WorkerToolPrefix = "harness.worker.tool."

// WorkerTool returns the subject the calls of the worker tool name go to.
func WorkerTool(name string) string { return WorkerToolPrefix + name }

// WorkerStatus returns the subject a worker answers its status on.
func WorkerStatus(id string) string { return "harness.worker." + id + ".status" }

// ToolSpecMetadata is the endpoint metadata key holding a worker tool's
// spec (protocol.ToolSpec as JSON); ToolReadOnlyMetadata is "true" for a
// tool whose calls change nothing.
const (
	ToolSpecMetadata     = "spec"
	ToolReadOnlyMetadata = "read_only"
)

// OpRecord is what the ops bucket holds for one operation, a sandboxer's
// or a worker tool's call: that it began, and once it ended, its reply.
type OpRecord struct {
	Done  bool                   `json:"done"`
	Reply *protocol.SandboxReply `json:"reply,omitempty"`
}

// OpKey turns an op id into an ops bucket key.
func OpKey(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '=' {
			return r
		}
		return '_'
	}, id)
}
