package protocol

import (
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestDecodeContractDefaults(t *testing.T) {
	c, err := DecodeContract([]byte(`{"schema":"harness.contract/v1","task":"fix it","workspace":{"root":"/w"},"verification":{"none":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Budget.MaxSteps != DefaultMaxSteps || c.Provider.Pool != DefaultPool || c.Sandbox.Backend != "auto" ||
		c.Sandbox.Limits.WallSecs != DefaultWallSecs || c.Sandbox.Limits.Pids != DefaultPids {
		t.Errorf("defaults not filled: %+v", c)
	}
}

func TestDecodeContractErrors(t *testing.T) {
	const good = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"command":{"argv":["go","test"]}}}`
	tests := []struct {
		name  string
		in    string
		want  *Error
		field string
	}{
		{"empty", ``, ErrMalformed, ""},
		{"trailing data", good + `{}`, ErrMalformed, ""},
		{"case-folded field", strings.Replace(good, `"task"`, `"Task"`, 1), ErrUnknownField, "Task"},
		{"unknown in list", strings.Replace(good, `"verification"`, `"policy":{"layers":[{"name":"a","rules":[{"act":"read","effect":"deny","pattern":"x","why":"y"}]}]},"verification"`, 1), ErrUnknownField, "policy.layers[0].rules[0].why"},
		{"empty argv", strings.Replace(good, `["go","test"]`, `[]`, 1), ErrMissingField, "verification.command.argv"},
		{"nul in root", strings.Replace(good, `"/w"`, `"/w\u0000x"`, 1), ErrInvalidField, "workspace.root"},
		{"negative steps", strings.Replace(good, `"task"`, `"budget":{"max_steps":-1},"task"`, 1), ErrInvalidField, "budget.max_steps"},
		{"bad backend", strings.Replace(good, `"task"`, `"sandbox":{"backend":"vm"},"task"`, 1), ErrInvalidField, "sandbox.backend"},
		{"bad pool", strings.Replace(good, `"task"`, `"provider":{"pool":"a.b"},"task"`, 1), ErrInvalidField, "provider.pool"},
		{"thinking under the least", strings.Replace(good, `"task"`, `"provider":{"thinking":{"budget_tokens":512}},"task"`, 1), ErrInvalidField, "provider.thinking.budget_tokens"},
		{"thinking over the output", strings.Replace(good, `"task"`, `"provider":{"thinking":{"budget_tokens":4096}},"task"`, 1), ErrInvalidField, "provider.thinking.budget_tokens"},
		{"thinking unknown field", strings.Replace(good, `"task"`, `"provider":{"thinking":{"budget":2048}},"task"`, 1), ErrUnknownField, "provider.thinking.budget"},
		{"context under the floor", strings.Replace(good, `"task"`, `"context":{"max_tokens":3000},"task"`, 1), ErrInvalidField, "context.max_tokens"},
		{"context share over the whole", strings.Replace(good, `"task"`, `"context":{"share":1.5},"task"`, 1), ErrInvalidField, "context.share"},
		{"context share of nothing", strings.Replace(good, `"task"`, `"context":{"max_tokens":50000,"share":0},"task"`, 1), ErrInvalidField, "context.share"},
		{"unknown effort", strings.Replace(good, `"task"`, `"provider":{"reasoning_effort":"max"},"task"`, 1), ErrInvalidField, "provider.reasoning_effort"},
		{"document check of a text file", strings.Replace(good, `{"command":{"argv":["go","test"]}}`, `{"document_contains":{"path":"a.txt","needle":"x"}}`, 1), ErrInvalidField, "verification.document_contains.path"},
		{"document check without needle", strings.Replace(good, `{"command":{"argv":["go","test"]}}`, `{"document_contains":{"path":"a.docx"}}`, 1), ErrMissingField, "verification.document_contains.needle"},
		{"image of an unknown type", strings.Replace(good, `"task"`, `"images":[{"media_type":"image/tiff","data":"iVBORw0KGgo="}],"task"`, 1), ErrInvalidField, "images[0].media_type"},
		{"image whose bytes are not its type", strings.Replace(good, `"task"`, `"images":[{"media_type":"image/png","data":"/9j/4AAQ"}],"task"`, 1), ErrInvalidField, "images[0].data"},
		{"empty image", strings.Replace(good, `"task"`, `"images":[{"media_type":"image/png","data":""}],"task"`, 1), ErrMissingField, "images[0].data"},
		{"file check without needle", strings.Replace(good, `{"command":{"argv":["go","test"]}}`, `{"file_contains":{"path":"a"}}`, 1), ErrMissingField, "verification.file_contains.needle"},
		{"too large", `{"task":"` + strings.Repeat("a", MaxContractBytes) + `"}`, ErrTooLarge, ""},
		{"duplicate at the top", strings.Replace(good, `"task":"t"`, `"task":"t","task":"u"`, 1), ErrMalformed, "task"},
		{"duplicate default", strings.Replace(good, `"task"`, `"policy":{"defaults":{"write":"deny","read":"allow","write":"allow"}},"task"`, 1), ErrMalformed, "policy.defaults.write"},
		{"duplicate in a list", strings.Replace(good, `"task"`, `"policy":{"layers":[{"name":"a","rules":[]},{"name":"b","rules":[{"act":"read","effect":"deny","effect":"allow","pattern":"x"}]}]},"task"`, 1), ErrMalformed, "policy.layers[1].rules[0].effect"},
		{"duplicate object", strings.Replace(good, `"task"`, `"policy":{"defaults":{"net":"deny"}},"policy":{"defaults":{"net":"allow"}},"task"`, 1), ErrMalformed, "policy"},
		{"duplicate deep in an argv's object", strings.Replace(good, `{"command":{"argv":["go","test"]}}`, `{"command":{"argv":["go","test"],"argv":["true"]}}`, 1), ErrMalformed, "verification.command.argv"},
		{"duplicate unknown field is still a duplicate", strings.Replace(good, `"task"`, `"x":1,"x":2,"task"`, 1), ErrMalformed, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeContract([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeContract = %v, want code %v", err, tt.want.Code)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Field != tt.field {
				t.Errorf("field = %q, want %q", pe.Field, tt.field)
			}
		})
	}
}

// TestSingleFileAndSkills checks the verifications of a single-file
// contract (the path may be left out, and is then its file; another path
// is refused), file_equals on a directory workspace, and the skills
// directory's validation.
func TestSingleFileAndSkills(t *testing.T) {
	const file = `{"schema":"harness.contract/v1","task":"t","workspace":{"file":"/w/notes.txt"},"verification":V}`
	const root = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}},"skills":S}`
	tests := []struct {
		name, in string
		want     *Error // nil: valid
		field    string
		path     string // the checked path after decoding
	}{
		{"equals without a path", strings.Replace(file, "V", `{"file_equals":{"content":"x"}}`, 1), nil, "", "notes.txt"},
		{"equals naming the file", strings.Replace(file, "V", `{"file_equals":{"path":"notes.txt","content":"x"}}`, 1), nil, "", "notes.txt"},
		{"equals naming it whole", strings.Replace(file, "V", `{"file_equals":{"path":"/w/notes.txt","content":""}}`, 1), nil, "", "notes.txt"},
		{"contains without a path", strings.Replace(file, "V", `{"file_contains":{"needle":"x"}}`, 1), nil, "", "notes.txt"},
		{"equals naming a sibling", strings.Replace(file, "V", `{"file_equals":{"path":"other.txt","content":"x"}}`, 1), ErrInvalidField, "verification.file_equals.path", ""},
		{"contains naming a sibling", strings.Replace(file, "V", `{"file_contains":{"path":"../etc/passwd","needle":"x"}}`, 1), ErrInvalidField, "verification.file_contains.path", ""},
		{"equals with an unknown field", strings.Replace(file, "V", `{"file_equals":{"text":"x"}}`, 1), ErrUnknownField, "verification.file_equals.text", ""},
		{"equals beside contains", strings.Replace(file, "V", `{"file_equals":{"content":"x"},"file_contains":{"needle":"x"}}`, 1), ErrInvalidField, "verification", ""},
		{"equals with a NUL", strings.Replace(file, "V", `{"file_equals":{"content":"a\u0000"}}`, 1), ErrInvalidField, "verification.file_equals.content", ""},
		{"equals on a root needs a path", strings.Replace(strings.Replace(root, `,"skills":S`, "", 1), `{"none":{}}`, `{"file_equals":{"content":"x"}}`, 1), ErrMissingField, "verification.file_equals.path", ""},
		{"skills", strings.Replace(root, "S", `{"dir":"docs/skills"}`, 1), nil, "", ""},
		{"skills at the root", strings.Replace(root, "S", `{"dir":"."}`, 1), nil, "", ""},
		{"skills without a dir", strings.Replace(root, "S", `{}`, 1), ErrMissingField, "skills.dir", ""},
		{"skills absolute", strings.Replace(root, "S", `{"dir":"/etc"}`, 1), ErrInvalidField, "skills.dir", ""},
		{"skills climbing out", strings.Replace(root, "S", `{"dir":"../other"}`, 1), ErrInvalidField, "skills.dir", ""},
		{"skills unclean", strings.Replace(root, "S", `{"dir":"docs//skills/"}`, 1), ErrInvalidField, "skills.dir", ""},
		{"skills unknown field", strings.Replace(root, "S", `{"dir":"s","path":"x"}`, 1), ErrUnknownField, "skills.path", ""},
		{"skills as a snapshot", strings.Replace(root, "S", `{"snapshot":"sha256-abababababababababababababababababababababababababababababababab"}`, 1), nil, "", ""},
		{"skills as a snapshot of a snapshot workspace", strings.Replace(strings.Replace(root, "S", `{"snapshot":"sha256-abababababababababababababababababababababababababababababababab"}`, 1), `{"root":"/w"}`, `{"snapshot":"sha256-abababababababababababababababababababababababababababababababab"}`, 1), nil, "", ""},
		{"skills both a dir and a snapshot", strings.Replace(root, "S", `{"dir":"s","snapshot":"sha256-abababababababababababababababababababababababababababababababab"}`, 1), ErrInvalidField, "skills", ""},
		{"skills snapshot not a ref", strings.Replace(root, "S", `{"snapshot":"sha256-xyz"}`, 1), ErrInvalidField, "skills.snapshot", ""},
		{"skills snapshot of a single file", strings.Replace(strings.Replace(file, "V", `{"none":{}}`, 1), `"task"`, `"skills":{"snapshot":"sha256-abababababababababababababababababababababababababababababababab"},"task"`, 1), ErrInvalidField, "skills.snapshot", ""},
		{"skills of a single file", strings.Replace(strings.Replace(file, "V", `{"none":{}}`, 1), `"task"`, `"skills":{"dir":"s"},"task"`, 1), ErrInvalidField, "skills.dir", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeContract([]byte(tt.in))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("DecodeContract(%s) = %v, want it accepted", tt.in, err)
				}
				if got := c.Verification.CheckedFile(); got != tt.path {
					t.Errorf("checked path = %q, want %q", got, tt.path)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeContract(%s) = %v, want code %v", tt.in, err, tt.want.Code)
			}
			if pe := AsError(err); pe.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", pe.Field, tt.field, err)
			}
		})
	}
}

// TestDecodeContractDuplicateKeys checks that a key given twice in one
// object is refused wherever it is, by name, and that the same key in
// different objects, or keys differing in case, are not duplicates.
func TestDecodeContractDuplicateKeys(t *testing.T) {
	const dup = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}},` +
		`"policy":{"defaults":{"write":"deny","write":"allow"}}}`
	_, err := DecodeContract([]byte(dup))
	pe := AsError(err)
	if !errors.Is(err, ErrMalformed) || pe.Field != "policy.defaults.write" || !strings.Contains(pe.Message, `"write" appears twice in policy.defaults`) {
		t.Fatalf("DecodeContract(duplicate write) = %v, want malformed naming policy.defaults.write", err)
	}
	// The same key in sibling objects is not a duplicate.
	const siblings = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}},` +
		`"policy":{"layers":[{"name":"a","rules":[{"act":"read","effect":"deny","pattern":"x"},{"act":"write","effect":"deny","pattern":"x"}]},{"name":"b","rules":[]}],` +
		`"defaults":{"read":"allow","write":"ask"}}}`
	c, err := DecodeContract([]byte(siblings))
	if err != nil {
		t.Fatalf("DecodeContract(siblings) = %v, want it accepted", err)
	}
	if c.Policy == nil || len(c.Policy.Layers) != 2 || c.Policy.Defaults.Write != "ask" {
		t.Errorf("DecodeContract(siblings) policy = %+v", c.Policy)
	}
	// Keys that differ in case are not duplicates; the unknown one is
	// refused as unknown.
	const cased = `{"schema":"harness.contract/v1","task":"t","Task":"u","workspace":{"root":"/w"},"verification":{"none":{}}}`
	if _, err := DecodeContract([]byte(cased)); !errors.Is(err, ErrUnknownField) {
		t.Errorf("DecodeContract(task and Task) = %v, want unknown_field", err)
	}
}

// TestErrorCrossesTheWire checks a coded error still matches its sentinel
// after a JSON round trip, as it does after a NATS round trip.
func TestErrorCrossesTheWire(t *testing.T) {
	data, err := json.Marshal(FieldError(CodeUnknownField, "budget.x", "fix it", "no such field"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"name":"unknown_field"`) {
		t.Errorf("wire form %s lacks the code's name", data)
	}
	var back Error
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(&back, ErrUnknownField) || errors.Is(&back, ErrMissingField) {
		t.Errorf("decoded error %v does not match by code", &back)
	}
	if !Errorf(CodeRateLimited, "x").Retryable() || Errorf(CodeProviderAuth, "x").Retryable() {
		t.Error("retryability is wrong for rate_limited or provider_auth")
	}
}

func TestRunIDFor(t *testing.T) {
	if got := RunIDFor("job-42"); got != "job-42" {
		t.Errorf("RunIDFor(job-42) = %q, want it kept", got)
	}
	got := RunIDFor("a.b/c")
	if !ValidToken(got) || got != RunIDFor("a.b/c") || got == RunIDFor("a.b/d") {
		t.Errorf("RunIDFor(a.b/c) = %q, want a stable valid token", got)
	}
}

// TestGolden pins the wire JSON of every type that crosses a process
// boundary. Regenerate with go test ./pkg/protocol -update.
func TestGolden(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	call := ToolCall{ID: "call_1", Name: "edit_file", Arguments: json.RawMessage(`{"path":"calc.go","search":"a - b","replace":"a + b"}`)}
	contract, err := DecodeContract(mustRead(t, "testdata/contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	turn := &Turn{Text: "Fixing.", ToolCalls: []ToolCall{call}, Usage: Usage{InputTokens: 700, OutputTokens: 50}, Model: "gpt-4.1", FinishReason: "tool_calls", Served: "openai"}
	exit := &ExecReport{Backend: "floor", Argv: []string{"go", "test", "./..."}, Exited: true, ExitCode: 0, DurationMS: 812, Unenforced: []string{"memory", "pids"}}
	values := map[string]any{
		"contract_defaults": contract,
		"step_task": &StepTask{Run: "r1", Step: 3, Attempt: 1, Deadline: at, Request: CompletionRequest{
			Model: "gpt-4.1", System: "sys", MaxOutputTokens: 4096,
			Messages: []Message{{Role: RoleUser, Content: "Task: fix"}, {Role: RoleAssistant, ToolCalls: []ToolCall{call}}, {Role: RoleTool, ToolCallID: "call_1", Content: "ok"}},
			Tools:    []ToolSpec{{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}},
		}},
		"step_task_base": &StepTask{Run: "r1", Step: 4, Attempt: 1, Deadline: at, Transcript: "3f2a9c1d0b7e4a65.4",
			Base: &TaskBase{Transcript: "3f2a9c1d0b7e4a65.3", Messages: 3, Frame: true},
			Request: CompletionRequest{Model: "gpt-4.1", MaxOutputTokens: 4096,
				Messages: []Message{{Role: RoleAssistant, Content: "Done."}}}},
		"whole_request": &WholeRequest{Request: &CompletionRequest{Model: "gpt-4.1", System: "sys", MaxOutputTokens: 4096,
			Messages: []Message{{Role: RoleUser, Content: "Task: fix"}, {Role: RoleAssistant, Content: "Done."}}}},
		"turn_result":   &TurnResult{Run: "r1", Step: 3, Attempt: 1, Turn: turn, Worker: "worker-1", LatencyMS: 950},
		"turn_error":    &TurnResult{Run: "r1", Step: 3, Attempt: 2, Error: &Error{Code: CodeRateLimited, Message: "slow down", RetryAfterMS: 2000}},
		"sandbox_op":    &SandboxOp{OpID: "r1.3.0.1", Run: "r1", Kind: OpTool, Workspace: "/srv/w", Call: &call},
		"sandbox_reply": &SandboxReply{OpID: "r1.3.0.1", Node: "sb-1", Observation: &Observation{CallID: "call_1", Tool: "edit_file", Content: "edited calc.go", Changed: true}},
		"verify_reply":  &SandboxReply{OpID: "r1.3.verify.1", Node: "sb-1", Check: &CheckResult{Kind: "command", Passed: true, Detail: "`go test ./...` exited 0 as expected.", Exec: exit}},
		"record_step": &Record{Format: TraceFormat, Kind: RecordStep, Run: "r1", Step: 3, Time: at, Turn: turn, Tokens: 1290, Changed: true,
			Observations: []Observation{{CallID: "call_1", Tool: "edit_file", Content: "edited calc.go", Changed: true}, {CallID: "call_2", Tool: "read_file", Ref: "sha256-abc", Size: 9000}},
			Check:        &CheckResult{Kind: "command", Passed: true, Detail: "ok", Exec: exit},
			Draws:        []Draw{{Key: "r1.3.1", Spend: Spend{InputTokens: 700, OutputTokens: 50, CostMicros: 1800, Steps: 1}}}},
		"record_started":  &Record{Format: TraceFormat, Kind: RecordStarted, Run: "r2", Time: at, Contract: contract, Coordinator: "c1", Tree: "r1", Depth: 1},
		"record_finished": &Record{Format: TraceFormat, Kind: RecordFinished, Run: "r1", Step: 3, Time: at, Outcome: OutcomeSuccess, Reason: "passed", Tokens: 1290},
		"event":           &Event{Run: "r1", Step: 3, Kind: EventToolCall, Time: at, Tool: "edit_file", Target: "calc.go"},
		"run_state":       &RunState{Run: "r1", Status: StatusCompleted, Outcome: OutcomeSuccess, Step: 3, Tokens: 1290, Task: "fix", Started: at, Updated: at},
		"run_state_budgets": &RunState{Run: "r2", Status: StatusRunning, Step: 2, Tokens: 900, Task: "help", Started: at, Updated: at, Tree: "r1", Parent: "r1",
			Budgets: &Budgets{Tree: "r1", Depth: 1, Run: Spend{InputTokens: 800, OutputTokens: 100, Steps: 2},
				RunRemaining: &Allowance{InputTokens: Unlimited, OutputTokens: Unlimited, Tokens: 9100, CostMicros: Unlimited, Steps: Unlimited},
				TreeSpent:    Spend{InputTokens: 2000, OutputTokens: 300, Steps: 5}, TreeReserved: Spend{InputTokens: 1200, OutputTokens: 4096, Steps: 1},
				TreeRemaining: &Allowance{InputTokens: Unlimited, OutputTokens: Unlimited, Tokens: 92404, CostMicros: Unlimited, Steps: 14}}},
		"event_spend_draw": &Event{Run: "r2", Step: 2, Kind: EventSpendDraw, Time: at, Tokens: 450,
			Budgets: &Budgets{Tree: "r1", Depth: 1, Drawn: &Spend{InputTokens: 400, OutputTokens: 50, Steps: 1}, Run: Spend{InputTokens: 800, OutputTokens: 100, Steps: 2}}},
		"submit_reply": &SubmitReply{Error: FieldError(CodeUnknownField, "budget.max_stepz", "known fields here: max_steps, max_tokens, max_wall", `"max_stepz" is not a field of budget`)},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := mustRead(t, path)
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s changed (-golden +now):\n%s\nif intended, go test ./pkg/protocol -update", path, diff)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeContract(f *testing.F) {
	f.Add([]byte(`{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}}}`))
	f.Add([]byte(`{"schema":"harness.contract/v1","budget":{"max_wall":"1m"},"policy":{"layers":[{"name":"a","rules":[]}]}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"schema":"harness.contract/v1","task":"t","task":"u","workspace":{"root":"/w"},"verification":{"none":{}}}`))
	f.Add([]byte(`{"policy":{"layers":[{"name":"a","rules":[{"act":"read","act":"write"}]}],"defaults":{"net":"deny","net":"allow"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeContract(data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Code == 0 || pe.Message == "" {
				t.Fatalf("DecodeContract(%q) = %v, want a coded *Error with a message", data, err)
			}
			return
		}
		if c.Schema != ContractSchema || c.Task == "" || c.Verification.Kind() == "" || c.Budget.MaxSteps <= 0 {
			t.Fatalf("DecodeContract(%q) accepted an invalid contract: %+v", data, c)
		}
	})
}

// TestObservationState checks the status a record written before Status
// existed is given, and that a set Status wins over what the fields say.
func TestObservationState(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Observation
		want CallStatus
	}{
		{"plain", Observation{Content: "ok"}, CallOK},
		{"an error", Observation{IsError: true}, CallFailed},
		{"a refusal", Observation{IsError: true, Refused: &Refusal{Act: "write"}}, CallRefused},
		{"waiting", Observation{Approval: "r.1.0"}, CallAwaitingApproval},
		{"set wins", Observation{IsError: true, Status: CallIndeterminate}, CallIndeterminate},
		{"set ok wins", Observation{Status: CallNotRun}, CallNotRun},
	} {
		if got := tt.o.State(); got != tt.want {
			t.Errorf("%s: State() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTurnFinish(t *testing.T) {
	for vendor, want := range map[string]string{
		"": "", "stop": FinishStop, "end_turn": FinishStop, "stop_sequence": FinishStop,
		"tool_calls": FinishToolCalls, "tool_use": FinishToolCalls, "function_call": FinishToolCalls,
		"length": FinishMaxTokens, "max_tokens": FinishMaxTokens, "model_context_window_exceeded": FinishMaxTokens,
		"pause_turn": FinishPause, "refusal": FinishRefusal, "content_filter": FinishFilter, "something_new": "something_new",
	} {
		if got := (&Turn{FinishReason: vendor}).Finish(); got != want {
			t.Errorf("Finish of %q = %q, want %q", vendor, got, want)
		}
	}
}

// TestThinkingFitsUnderTheOutput accepts a thinking budget under a raised
// output limit, and a known effort.
func TestThinkingFitsUnderTheOutput(t *testing.T) {
	raw := `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}},` +
		`"provider":{"max_output_tokens":16000,"thinking":{"budget_tokens":10000},"reasoning_effort":"high"}}`
	c, err := DecodeContract([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if c.Provider.Thinking == nil || c.Provider.Thinking.BudgetTokens != 10000 || c.Provider.ReasoningEffort != "high" {
		t.Errorf("provider = %+v, want thinking 10000 and effort high", c.Provider)
	}
}

// TestSingleFileDocumentCheck: a single-file contract's document_contains
// reads its file, by its name in the run's workspace, its path left out or
// given whole.
func TestSingleFileDocumentCheck(t *testing.T) {
	for _, path := range []string{"", "/data/report.pdf", "report.pdf"} {
		c, err := DecodeContract([]byte(`{"schema":"harness.contract/v1","task":"t","workspace":{"file":"/data/report.pdf"},` +
			`"verification":{"document_contains":{"path":"` + path + `","needle":"total"}}}`))
		if err != nil {
			t.Fatalf("path %q: %v", path, err)
		}
		if got := c.Verification.CheckedFile(); got != "report.pdf" || DocumentKind(got) != "pdf" {
			t.Errorf("path %q: checks %q (kind %q), want report.pdf, a pdf", path, got, DocumentKind(got))
		}
	}
}

// TestValidToolName holds the tool-name check to what providers accept,
// the regular expression ^[a-zA-Z0-9_-]{1,64}$, on the edges and on
// random names drawn from letters, digits and the bytes around them.
func TestValidToolName(t *testing.T) {
	want := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	cases := []string{"", "a", "read_file", "mcp__web__fetch", "A-Z_0-9", strings.Repeat("x", 64), strings.Repeat("x", 65),
		"read file", "é", "a.b", "a/b", "a\x00", "tool\n", "ünïcode", "@", "`", "[", "{", ":"}
	alphabet := "azAZ09_-@`[{:/. \x00\xff"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(70))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, name := range cases {
		if got := ValidToolName(name); got != want.MatchString(name) {
			t.Errorf("ValidToolName(%q) = %v, want %v", name, got, !got)
		}
	}
}
