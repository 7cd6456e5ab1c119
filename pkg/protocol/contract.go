package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// ContractSchema is the schema string of the contract this build speaks.
const ContractSchema = "harness.contract/v1"

// MaxContractBytes bounds an encoded contract. A contract describes work; it
// does not carry it (workspaces travel by reference or as snapshots).
const MaxContractBytes = 256 << 10

// Defaults applied to a contract that leaves a field out.
const (
	DefaultMaxSteps    = 12
	DefaultPool        = "default"
	DefaultMaxOutput   = 4096
	DefaultCPUSecs     = 60
	DefaultWallSecs    = 120
	DefaultMemoryBytes = 2 << 30
	DefaultOpenFiles   = 512
	DefaultPids        = 256
	DefaultOutputBytes = 1 << 20
)

// Contract is what a user submits: the task, the workspace, what the agent
// may do, its budgets, and how success is checked. See docs/contract.md.
type Contract struct {
	Schema       string       `json:"schema"`
	Task         string       `json:"task"`
	Workspace    Workspace    `json:"workspace"`
	Verification Verification `json:"verification"`
	Policy       *Policy      `json:"policy,omitempty"`
	Budget       Budget       `json:"budget,omitzero"`
	Provider     ProviderSpec `json:"provider,omitzero"`
	Sandbox      SandboxSpec  `json:"sandbox,omitzero"`
	Stall        *StallSpec   `json:"stall,omitempty"`
	// Context bounds what one request carries; absent, the model's window.
	Context *ContextSpec `json:"context,omitempty"`
	// Parent names the run this one is a sub-agent of: it joins the
	// parent's agent tree and draws from the tree's ceiling.
	Parent string `json:"parent,omitempty"`
	// Skills names the run's skills, a directory in the workspace or a
	// snapshot of their own: their names and descriptions go into the
	// system prompt, and the read_skill tool reads one's body. See
	// docs/contract.md.
	Skills *SkillsSpec `json:"skills,omitempty"`
	// Tools names the tools the run needs beyond the built-ins: tools a
	// sandboxer built with them advertises (its micro service metadata,
	// "tools"). The run goes to a sandboxer that has every one, and is
	// refused before its first step when none does.
	Tools []string `json:"tools,omitempty"`
	// Images ride on the task, the first message of every request, for a
	// model that takes images (io-harness's with_images): PNG, JPEG, GIF
	// or WebP, each at most MaxImageBytes, at most MaxTaskImages of them,
	// their bytes inline (base64 in JSON) and so within MaxContractBytes.
	// A provider that takes no images refuses the run's first call before
	// any spend.
	Images []Image `json:"images,omitempty"`
	// Git is who the run's commits are by (git_commit, workspace.commit);
	// absent, git_commit is refused.
	Git *GitSpec `json:"git,omitempty"`
	// MCP names the MCP servers whose tools the run is offered, as
	// mcp__<server>__<tool>; absent, none.
	MCP *MCPSpec `json:"mcp,omitempty"`
}

// MaxContractTools is how many tools a contract may name.
const MaxContractTools = 64

// ValidToolName reports whether name is one providers accept as a
// function's: 1 to 64 ASCII letters, digits, '_' or '-'. (A loop, not a
// regular expression: compiled at start-up, the expression's 64-fold
// repetition cost every program linking this package, a sandbox's init
// among them, a quarter of a millisecond.)
func ValidToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validateTools checks the tools a contract names: valid names, none twice,
// and none of those a sandboxer cannot advertise (the coordinator's own,
// an MCP server's, which the contract's servers bring).
func (c *Contract) validateTools() error {
	if len(c.Tools) > MaxContractTools {
		return FieldError(CodeInvalidField, "tools", fmt.Sprintf("name at most %d tools", MaxContractTools), "%d tools named", len(c.Tools))
	}
	seen := map[string]bool{}
	for i, name := range c.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		switch {
		case !ValidToolName(name):
			return FieldError(CodeInvalidField, field, "name a tool as its sandboxer advertises it: 1 to 64 letters, digits, '_' or '-'", "%q is not a tool name", name)
		case seen[name]:
			return FieldError(CodeInvalidField, field, "name each tool once", "%q is named twice", name)
		case strings.HasPrefix(name, "mcp__"):
			return FieldError(CodeInvalidField, field, "an MCP server's tools come with the server: leave them out of tools", "%q is an MCP tool's name", name)
		case name == "spawn_agent" || name == "remember" || name == "read_skill":
			return FieldError(CodeInvalidField, field, "leave it out: the harness offers it itself where the contract allows", "%q is the harness's own tool", name)
		}
		seen[name] = true
	}
	return nil
}

// SkillsSpec names where a run's skills are: a directory holding one
// markdown file per skill (NAME.md, or NAME/SKILL.md) that opens with
// front matter giving its name and description. Exactly one field is set.
type SkillsSpec struct {
	// Dir is the directory in the workspace, relative to its root.
	Dir string `json:"dir,omitempty"`
	// Snapshot is the ref ("sha256-" and 64 hex digits) of the directory
	// packed as a snapshot in the harness-workspaces object store, as a
	// workspace snapshot is (harness submit --skills DIR). The sandboxer
	// unpacks it apart from the workspace, where no file tool reaches,
	// and answers read_skill from there; the policy judges those reads
	// as reads of SkillsSnapshotRoot/ and the skill's path in the snapshot.
	Snapshot string `json:"snapshot,omitempty"`
}

// SkillsSnapshotRoot is the directory a skills snapshot is read as: the
// skill NAME.md at the snapshot's top is the catalogue's
// "skills/NAME.md", which is what a read of it is judged on, and what a
// rule names to deny it.
const SkillsSnapshotRoot = "skills"

// MaxSkills bounds the skills one directory may hold.
const MaxSkills = 64

// ContextSpec bounds the requests of a run. MaxTokens is the most one
// request may carry, its output reservation included (zero: the model's
// window, from a table of known models, else DefaultContextTokens).
// Share, with a token budget set, is the most of what the budget has left
// that one turn gets (zero: DefaultContextShare), never under
// ContextFloor.
type ContextSpec struct {
	MaxTokens int     `json:"max_tokens,omitempty"`
	Share     float64 `json:"share,omitempty"`
}

// Context defaults, as io-harness 0.17 has its floor and share.
const (
	DefaultContextTokens = 128_000
	DefaultContextShare  = 0.5
	ContextFloor         = 2_000
)

// StallSpec says when a run that repeats itself without changing the
// workspace is told to re-plan, and when it is stopped. Absent, the window
// is 3 and one re-plan is given; a window of 0 turns detection off.
type StallSpec struct {
	Window     int `json:"window"`
	MaxReplans int `json:"max_replans"`
}

// Default stall detection.
const (
	DefaultStallWindow     = 3
	DefaultStallMaxReplans = 1
)

// Verification is how success is checked. Exactly one member is set.
type Verification struct {
	Command          *CommandCheck  `json:"command,omitempty"`
	None             *struct{}      `json:"none,omitempty"`
	FileContains     *ContainsCheck `json:"file_contains,omitempty"`
	DocumentContains *ContainsCheck `json:"document_contains,omitempty"`
	FileEquals       *EqualsCheck   `json:"file_equals,omitempty"`
}

// CommandCheck passes when argv, run in the workspace root inside the
// sandbox, exits with ExpectExit. A command killed by a cap never passes.
type CommandCheck struct {
	Argv       []string `json:"argv"`
	ExpectExit int      `json:"expect_exit"`
}

// ContainsCheck passes when the file at Path contains Needle. In a
// single-file contract (Workspace.File) Path may be left out: it is the
// file.
type ContainsCheck struct {
	Path   string `json:"path"`
	Needle string `json:"needle"`
}

// EqualsCheck passes when the file at Path holds exactly Content, byte
// for byte (an empty Content: the file exists and is empty), as
// io-harness's FileEquals. In a single-file contract Path may be left
// out: it is the file.
type EqualsCheck struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Kind names the verification's member: "command", "none", "file_contains",
// "file_equals" or "document_contains"; "" when none is set.
func (v Verification) Kind() string {
	switch {
	case v.Command != nil:
		return "command"
	case v.None != nil:
		return "none"
	case v.FileContains != nil:
		return "file_contains"
	case v.FileEquals != nil:
		return "file_equals"
	case v.DocumentContains != nil:
		return "document_contains"
	}
	return ""
}

// CheckedFile is the path a file_contains, file_equals or document_contains verification
// reads, relative to the workspace root; "" for the other kinds.
func (v Verification) CheckedFile() string {
	switch {
	case v.FileContains != nil:
		return v.FileContains.Path
	case v.FileEquals != nil:
		return v.FileEquals.Path
	case v.DocumentContains != nil:
		return v.DocumentContains.Path
	}
	return ""
}

// Policy is the permission boundary as it travels in a contract. Package
// policy evaluates it.
type Policy struct {
	Layers   []Layer   `json:"layers,omitempty"`
	Defaults *Defaults `json:"defaults,omitempty"`
}

// Layer is a named list of rules.
type Layer struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule gives one effect to the acts whose target matches Pattern.
type Rule struct {
	Act     string `json:"act"`
	Effect  string `json:"effect"`
	Pattern string `json:"pattern"`
}

// Defaults is the effect per act when no rule matches.
type Defaults struct {
	Read  string `json:"read,omitempty"`
	Write string `json:"write,omitempty"`
	Exec  string `json:"exec,omitempty"`
	Net   string `json:"net,omitempty"`
}

// Budget bounds a run. Zero fields take their defaults.
type Budget struct {
	MaxSteps  int      `json:"max_steps,omitempty"`
	MaxWall   Duration `json:"max_wall,omitzero"`
	MaxTokens int64    `json:"max_tokens,omitempty"`
	// MaxCostMicros caps the run's own cost, in micro-units of the price
	// table's currency; default no cap.
	MaxCostMicros int64 `json:"max_cost_micros,omitempty"`
	// Tree is the ceiling of the agent tree this run is the root of.
	Tree *TreeBudget `json:"tree,omitempty"`
}

// ProviderSpec says which model pool serves the run.
type ProviderSpec struct {
	// Model is the model name sent to the provider. A worker may override it.
	Model string `json:"model,omitempty"`
	// Pool names the worker pool (harness.steps.<pool>); default "default".
	Pool string `json:"pool,omitempty"`
	// MaxOutputTokens bounds one turn's output; default 4096.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// Thinking turns on extended thinking, for the providers that take a
	// budget of it (Anthropic; OpenRouter passes it on). Absent: off.
	Thinking *ThinkingSpec `json:"thinking,omitempty"`
	// ReasoningEffort is the reasoning effort asked of OpenAI-wire models
	// ("minimal", "low", "medium" or "high"); default the model's own.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// ThinkingSpec is how much a model may think before it answers each turn.
// BudgetTokens is at least MinThinkingBudget and under the turn's
// max_output_tokens, which it is a part of.
type ThinkingSpec struct {
	BudgetTokens int `json:"budget_tokens"`
}

// MinThinkingBudget is the smallest thinking budget Anthropic accepts.
const MinThinkingBudget = 1024

// ReasoningEfforts are the values provider.reasoning_effort takes.
var ReasoningEfforts = []string{"minimal", "low", "medium", "high"}

// SandboxSpec says where and how commands run.
type SandboxSpec struct {
	// Backend is "auto", "native", "docker" or "floor"; default "auto".
	Backend string `json:"backend,omitempty"`
	// Network allows commands to reach the network; default false.
	Network bool   `json:"network,omitempty"`
	Limits  Limits `json:"limits,omitzero"`
}

// Limits caps one command. Zero fields take their defaults.
type Limits struct {
	CPUSecs     int   `json:"cpu_secs,omitempty"`
	WallSecs    int   `json:"wall_secs,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	Pids        int   `json:"pids,omitempty"`
	OpenFiles   int   `json:"open_files,omitempty"`
	OutputBytes int   `json:"output_bytes,omitempty"`
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.CPUSecs == 0 {
		l.CPUSecs = DefaultCPUSecs
	}
	if l.WallSecs == 0 {
		l.WallSecs = DefaultWallSecs
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	return l
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("15m", "90s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "15m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"15m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"15m\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// IsZero reports whether the duration is unset.
func (d Duration) IsZero() bool { return d == 0 }

// DecodeContract strictly decodes and validates a contract, then fills the
// defaults. Every failure is an *Error: ErrTooLarge, ErrMalformed (also for
// a key that appears twice in one object, at any depth, naming its path
// such as "policy.defaults.write"), ErrUnknownField, ErrSchemaVersion,
// ErrMissingField, ErrInvalidField or ErrUnsupported, naming the field and
// saying what to do.
func DecodeContract(data []byte) (*Contract, error) {
	if len(data) > MaxContractBytes {
		return nil, FieldError(CodeTooLarge, "", "keep the contract under 256 KiB; reference large inputs from the workspace",
			"contract is %d bytes, the limit is %d", len(data), MaxContractBytes)
	}
	if err := checkFields(data, contractShape); err != nil {
		return nil, err
	}
	var c Contract
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, FieldError(CodeMalformed, "", "send exactly one JSON object", "trailing data after the contract")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Context != nil && c.Context.Share == 0 && bytes.Contains(data, []byte(`"share"`)) {
		// Left out, the share is the default; written as 0, it is no
		// share at all, which the schema refuses (exclusiveMinimum 0).
		var given struct {
			Context struct {
				Share *float64 `json:"share"`
			} `json:"context"`
		}
		if json.Unmarshal(data, &given) == nil && given.Context.Share != nil {
			return nil, FieldError(CodeInvalidField, "context.share", "use a fraction above 0 and at most 1, such as 0.5, or leave it out for 0.5",
				"a share of 0 would give a request none of the budget")
		}
	}
	c.fillDefaults()
	return &c, nil
}

func decodeError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		return FieldError(CodeInvalidField, field, "see docs/contract.md for the field's type",
			"%s must be %s, got JSON %s", orTop(field), te.Type.String(), te.Value)
	}
	msg := err.Error()
	// Errors from a field's own UnmarshalJSON (Duration) name no field in
	// encoding/json v1; say what was wrong.
	if strings.Contains(msg, "duration") {
		return FieldError(CodeInvalidField, "budget.max_wall", "write a Go duration such as \"15m\" or \"90s\"", "%s", msg)
	}
	return FieldError(CodeMalformed, "", "send one JSON object as described in docs/contract.md", "contract is not valid JSON: %s", msg)
}

func orTop(field string) string {
	if field == "" {
		return "the contract"
	}
	return field
}

// Validate checks the rules a contract must meet beyond its shape.
func (c *Contract) Validate() error {
	switch {
	case c.Schema == "":
		return FieldError(CodeMissingField, "schema", `add "schema": "`+ContractSchema+`"`, "the contract has no schema")
	case c.Schema != ContractSchema:
		return FieldError(CodeSchemaVersion, "schema", `this build speaks "`+ContractSchema+`"; upgrade harness or rewrite the contract`,
			"unknown schema %q", c.Schema)
	case strings.TrimSpace(c.Task) == "":
		return FieldError(CodeMissingField, "task", "say in words what the agent should do", "the contract has no task")
	}
	if err := c.Workspace.validate(); err != nil {
		return err
	}
	if err := c.Verification.validate(c.Workspace); err != nil {
		return err
	}
	if err := c.validateSkills(); err != nil {
		return err
	}
	if err := c.Git.validate(); err != nil {
		return err
	}
	if c.Policy != nil {
		if err := c.Policy.Validate(); err != nil {
			return err
		}
	}
	if c.Budget.MaxSteps < 0 {
		return FieldError(CodeInvalidField, "budget.max_steps", "use a positive number, or leave it out for 12", "max_steps is %d", c.Budget.MaxSteps)
	}
	if c.Budget.MaxSteps > 100000 {
		return FieldError(CodeInvalidField, "budget.max_steps", "use at most 100000", "max_steps is %d", c.Budget.MaxSteps)
	}
	if c.Budget.MaxWall < 0 {
		return FieldError(CodeInvalidField, "budget.max_wall", "use a positive duration such as \"15m\"", "max_wall is negative")
	}
	if c.Budget.MaxTokens < 0 {
		return FieldError(CodeInvalidField, "budget.max_tokens", "use a positive number, or leave it out for no cap", "max_tokens is negative")
	}
	if err := c.validateBudget(); err != nil {
		return err
	}
	if err := c.validateTools(); err != nil {
		return err
	}
	if err := validateImages(c.Images); err != nil {
		return err
	}
	if p := c.Provider.Pool; p != "" && !ValidToken(p) {
		return FieldError(CodeInvalidField, "provider.pool", "use letters, digits, '-' and '_' only", "pool %q is not a valid subject token", p)
	}
	if st := c.Stall; st != nil && (st.Window < 0 || st.MaxReplans < 0) {
		return FieldError(CodeInvalidField, "stall", "use a window of 0 (off) or more, and max_replans of 0 or more", "negative stall settings")
	}
	if c.Provider.MaxOutputTokens < 0 {
		return FieldError(CodeInvalidField, "provider.max_output_tokens", "use a positive number", "max_output_tokens is negative")
	}
	if err := c.Provider.validateReasoning(); err != nil {
		return err
	}
	if err := c.validateContext(); err != nil {
		return err
	}
	if c.MCP != nil {
		if err := c.MCP.validate(); err != nil {
			return err
		}
	}
	switch c.Sandbox.Backend {
	case "", "auto", "native", "docker", "floor":
	default:
		return FieldError(CodeInvalidField, "sandbox.backend", `use "auto", "native", "docker" or "floor"`, "unknown backend %q", c.Sandbox.Backend)
	}
	l := c.Sandbox.Limits
	for _, f := range []struct {
		name string
		v    int64
	}{{"cpu_secs", int64(l.CPUSecs)}, {"wall_secs", int64(l.WallSecs)}, {"memory_bytes", l.MemoryBytes},
		{"pids", int64(l.Pids)}, {"open_files", int64(l.OpenFiles)}, {"output_bytes", int64(l.OutputBytes)}} {
		if f.v < 0 {
			return FieldError(CodeInvalidField, "sandbox.limits."+f.name, "use a positive number, or leave it out for the default", "%s is negative", f.name)
		}
	}
	return nil
}

func (v Verification) validate(ws Workspace) error {
	n := 0
	for _, set := range []bool{v.Command != nil, v.None != nil, v.FileContains != nil, v.DocumentContains != nil, v.FileEquals != nil} {
		if set {
			n++
		}
	}
	const hint = `set exactly one of "command", "none", "file_contains", "file_equals", "document_contains"`
	switch {
	case n == 0:
		return FieldError(CodeMissingField, "verification", hint, "the contract says nothing about how success is checked")
	case n > 1:
		return FieldError(CodeInvalidField, "verification", hint, "%d kinds of verification are set", n)
	}
	switch {
	case v.Command != nil:
		if len(v.Command.Argv) == 0 || v.Command.Argv[0] == "" {
			return FieldError(CodeMissingField, "verification.command.argv", `give the program and its arguments, e.g. ["go", "test", "./..."]`, "the command is empty")
		}
		for i, a := range v.Command.Argv {
			if strings.ContainsRune(a, 0) {
				return FieldError(CodeInvalidField, fmt.Sprintf("verification.command.argv[%d]", i), "remove the NUL byte", "argument contains a NUL byte")
			}
		}
	case v.FileContains != nil:
		if err := checkedPath(ws, "verification.file_contains.path", v.FileContains.Path); err != nil {
			return err
		}
		if v.FileContains.Needle == "" {
			return FieldError(CodeMissingField, "verification.file_contains.needle", "an empty needle is in every file; give the text that must appear", "no needle")
		}
	case v.FileEquals != nil:
		if err := checkedPath(ws, "verification.file_equals.path", v.FileEquals.Path); err != nil {
			return err
		}
		if strings.ContainsRune(v.FileEquals.Content, 0) {
			return FieldError(CodeInvalidField, "verification.file_equals.content", "check text files only; remove the NUL byte", "the expected content contains a NUL byte")
		}
	case v.DocumentContains != nil:
		if err := checkedPath(ws, "verification.document_contains.path", v.DocumentContains.Path); err != nil {
			return err
		}
		if v.DocumentContains.Needle == "" {
			return FieldError(CodeMissingField, "verification.document_contains.needle", "an empty needle is in every document; give the text that must appear", "no needle")
		}
		if p := v.DocumentContains.Path; DocumentKind(p) == "" && (p != "" || DocumentKind(ws.File) == "") {
			return FieldError(CodeInvalidField, "verification.document_contains.path", "name a .xlsx, .docx, .pptx or .pdf file, or check a text file with file_contains",
				"%q is not a document whose text can be extracted", v.DocumentContains.Path)
		}
	}
	return nil
}

// checkedPath checks the path a file verification reads. In a single-file
// contract it may be left out, and if given it must name the file (by its
// name in its directory, or as workspace.file spells it): the agent sees
// nothing else there.
func checkedPath(ws Workspace, field, p string) error {
	if ws.File != "" {
		if p == "" || p == ws.FileName() || p == ws.File {
			return nil
		}
		return FieldError(CodeInvalidField, field, fmt.Sprintf("leave the path out, or write %q: a single-file contract checks its file", ws.FileName()),
			"the check reads %q, but the workspace is the one file %s", clipField(p), ws.File)
	}
	if p == "" {
		return FieldError(CodeMissingField, field, "name the file to check, relative to the workspace", "no path")
	}
	if strings.ContainsRune(p, 0) {
		return FieldError(CodeInvalidField, field, "remove the NUL byte", "the path contains a NUL byte")
	}
	return nil
}

// validateSkills checks the run's skills: exactly one of a directory
// (a clean path relative to the workspace root that stays inside it) and
// a snapshot ref, in a workspace that is more than one file.
func (c *Contract) validateSkills() error {
	sk := c.Skills
	if sk == nil {
		return nil
	}
	const field = "skills.dir"
	d := sk.Dir
	switch {
	case strings.TrimSpace(d) == "" && sk.Snapshot == "":
		return FieldError(CodeMissingField, field, `name the directory of skills, relative to the workspace root, such as {"dir": "skills"}, or carry them as a snapshot ({"snapshot": REF}, made by harness submit --skills DIR)`,
			"no skills directory")
	case d != "" && sk.Snapshot != "":
		return FieldError(CodeInvalidField, "skills", `set "dir" or "snapshot", not both`, "the skills are both a directory of the workspace and a snapshot")
	case c.Workspace.File != "":
		f := field
		if sk.Snapshot != "" {
			f = "skills.snapshot"
		}
		return FieldError(CodeInvalidField, f, "leave skills out of a single-file contract, or give the agent the directory (workspace.root)",
			"a single-file contract sees only its file, so it can read no skills")
	case sk.Snapshot != "" && !ValidSnapshotRef(sk.Snapshot):
		return FieldError(CodeInvalidField, "skills.snapshot", `use the ref harness submit --skills printed: "sha256-" and 64 hex digits`,
			"%q is not a snapshot ref", clipField(sk.Snapshot))
	case sk.Snapshot != "":
		return nil
	case strings.ContainsAny(d, "\x00\n\r"):
		return FieldError(CodeInvalidField, field, "remove the NUL, newline or carriage-return byte", "the skills directory %q holds a control byte", clipField(d))
	case strings.HasPrefix(d, "/"):
		return FieldError(CodeInvalidField, field, `write it relative to the workspace root, such as "skills"`, "the skills directory %q is absolute", clipField(d))
	case path.Clean(d) != d:
		return FieldError(CodeInvalidField, field, fmt.Sprintf("write it as %q", path.Clean(d)), "the skills directory %q is not a clean path", clipField(d))
	case d == ".." || strings.HasPrefix(d, "../"):
		return FieldError(CodeInvalidField, field, "name a directory inside the workspace", "the skills directory %q climbs out of the workspace", clipField(d))
	}
	return nil
}

// Validate checks a policy's acts and effects.
func (p *Policy) Validate() error {
	for i, l := range p.Layers {
		if l.Name == "" {
			return FieldError(CodeMissingField, fmt.Sprintf("policy.layers[%d].name", i), "name every layer; verdicts are attributed to it", "layer has no name")
		}
		for j, r := range l.Rules {
			// The rule's path is made only for an error: a valid policy is
			// checked on every op a sandboxer serves.
			at := func() string { return fmt.Sprintf("policy.layers[%d].rules[%d]", i, j) }
			if !validAct(r.Act) {
				return FieldError(CodeInvalidField, at()+".act", `use "read", "write", "exec" or "net"`, "unknown act %q", r.Act)
			}
			if !validEffect(r.Effect) {
				return FieldError(CodeInvalidField, at()+".effect", `use "allow", "ask" or "deny"`, "unknown effect %q", r.Effect)
			}
			if r.Pattern == "" {
				return FieldError(CodeMissingField, at()+".pattern", `give a glob; "*" matches everything`, "rule has no pattern")
			}
		}
	}
	if d := p.Defaults; d != nil {
		for _, f := range []struct{ name, v string }{{"read", d.Read}, {"write", d.Write}, {"exec", d.Exec}, {"net", d.Net}} {
			if f.v != "" && !validEffect(f.v) {
				return FieldError(CodeInvalidField, "policy.defaults."+f.name, `use "allow", "ask" or "deny"`, "unknown effect %q", f.v)
			}
		}
	}
	return nil
}

// validateContext checks the context budget: room for the floor and the
// output reservation, and a share of at most the whole.
func (c *Contract) validateContext() error {
	x := c.Context
	if x == nil {
		return nil
	}
	out := c.Provider.MaxOutputTokens
	if out == 0 {
		out = DefaultMaxOutput
	}
	if x.MaxTokens < 0 || x.MaxTokens > 0 && x.MaxTokens < ContextFloor+out {
		return FieldError(CodeInvalidField, "context.max_tokens", fmt.Sprintf("use at least %d (the floor of %d and provider.max_output_tokens %d), or leave it out for the model's window", ContextFloor+out, ContextFloor, out),
			"a request of %d tokens leaves no room for a prompt beside the output", x.MaxTokens)
	}
	if x.Share < 0 || x.Share > 1 || x.Share != x.Share {
		return FieldError(CodeInvalidField, "context.share", "use a fraction above 0 and at most 1, such as 0.5", "share %v is not a fraction of the budget", x.Share)
	}
	return nil
}

// validateReasoning checks the thinking budget against the output limit it
// is a part of, and the reasoning effort against the values providers take.
func (p ProviderSpec) validateReasoning() error {
	if t := p.Thinking; t != nil {
		limit := p.MaxOutputTokens
		if limit == 0 {
			limit = DefaultMaxOutput
		}
		if t.BudgetTokens < MinThinkingBudget {
			return FieldError(CodeInvalidField, "provider.thinking.budget_tokens", fmt.Sprintf("use %d or more, or leave thinking out", MinThinkingBudget),
				"a thinking budget of %d tokens is under the least providers take", t.BudgetTokens)
		}
		if t.BudgetTokens >= limit {
			return FieldError(CodeInvalidField, "provider.thinking.budget_tokens", "raise provider.max_output_tokens above the budget, or lower the budget",
				"the thinking budget of %d tokens does not fit under max_output_tokens %d, which it is a part of", t.BudgetTokens, limit)
		}
	}
	if e := p.ReasoningEffort; e != "" && !slices.Contains(ReasoningEfforts, e) {
		return FieldError(CodeInvalidField, "provider.reasoning_effort", `use "minimal", "low", "medium" or "high"`, "unknown reasoning effort %q", e)
	}
	return nil
}

func validAct(a string) bool { return a == "read" || a == "write" || a == "exec" || a == "net" }

func validEffect(e string) bool { return e == "allow" || e == "ask" || e == "deny" }

func (c *Contract) fillDefaults() {
	if c.Budget.MaxSteps == 0 {
		c.Budget.MaxSteps = DefaultMaxSteps
	}
	if c.Provider.Pool == "" {
		c.Provider.Pool = DefaultPool
	}
	if c.Provider.MaxOutputTokens == 0 {
		c.Provider.MaxOutputTokens = DefaultMaxOutput
	}
	if c.Sandbox.Backend == "" {
		c.Sandbox.Backend = "auto"
	}
	c.Sandbox.Limits = c.Sandbox.Limits.WithDefaults()
	if c.Stall == nil {
		c.Stall = &StallSpec{Window: DefaultStallWindow, MaxReplans: DefaultStallMaxReplans}
	}
	if c.Workspace.File != "" {
		// A single-file contract's check reads its file, by its name in
		// the directory that is the run's workspace.
		if f := c.Verification.FileContains; f != nil {
			f.Path = c.Workspace.FileName()
		}
		if f := c.Verification.FileEquals; f != nil {
			f.Path = c.Workspace.FileName()
		}
		if f := c.Verification.DocumentContains; f != nil {
			f.Path = c.Workspace.FileName()
		}
	}
}

// ValidToken reports whether s can stand as one NATS subject token in our
// names: non-empty, at most 128 bytes, letters, digits, '-' and '_'.
func ValidToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// DocumentKind is the kind of document a path names by its extension
// ("xlsx", "docx", "pptx" or "pdf", the build tag of its tools), or "".
func DocumentKind(path string) string {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return ""
	}
	switch k := strings.ToLower(path[i+1:]); k {
	case "xlsx", "docx", "pptx", "pdf":
		return k
	}
	return ""
}

// Bounds on a task's images: those the vendors document for one request
// (Anthropic's 5 MB an image; 20 MB a request, the smaller of theirs and
// OpenAI's), and a count.
const (
	MaxImageBytes        = 5 << 20
	MaxRequestImageBytes = 20 << 20
	MaxTaskImages        = 20
)

// ImageTypes are the media types of the images a model takes.
var ImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// validateImages checks a task's images: known media types that their
// bytes bear out, within the bounds.
func validateImages(images []Image) error {
	if len(images) > MaxTaskImages {
		return FieldError(CodeInvalidField, "images", fmt.Sprintf("attach at most %d images", MaxTaskImages), "%d images", len(images))
	}
	total := 0
	for i, im := range images {
		field := fmt.Sprintf("images[%d]", i)
		switch {
		case !ImageTypes[im.MediaType]:
			return FieldError(CodeInvalidField, field+".media_type", `use "image/png", "image/jpeg", "image/gif" or "image/webp"`, "media type %q is not one a model takes", im.MediaType)
		case len(im.Data) == 0:
			return FieldError(CodeMissingField, field+".data", "give the image's bytes, base64-encoded", "the image is empty")
		case len(im.Data) > MaxImageBytes:
			return FieldError(CodeTooLarge, field+".data", "make a smaller copy, or crop it", "the image is %d bytes; images are at most %d", len(im.Data), MaxImageBytes)
		case sniffImage(im.Data) != im.MediaType:
			return FieldError(CodeInvalidField, field+".data", "give the media type the bytes are", "the bytes are %s, not %s", orWord(sniffImage(im.Data), "no image"), im.MediaType)
		}
		total += len(im.Data)
	}
	if total > MaxRequestImageBytes {
		return FieldError(CodeTooLarge, "images", "attach fewer or smaller images", "the images are %d bytes together; a request takes at most %d", total, MaxRequestImageBytes)
	}
	return nil
}

// sniffImage is the media type of an image's bytes by their signature,
// or "".
func sniffImage(b []byte) string {
	switch {
	case len(b) >= 8 && string(b[:8]) == "\x89PNG\r\n\x1a\n":
		return "image/png"
	case len(b) >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff:
		return "image/jpeg"
	case len(b) >= 6 && (string(b[:6]) == "GIF87a" || string(b[:6]) == "GIF89a"):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

func orWord(s, or string) string {
	if s == "" {
		return or
	}
	return s
}
