package protocol

// Sandbox operation kinds.
const (
	OpOpen   = "open"   // attach a run to a workspace root
	OpTool   = "tool"   // run one tool call
	OpVerify = "verify" // run the contract's verification
	OpClose  = "close"  // detach the run
	// OpCollect asks the sandboxer holding a snapshot workspace for the
	// run's changes as a Patch (and a commit, when the contract asks).
	OpCollect = "collect"
	// OpStop ends the run's operations in progress on the sandboxer (its
	// commands are killed), at once and without a slot: the run was
	// cancelled. The workspace stays open for a collect and a close.
	OpStop = "stop"
)

// SandboxOp is a request from a coordinator to a sandboxer. OpID is its
// idempotency key (run, step, call, attempt).
type SandboxOp struct {
	OpID         string        `json:"op_id"`
	Run          string        `json:"run"`
	Kind         string        `json:"kind"`
	Workspace    string        `json:"workspace,omitempty"`
	Call         *ToolCall     `json:"call,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
	Sandbox      *SandboxSpec  `json:"sandbox,omitempty"`
	// Policy is the run's policy. The sandboxer takes its own verdict on
	// every tool call and verification against it, refuses what it does
	// not allow, and omits from grep and find what it does not let the
	// agent read. An operation without one is refused.
	Policy *Policy `json:"policy,omitempty"`
	// Approval names the person's approval that covers a call the policy
	// asks about.
	Approval string `json:"approval,omitempty"`
	// Snapshot is the ref of the run's snapshot workspace, on an open (the
	// sandboxer materialises it) and a collect; Workspace is then empty.
	Snapshot string `json:"snapshot,omitempty"`
	// Commit, on an open and a collect, asks for a git commit of the
	// changes: the open makes a workspace that is not a repository into
	// one whose first commit is the snapshot, the collect commits the run.
	Commit *CommitSpec `json:"commit,omitempty"`
	// Skills, on an open, names the run's skills: the sandboxer reads
	// their catalogue (a skills snapshot it first fetches and unpacks, apart
	// from the workspace) and answers it in SandboxReply.Skills, or
	// refuses the open, naming the file, when one is malformed. A
	// read_skill tool call carries it too, so that a sandboxer that no
	// longer holds the run's skills snapshot (it restarted) unpacks it
	// again.
	Skills *SkillsSpec `json:"skills,omitempty"`
	// Tools, on an open, names the tools beyond the built-ins the run
	// needs (its contract's tools): a sandboxer that lacks one does not
	// take the run.
	Tools []string `json:"tools,omitempty"`
	// Git, on a tool call and a collect, is the contract's git: the
	// identity git_commit and the end-of-run commit sign with.
	Git *GitSpec `json:"git,omitempty"`
	// Tree is the root run of the run's agent tree: the tree's runs share
	// its MCP sessions. Empty: the run's own.
	Tree string `json:"tree,omitempty"`
	// MCP is the contract's MCP servers, on an open (the sandboxer starts
	// or dials them) and on a call of an MCP tool (so a sandboxer that
	// lost the session, restarted, opens it again).
	MCP *MCPSpec `json:"mcp,omitempty"`
	// Opened, on a close, names the open it gives back, by the stamp the
	// node answered it with (SandboxReply.Opened): the close is carried
	// out only if no later open of the run came to the node. A coordinator
	// sends one to each sandboxer that opened a root beside the one the
	// run went on with. Zero: the run's workspace, whatever opened it.
	Opened uint64 `json:"opened,omitempty"`
}

// SandboxReply answers a SandboxOp. Error is set when the operation could
// not be carried out at all; a tool that ran and failed is an Observation
// with IsError.
type SandboxReply struct {
	OpID        string       `json:"op_id"`
	Node        string       `json:"node,omitempty"`
	Observation *Observation `json:"observation,omitempty"`
	Check       *CheckResult `json:"check,omitempty"`
	// Tools answers an open: the tools this sandboxer offers the model.
	Tools []ToolSpec `json:"tools,omitempty"`
	// Toolchain answers an open: what the workspace's root looks like,
	// when a marker file says.
	Toolchain *Toolchain `json:"toolchain,omitempty"`
	// Skills answers an open that named a skills directory: the
	// catalogue of its skills, by name.
	Skills []Skill `json:"skills,omitempty"`
	// Patch answers a collect.
	Patch *Patch `json:"patch,omitempty"`
	// MCP is how the run's MCP servers stand (see MCPSession): all of
	// them on an open, those that died on a tool call or a verification,
	// those disconnected on a close.
	MCP []MCPSession `json:"mcp,omitempty"`
	// Holder answers the open of a snapshot workspace that another
	// sandboxer holds (it materialised it, and has the run's changes): send
	// the open to that node's op subject instead.
	Holder string `json:"holder,omitempty"`
	// Opened answers an open: this node's stamp of it, which a close that
	// names it (SandboxOp.Opened) is carried out for only while no later
	// open of the run came to the node.
	Opened uint64 `json:"opened,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Observation is what one tool call produced, as the model will see it.
type Observation struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Status is what came of the call, for code to act on; Content is
	// written for the model and may be reworded. Records written before
	// it existed lack it: State derives it.
	Status  CallStatus `json:"status,omitempty"`
	Content string     `json:"content,omitempty"`
	// Ref names the blob holding Content when the trace keeps it by
	// reference; Size is Content's length in bytes.
	Ref     string      `json:"ref,omitempty"`
	Size    int         `json:"size,omitempty"`
	IsError bool        `json:"is_error,omitempty"`
	Changed bool        `json:"changed,omitempty"`
	Exec    *ExecReport `json:"exec,omitempty"`
	// Refused is set when the policy refused the call: nothing ran.
	Refused *Refusal `json:"refused,omitempty"`
	// Approval names the approval this call waits for: nothing ran yet.
	Approval string `json:"approval,omitempty"`
	// Image is a picture the call produced for the model (view_image);
	// ImageRef names the blob holding it when the trace keeps it by
	// reference.
	Image    *Image `json:"image,omitempty"`
	ImageRef string `json:"image_ref,omitempty"`
}

// CallStatus is what came of one tool call.
type CallStatus string

// Call statuses.
const (
	// CallOK: the call ran and did what it was asked.
	CallOK CallStatus = "ok"
	// CallRefused: the policy, or a person deciding, refused the call;
	// nothing ran.
	CallRefused CallStatus = "refused"
	// CallFailed: the call ran, or could not start, and failed: a tool
	// error, bad arguments, an unknown tool. What it did is in Content.
	CallFailed CallStatus = "failed"
	// CallIndeterminate: the call was cut off by a crash while it ran; its
	// effects are unknown and it is never repeated on its own.
	CallIndeterminate CallStatus = "indeterminate"
	// CallUnanswered: the node that was to carry the call out (a
	// sandboxer, a sub-agent's coordinator) did not answer in time; it may
	// or may not have taken effect.
	CallUnanswered CallStatus = "unanswered"
	// CallAwaitingApproval: the policy asks a person; nothing ran yet, and
	// Approval names the approval.
	CallAwaitingApproval CallStatus = "awaiting_approval"
	// CallNotRun: an earlier call of the same step waits for approval, so
	// this one was not carried out.
	CallNotRun CallStatus = "not_run"
)

// State is the observation's status, derived for a record written before
// Status existed: awaiting approval when it names an approval, refused
// when it carries a refusal, failed when it is an error, else ok.
func (o *Observation) State() CallStatus {
	switch {
	case o.Status != "":
		return o.Status
	case o.Approval != "":
		return CallAwaitingApproval
	case o.Refused != nil:
		return CallRefused
	case o.IsError:
		return CallFailed
	}
	return CallOK
}

// Refusal records a policy verdict that stopped a call: the act, its
// target, the effect, and the rule and layer that decided it (empty when
// the act's default did).
type Refusal struct {
	Act    string `json:"act"`
	Target string `json:"target"`
	Effect string `json:"effect"`
	Rule   string `json:"rule,omitempty"`
	Layer  string `json:"layer,omitempty"`
}

// ExecReport says how a command ran: which backend really ran it, how it
// ended, and which caps the backend could not enforce.
type ExecReport struct {
	Backend    string   `json:"backend"`
	Argv       []string `json:"argv"`
	Exited     bool     `json:"exited"`
	ExitCode   int      `json:"exit_code"`
	Signal     string   `json:"signal,omitempty"`
	CapHit     string   `json:"cap_hit,omitempty"`
	DurationMS int64    `json:"duration_ms"`
	Unenforced []string `json:"unenforced,omitempty"`
	// Unsandboxed is set when the command ran with no isolation at all
	// (the floor backend, which only the sandboxer's operator can allow):
	// as the sandboxer's own user, seeing what it sees.
	Unsandboxed bool `json:"unsandboxed,omitempty"`
}

// CheckResult is the outcome of the verification gate. A command that did
// not exit on its own (killed by a cap or a signal) never passes.
type CheckResult struct {
	Kind   string      `json:"kind"`
	Passed bool        `json:"passed"`
	Detail string      `json:"detail"`
	Output string      `json:"output,omitempty"`
	Exec   *ExecReport `json:"exec,omitempty"`
}

// Skill is one entry of a run's skills catalogue: its name (what
// read_skill takes), the description its front matter gives, and the
// path its read is judged on under the run's policy. For a skills
// directory that is the file's path relative to the workspace root, read
// as read_file would; for a skills snapshot it is SkillsSnapshotRoot and
// the file's path in the snapshot ("skills/deploy.md"), read by the
// sandboxer from its own copy of the snapshot, outside the workspace.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"`
}
