package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// maxShown bounds the text of one observation, argument or message the
// pages show; the rest is counted, and `harness trace --json` has it all.
const maxShown = 4000

// Entry is one moment of a run's story, in the trace's order: its start,
// a step, a pause, a person's decision, a change of policy, its end; or a
// live event the console heard (a retry, a provider fallen over), which
// the trace does not keep.
type Entry struct {
	Kind  string // started, step, paused, decision, policy, finished, live
	Step  int
	Time  time.Time
	Title string
	// started
	Task, Workspace, Verification, Budget, Coordinator string
	// step
	Text        string
	Thinking    []string
	Model       string
	Served      string
	TurnTokens  string // this turn's input and output
	Tokens      int64  // the run's, after the step
	Cost        string
	Calls       []Call
	Check       *protocol.CheckResult
	Draws       []Draw
	Note        string
	Assembled   *protocol.Assembly
	Rereads     int
	Immediate   []string // decisions an approver gave at once, each "approval: approve by X"
	HasRequest  bool
	MemoryNotes int
	// paused, decision, finished, live
	Approval string
	Decision *DecisionView
	Outcome  protocol.Outcome
	Reason   string
	Changes  []string
}

// Call is one tool call of a step, as the timeline shows it: what the model
// asked, the verdict with the rule and layer that decided it, and what
// came of it. A refused call shows the refusal, never content.
type Call struct {
	ID, Name  string
	Arguments string
	Target    string
	Verdict   string // allow, deny, ask, approved; coordinator for a call the policy does not judge
	Rule      string
	Layer     string
	Status    protocol.CallStatus
	Refused   bool
	Approval  string
	Output    string
	Cut       int // bytes of Output not shown
	Exec      *protocol.ExecReport
	Diff      []DiffLine
}

// DiffLine is one line of the change a write or an edit makes: Op is "+",
// "-" or " ", or "@" for a heading.
type DiffLine struct {
	Op, Text string
}

// Draw is one settled charge on the budget ledger.
type Draw struct {
	Key, Spend string
}

// DecisionView is a person's decision as the timeline shows it.
type DecisionView struct {
	Approve  bool
	By       string
	Reason   string
	Rewrite  string
	Remember bool
	Calls    []Call // the action as performed (or refused)
}

// Story is a run's trace as a timeline.
type Story struct {
	Run     string
	Entries []Entry
}

// BuildStory turns a run's trace (content held by reference filled in)
// into its timeline. The verdict of a call the policy allowed is not
// recorded; it is judged again here under the run's policy as the trace
// had it at that step, which is what the coordinator judged it by.
func BuildStory(run string, recs []protocol.Record) *Story {
	st := &Story{Run: run}
	var (
		proto    *protocol.Policy
		oneFile  string
		remember []protocol.Rule
		tools    []protocol.ToolSpec
		skills   []protocol.Skill
	)
	compiled := func() *policy.Policy {
		p := policy.Default()
		if proto != nil {
			if c, err := policy.FromProtocol(proto); err == nil {
				p = c
			}
		}
		if oneFile != "" {
			p = p.OneFile(oneFile)
		}
		var rules []policy.Rule
		for _, r := range remember {
			if pr, err := policy.ParseRule(r); err == nil {
				rules = append(rules, pr)
			}
		}
		if len(rules) > 0 {
			p = p.Remember(rules...)
		}
		return p
	}
	for i := range recs {
		r := &recs[i]
		e := Entry{Kind: r.Kind, Step: r.Step, Time: r.Time}
		switch r.Kind {
		case protocol.RecordStarted:
			e.Title = "started"
			e.Coordinator = r.Coordinator
			e.MemoryNotes = len(r.Memory)
			if c := r.Contract; c != nil {
				proto = cmp.Or(r.Policy, c.Policy)
				oneFile = c.Workspace.FileName()
				e.Task = c.Task
				e.Workspace = workspaceOf(c)
				e.Verification = c.Verification.Kind()
				e.Budget = budgetOf(c)
			}
		case protocol.RecordStep:
			e.Title = fmt.Sprintf("step %d", r.Step)
			if len(r.Tools) > 0 {
				tools = r.Tools
			}
			if len(r.Skills) > 0 {
				skills = r.Skills
			}
			e.Tokens = r.Tokens
			e.Note = r.Note
			e.Check = r.Check
			e.Assembled = r.Assembled
			e.Rereads = len(r.Rereads)
			e.HasRequest = r.Turn != nil
			if r.Cost != nil {
				e.Cost = costOf(r.Cost.Micros, r.Cost.Priced)
			}
			for _, d := range r.Draws {
				e.Draws = append(e.Draws, Draw{Key: d.Key, Spend: spendOf(d.Spend)})
			}
			for _, d := range r.Decided {
				if d.Decision != nil {
					e.Immediate = append(e.Immediate, fmt.Sprintf("%s: %s by %s", d.Approval, word(d.Decision.Approve), cmp.Or(d.Decision.By, "the approver")))
				}
			}
			if t := r.Turn; t != nil {
				e.Text, _ = cut(t.Text)
				for _, th := range t.Thinking {
					if th.Text != "" {
						s, _ := cut(th.Text)
						e.Thinking = append(e.Thinking, s)
					}
				}
				e.Model, e.Served = t.Model, t.Served
				e.TurnTokens = fmt.Sprintf("%d in, %d out", t.Usage.InputTokens, t.Usage.OutputTokens)
				pol := compiled()
				for ci := range t.ToolCalls {
					e.Calls = append(e.Calls, callOf(&t.ToolCalls[ci], observationFor(r.Observations, ci, t.ToolCalls[ci].ID), pol, tools, skills))
				}
			}
		case protocol.RecordPaused:
			e.Title = "paused for a person"
			e.Approval = r.Approval
			e.Reason = r.Reason
		case protocol.RecordDecision:
			e.Title = "a person decided"
			e.Approval = r.Approval
			remember = append(remember, r.Remember...)
			if d := r.Decision; d != nil {
				dv := &DecisionView{Approve: d.Approve, By: d.By, Reason: d.Reason, Remember: d.Remember}
				if len(d.Rewrite) > 0 {
					dv.Rewrite, _ = cut(pretty(d.Rewrite))
				}
				for oi := range r.Observations {
					o := &r.Observations[oi]
					dv.Calls = append(dv.Calls, observedCall(o))
				}
				e.Decision = dv
			}
		case protocol.RecordPolicy:
			e.Title = "policy replaced"
			proto = r.Policy
			if r.Policy != nil {
				e.Reason = policySummary(r.Policy)
			}
		case protocol.RecordFinished:
			e.Title = "finished"
			e.Outcome, e.Reason = r.Outcome, r.Reason
			if p := r.Patch; p != nil {
				for _, f := range p.Files {
					e.Changes = append(e.Changes, f.Path)
				}
				if p.FilesOmitted > 0 {
					e.Changes = append(e.Changes, fmt.Sprintf("and %d more", p.FilesOmitted))
				}
			}
		default:
			e.Title = r.Kind
		}
		st.Entries = append(st.Entries, e)
	}
	return st
}

// observationFor finds the observation of call i: by its id, else by
// position.
func observationFor(obs []protocol.Observation, i int, id string) *protocol.Observation {
	for k := range obs {
		if id != "" && obs[k].CallID == id {
			return &obs[k]
		}
	}
	if i < len(obs) && (obs[i].CallID == "" || id == "") {
		return &obs[i]
	}
	return nil
}

func callOf(tc *protocol.ToolCall, o *protocol.Observation, pol *policy.Policy, tools []protocol.ToolSpec, skills []protocol.Skill) Call {
	c := Call{ID: tc.ID, Name: tc.Name}
	c.Arguments, _ = cut(pretty(tc.Arguments))
	judged := tc
	switch tc.Name {
	case coordinator.SpawnTool, coordinator.RememberTool:
		// The coordinator answers these itself: no act of the policy's (a
		// sub-agent runs under its parent's policy, within the tree's
		// budget).
		c.Verdict = "coordinator"
		if o != nil {
			fillObservation(&c, o)
		}
		return c
	case coordinator.ReadSkillTool:
		// Judged as the read of the skill's file, as the coordinator does.
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(tc.Arguments, &a)
		for _, sk := range skills {
			if sk.Name == a.Name {
				args, _ := json.Marshal(map[string]string{"path": sk.Path})
				judged = &protocol.ToolCall{ID: tc.ID, Name: "read_file", Arguments: args}
			}
		}
	}
	var g *protocol.ToolGate
	for _, t := range tools {
		if t.Name == tc.Name {
			g = t.Gate
		}
	}
	v, _ := gate.VerdictOf(pol, judged, g)
	c.Target = v.Target
	switch {
	case o != nil && o.Refused != nil:
		c.Verdict, c.Rule, c.Layer, c.Refused = o.Refused.Effect, o.Refused.Rule, o.Refused.Layer, true
		c.Target = o.Refused.Target
	case o != nil && o.Approval != "":
		c.Verdict, c.Rule, c.Layer, c.Approval = "ask", v.Rule, v.Layer, o.Approval
	case v.Effect == policy.Allow:
		c.Verdict, c.Rule, c.Layer = "allow", v.Rule, v.Layer
	default:
		// It ran, so a person approved it (the rule that asked is shown).
		c.Verdict, c.Rule, c.Layer = "approved", v.Rule, v.Layer
	}
	if o != nil {
		fillObservation(&c, o)
	}
	if !c.Refused && c.Approval == "" {
		c.Diff = diffOf(tc)
	}
	return c
}

// observedCall is a call known from its observation alone (the action a
// decision performed).
func observedCall(o *protocol.Observation) Call {
	c := Call{ID: o.CallID, Name: o.Tool, Verdict: "approved"}
	if o.Refused != nil {
		c.Verdict, c.Rule, c.Layer, c.Refused, c.Target = o.Refused.Effect, o.Refused.Rule, o.Refused.Layer, true, o.Refused.Target
	}
	fillObservation(&c, o)
	return c
}

// fillObservation shows what came of a call. A refused call's content is
// never shown: a refused read shows that it was refused, not the file.
func fillObservation(c *Call, o *protocol.Observation) {
	c.Status = o.Status
	if c.Status == "" {
		switch {
		case o.Refused != nil:
			c.Status = protocol.CallRefused
		case o.IsError:
			c.Status = protocol.CallFailed
		default:
			c.Status = protocol.CallOK
		}
	}
	if o.Refused != nil || c.Status == protocol.CallRefused {
		c.Refused = true
		return
	}
	if o.Approval != "" {
		return // nothing ran yet
	}
	c.Exec = o.Exec
	c.Output, c.Cut = cut(o.Content)
}

// diffOf is the change a write or an edit makes, from its arguments.
func diffOf(tc *protocol.ToolCall) []DiffLine {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Search  string `json:"search"`
		Replace string `json:"replace"`
	}
	if json.Unmarshal(tc.Arguments, &a) != nil {
		return nil
	}
	var out []DiffLine
	add := func(op, text string) {
		text, _ = cut(text)
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			out = append(out, DiffLine{Op: op, Text: l})
		}
	}
	switch tc.Name {
	case "write_file":
		out = append(out, DiffLine{Op: "@", Text: "write " + a.Path})
		add("+", a.Content)
	case "edit_file":
		out = append(out, DiffLine{Op: "@", Text: "edit " + a.Path})
		add("-", a.Search)
		add("+", a.Replace)
	}
	return out
}

func workspaceOf(c *protocol.Contract) string {
	w := c.Workspace
	switch {
	case w.File != "":
		return w.File + " (one file)"
	case w.Snapshot != "":
		return "snapshot " + w.Snapshot
	}
	return w.Root
}

func budgetOf(c *protocol.Contract) string {
	b := c.Budget
	parts := []string{fmt.Sprintf("%d steps", b.MaxSteps)}
	if b.MaxWall > 0 {
		parts = append(parts, time.Duration(b.MaxWall).String())
	}
	if b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.MaxTokens))
	}
	if b.MaxCostMicros > 0 {
		parts = append(parts, "cost "+costOf(b.MaxCostMicros, true))
	}
	return strings.Join(parts, ", ")
}

func policySummary(p *protocol.Policy) string {
	n := 0
	for _, l := range p.Layers {
		n += len(l.Rules)
	}
	d := protocol.Defaults{}
	if p.Defaults != nil {
		d = *p.Defaults
	}
	or := func(s string) string { return cmp.Or(s, "default") }
	return fmt.Sprintf("defaults read %s, write %s, exec %s, net %s; %d rule(s) in %d layer(s)", or(d.Read), or(d.Write), or(d.Exec), or(d.Net), n, len(p.Layers))
}

func spendOf(s protocol.Spend) string {
	parts := []string{fmt.Sprintf("%d in, %d out", s.InputTokens, s.OutputTokens)}
	if s.Steps > 0 {
		parts = append(parts, fmt.Sprintf("%d step(s)", s.Steps))
	}
	if s.CostMicros > 0 {
		parts = append(parts, "cost "+costOf(s.CostMicros, true))
	}
	return strings.Join(parts, ", ")
}

// costOf shows micro-units of the price table's currency as units.
func costOf(micros int64, priced bool) string {
	if !priced {
		return "unpriced"
	}
	if micros == 0 {
		return "0"
	}
	return fmt.Sprintf("%.4f", float64(micros)/1e6)
}

func word(approve bool) string {
	if approve {
		return "approved"
	}
	return "denied"
}

func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// cut bounds s to maxShown bytes (at a rune boundary) and says how many
// were left out.
func cut(s string) (string, int) {
	if len(s) <= maxShown {
		return s, 0
	}
	n := maxShown
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n], len(s) - n
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// spawned reports whether the run started a sub-agent.
func (s *Story) spawned() bool {
	for _, e := range s.Entries {
		for _, c := range e.Calls {
			if c.Name == coordinator.SpawnTool {
				return true
			}
		}
	}
	return false
}

// Class is the line's class in a page's stylesheet.
func (d DiffLine) Class() string {
	switch d.Op {
	case "+":
		return "add"
	case "-":
		return "del"
	case "@":
		return "hunk"
	}
	return "ctx"
}
