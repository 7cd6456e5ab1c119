package protocol

import "time"

// Event kinds, the last token of harness.events.<run>.<kind>.
const (
	EventStarted  = "started"
	EventTurn     = "turn"
	EventToolCall = "tool_call"
	EventObserved = "observation"
	EventStep     = "step"
	EventCheck    = "check"
	EventRefused  = "refused"
	EventVerdict  = "verdict"
	EventApproval = "approval_requested"
	EventDecided  = "approval_decided"
	EventFinished = "finished"
	// EventRejected is published on harness.events.rejected.<code> for a
	// submitted contract a coordinator refused, with the error and the
	// message id in Text.
	EventRejected = "rejected"
	EventError    = "error"
	EventRetry    = "retry"
	EventToken    = "token"
	EventFallback = "fallback"
	// EventSpendDraw reports a settled draw on the budget ledger and what
	// remains; EventLedger reports the ledger waiting or being rebuilt.
	EventSpendDraw = "spend_draw"
	EventLedger    = "ledger"
	// EventSpawned reports a sub-agent started by spawn_agent; its target
	// is the sub-agent's run id.
	EventSpawned = "spawned"
	// EventAssembled reports how a step's request was fitted to the
	// context budget (Assembly), and EventReread a stale read read again
	// for it (its target the path).
	EventAssembled = "assembled"
	EventReread    = "reread"
	// EventMemory reports a note remembered (its target the key) and what
	// it evicted.
	EventMemory = "memory"
	// The MCP events, each with its server as the target: a server
	// connected (Text its transport and backend, DurationMS the connect),
	// a tool of it offered (Tool), a call of one (Tool, Status,
	// DurationMS), and a server disconnected (IsError and Error when it
	// died).
	EventMCPConnect     = "mcp_connect"
	EventMCPToolOffered = "mcp_tool_offered"
	EventMCPCall        = "mcp_call"
	EventMCPDisconnect  = "mcp_disconnect"
	// EventWorkspaceMoved reports a run on a root whose sandboxer stopped
	// answering: the workspace was opened on another, its target, and
	// the op in hand (a tool call's, Tool) sent there; Text names the one
	// gone.
	EventWorkspaceMoved = "workspace_moved"
)

// Event is a live notification on harness.events.<run>.<kind>. The trace is
// authoritative; an event may be missed by a watcher that was not there.
type Event struct {
	Run     string    `json:"run"`
	Step    int       `json:"step"`
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time"`
	Tool    string    `json:"tool,omitempty"`
	Target  string    `json:"target,omitempty"`
	Text    string    `json:"text,omitempty"`
	Tokens  int64     `json:"tokens,omitempty"`
	Outcome Outcome   `json:"outcome,omitempty"`
	Passed  *bool     `json:"passed,omitempty"`
	IsError bool      `json:"is_error,omitempty"`
	// Error is why a contract was rejected, on a rejected event, and why
	// an MCP server is gone, on an mcp_disconnect event.
	Error *Error `json:"error,omitempty"`
	// Status is what came of a tool call, on an observed event.
	Status  CallStatus `json:"status,omitempty"`
	Refused *Refusal   `json:"refused,omitempty"`
	// Approval names the approval an approval event is about.
	Approval string `json:"approval,omitempty"`
	// Effect, Rule and Layer are a verdict event's decision and what made
	// it (an empty rule: the act's default).
	Effect string `json:"effect,omitempty"`
	Rule   string `json:"rule,omitempty"`
	Layer  string `json:"layer,omitempty"`
	// Budgets is a spend_draw event's standing after the draw.
	Budgets *Budgets `json:"budgets,omitempty"`
	// Assembly is an assembled event's account of the request.
	Assembly *Assembly `json:"assembly,omitempty"`
	// DurationMS is how long an MCP connect or call took.
	DurationMS int64 `json:"duration_ms,omitempty"`
}
