package coordinator

import (
	"fmt"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/assemble"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// runState is the pure core of one run: what the trace says so far, and the
// decisions that follow from it. It does no I/O and reads no clock; the
// driver feeds it records and the time.
type runState struct {
	run      string
	contract *protocol.Contract
	started  time.Time
	// startedBy is the coordinator that started the run.
	startedBy string
	step      int   // the last committed step
	tokens    int64 // tokens spent by committed steps
	cost      int64 // micro-units spent by committed steps, as priced
	// tree is the root run of the run's agent tree, depth the run's depth
	// below it; spent is what the committed steps drew on the ledger.
	tree  string
	depth int
	spent protocol.Spend
	// budgets is the standing after the driver's last draw, for the
	// index; nil before the first.
	budgets *protocol.Budgets
	// steps are the committed steps as the context assembly reads them;
	// lead the user messages between the task and the first step (a
	// decision's note on a call made before any step); calls find a
	// call's result by its id, as [step index, result index].
	steps    []assemble.Step
	memo     *assemble.Memo // what the run's last assembly measured, for its next
	lead     []protocol.Message
	calls    map[string][2]int
	finished *protocol.Record
	// paused is the pause record while the run waits for a person.
	paused *protocol.Record
	// unpaused names the approval a committed step deferred a call to when
	// no pause record followed it (the coordinator died in between): the
	// pause must be recorded before the run goes on.
	unpaused string
	// remembered are the rules people approved for the rest of the run.
	remembered []protocol.Rule
	// policy is the run's effective policy, before remembered rules: a
	// sub-agent's as its started record contains it, else the contract's,
	// replaced by every policy record. parentPolicy is a sub-agent's
	// parent's, which every later policy is contained in.
	policy       *protocol.Policy
	parentPolicy *protocol.Policy
	// hostAsks counts the decisions on the provider's endpoints, a
	// person's or an approver's at once, which number their approvals
	// (protocol.ProviderApprovalID).
	hostAsks int
	stall    stallState
	// refusals counts the committed turns the model ended with a refusal.
	refusals int
	// usage sums the committed turns' usage.
	usage protocol.Usage
	// tools are the tools the last step offered, toolchain what the
	// sandboxer recognised of the workspace, notes the workspace's memory
	// as the run sees it (the started record's, and what the run's own
	// remember calls wrote); sent and counted sum the assembled requests'
	// bytes and their providers' counts of them, which calibrate the
	// estimate.
	tools     []protocol.ToolSpec
	toolchain *protocol.Toolchain
	// skills is the catalogue of the run's skills, as the first step
	// recorded it.
	skills  []protocol.Skill
	notes   []protocol.Note
	sent    int64
	counted int64
}

// newRunState rebuilds a run from its records. Records must have their
// content resolved (no blob references left). Errors: a trace that does not
// begin with a started record, or whose steps are out of order, is damaged.
func newRunState(run string, recs []protocol.Record) (*runState, error) {
	if len(recs) == 0 || recs[0].Kind != protocol.RecordStarted || recs[0].Contract == nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: it does not begin with a started record", run)
	}
	s := &runState{run: run, contract: recs[0].Contract, started: recs[0].Time, startedBy: recs[0].Coordinator, tree: recs[0].Tree, depth: recs[0].Depth,
		policy: recs[0].Policy, parentPolicy: recs[0].ParentPolicy}
	if s.policy == nil {
		s.policy = s.contract.Policy // a root runs under its own
	}
	if s.tree == "" {
		s.tree = run // a root, or a trace from before agent trees
	}
	s.notes = recs[0].Memory
	// Sized for the trace at hand (about a step a record, a call or so a
	// step), so folding a long one does not grow them again and again.
	s.steps = make([]assemble.Step, 0, len(recs))
	s.memo = &assemble.Memo{}
	s.calls = make(map[string][2]int, len(recs))
	for i := 1; i < len(recs); i++ {
		if err := s.apply(&recs[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// apply folds one committed record into the state.
func (s *runState) apply(rec *protocol.Record) error {
	switch rec.Kind {
	case protocol.RecordStep:
		if rec.Step != s.step+1 {
			return protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: step %d follows step %d", s.run, rec.Step, s.step)
		}
		s.step = rec.Step
		s.tokens = rec.Tokens
		if rec.Cost != nil {
			s.cost = rec.Cost.TotalMicros
		}
		s.spent = s.spent.Add(drawn(rec))
		s.stall.fold(s.contract.Stall, rec)
		if rec.Turn != nil {
			s.usage = s.usage.Add(rec.Turn.Usage)
			if rec.Turn.Finish() == protocol.FinishRefusal {
				s.refusals++
			}
		}
		s.fold(rec)
		s.remembered = append(s.remembered, rec.Remember...)
		for _, dd := range rec.Decided {
			if isHostApproval(dd.Approval) {
				s.hostAsks++
			}
		}
		for _, o := range rec.Observations {
			if o.Approval != "" {
				s.unpaused = o.Approval
			}
		}
	case protocol.RecordPaused:
		s.paused = rec
		s.unpaused = ""
	case protocol.RecordDecision:
		if s.paused == nil || s.paused.Approval != rec.Approval {
			return protocol.Errorf(protocol.CodeInternal, "damaged trace of run %s: a decision on %s with no pause for it", s.run, rec.Approval)
		}
		s.paused = nil
		if isHostApproval(rec.Approval) {
			s.hostAsks++
		}
		if rec.Note != "" {
			s.follow(protocol.Message{Role: protocol.RoleUser, Content: rec.Note})
		}
		s.remembered = append(s.remembered, rec.Remember...)
	case protocol.RecordPolicy:
		c := *s.contract
		c.Policy = rec.Policy
		s.contract = &c
		s.policy = rec.Policy
	case protocol.RecordFinished:
		s.finished = rec
		s.spent = s.spent.Add(drawn(rec))
	}
	return nil
}

// isHostApproval reports whether id is a provider endpoint's approval.
func isHostApproval(id string) bool {
	_, step, _, err := protocol.ParseApprovalID(id)
	return err == nil && step == 0
}

// drawn is what a record says was drawn on the ledger: a step's draws, or
// for a step recorded before draws were, its turn's usage and cost as one
// call; a finished record's draws of a step that never committed.
func drawn(rec *protocol.Record) protocol.Spend {
	var sum protocol.Spend
	for _, d := range rec.Draws {
		sum = sum.Add(d.Spend)
	}
	if len(rec.Draws) == 0 && rec.Kind == protocol.RecordStep && rec.Turn != nil {
		sum = protocol.Spend{InputTokens: rec.Turn.Usage.InputTokens, OutputTokens: rec.Turn.Usage.OutputTokens, Steps: 1}
		if rec.Cost != nil {
			sum.CostMicros = rec.Cost.Micros
		}
	}
	return sum
}

// status is the run's entry in the index with the given status; the
// caller fills in the outcome and reason.
func (s *runState) status(st protocol.Status, coordinator string) *protocol.RunState {
	b := s.budgets
	if b == nil {
		b = &protocol.Budgets{Tree: s.tree, Depth: s.depth}
	}
	bb := *b
	bb.Drawn, bb.Run = nil, s.spent
	var usage *protocol.Usage
	if s.usage != (protocol.Usage{}) {
		u := s.usage
		usage = &u
	}
	return &protocol.RunState{Usage: usage, Run: s.run, Status: st, Step: s.step, Tokens: s.tokens, CostMicros: s.cost, Task: s.contract.Task,
		Coordinator: coordinator, Started: s.started, Tree: s.tree, Parent: s.contract.Parent, Budgets: &bb,
		Pool: s.contract.Provider.Pool, Tenant: wire.TenantOf(s.run)}
}

// deadline is when the run's wall clock runs out, or zero for none. It is
// measured from the started record, so time spent down counts.
func (s *runState) deadline() time.Time {
	if s.contract.Budget.MaxWall <= 0 {
		return time.Time{}
	}
	return s.started.Add(time.Duration(s.contract.Budget.MaxWall))
}

// overBudget reports whether tokens spent exceed the contract's cap.
func (s *runState) overBudget(tokens int64) bool {
	return s.contract.Budget.MaxTokens > 0 && tokens > s.contract.Budget.MaxTokens
}

// needsCheck reports whether the gate runs after a step with this turn:
// not for a run without verification, and not when the budget already ended
// the run.
func (s *runState) needsCheck(turn *protocol.Turn, tokens int64) bool {
	return s.contract.Verification.None == nil && !s.overBudget(tokens)
}

// note is the user message that follows a step's tool results, if any: a
// reminder when the model called no tool, and the failed check.
func (s *runState) note(rec *protocol.Record) string {
	turn, check := rec.Turn, rec.Check
	var parts []string
	if v, tried := s.stall.check(s.contract.Stall, rec); v == stallReplan {
		parts = append(parts, replanNote(tried))
	}
	switch finish := turn.Finish(); {
	case finish == protocol.FinishRefusal:
		// Only a run with a check gets here: told once, it may go on.
		parts = append(parts, refusalNote)
	case finish == protocol.FinishPause:
		// Carried on as it stands: the provider continues the turn.
	case finish == protocol.FinishMaxTokens && len(turn.ToolCalls) == 0:
		parts = append(parts, cutNote)
	case len(turn.ToolCalls) == 0 && s.contract.Verification.None == nil:
		parts = append(parts, "You called no tool, and the task is not verified yet. Continue by calling a tool.")
	}
	if check != nil && !check.Passed {
		parts = append(parts, "[verification] "+check.Detail+" The task is not done yet.")
	}
	return strings.Join(parts, "\n")
}

// refusalNote follows the first refusal of a run with a check; the second
// ends it.
const refusalNote = "[refusal] You refused that turn, and none of its calls was carried out. The task stands and is checked as the first message says. If it can be done safely, go on with it; a second refusal ends the run."

// cutNote follows a turn cut off at its output limit without a call.
const cutNote = "[cut off] Your answer was cut off at its output token limit. Continue from where it stopped, in shorter pieces."

// maxRefusals is how many refusals a run with a check takes: the first is
// reported to the model, the second ends the run model_refused.
const maxRefusals = 2

// result renders the run's result from its finished record.
func (s *runState) result() *protocol.Result {
	r := &protocol.Result{Run: s.run, Steps: s.step, Tokens: s.tokens, Started: s.started}
	if s.finished != nil {
		r.Outcome = s.finished.Outcome
		r.Reason = s.finished.Reason
		r.Finished = s.finished.Time
		r.Success = r.Outcome == protocol.OutcomeSuccess
	}
	return r
}

const systemPrompt = `You are an agent working in a software workspace through tools. Every path is relative to the workspace root. Work in small steps: look before you change, change one thing at a time, and check your work. Commands run through the exec tool as an argument array, never a shell string. When a tool refuses an action, read why and try another way. The task is checked automatically as described in the first message.`

// taskMessage is the first user message: the task and how success is
// checked.
func taskMessage(c *protocol.Contract) string {
	msg := "Task: " + c.Task + "\n\nHow success is checked: " + describe(c.Verification)
	if name := c.Workspace.FileName(); name != "" {
		msg += fmt.Sprintf("\n\nThe workspace is the one file %s: read and write it by that name. Nothing else in the workspace is open to you, and commands run only where the policy allows them.", name)
	}
	return msg
}

// describe renders the verification for the model.
func describe(v protocol.Verification) string {
	switch {
	case v.Command != nil:
		return fmt.Sprintf("after each step the command %s is run in the workspace root, and the task is done when it exits with %d.",
			quoteArgv(v.Command.Argv), v.Command.ExpectExit)
	case v.FileContains != nil:
		return fmt.Sprintf("the task is done when the file %s contains the text %q.", v.FileContains.Path, v.FileContains.Needle)
	case v.FileEquals != nil:
		return fmt.Sprintf("the task is done when the file %s holds exactly the text %q, and nothing else.", v.FileEquals.Path, v.FileEquals.Content)
	case v.None != nil:
		return "there is no automated check; reply without calling a tool when you are done, and the run ends."
	}
	return "unknown."
}

func quoteArgv(argv []string) string {
	return "`" + strings.Join(argv, " ") + "`"
}
