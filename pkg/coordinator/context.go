package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/assemble"
	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/toolchain"
)

// A step's request is assembled from the folded run state by
// assemble.Assemble, a pure function: the same records give the same
// request on any coordinator, after a resume or a takeover, and in
// harness trace --turn. What the assembly needed from outside (the tools
// offered, the workspace's toolchain, the stale reads read again) is
// recorded in the step's record, and folded in before its turn.

// fold adds a committed step to what the assembly reads: what its request
// was assembled from first (the re-reads, the tools, the toolchain), then
// its turn, its results and the messages after them.
func (s *runState) fold(rec *protocol.Record) {
	s.prepare(rec)
	if a := rec.Assembled; a != nil && a.Bytes > 0 && rec.Turn != nil && rec.Turn.Usage.InputTokens > 0 {
		s.sent += int64(a.Bytes)
		s.counted += rec.Turn.Usage.InputTokens
	}
	st := assemble.Step{N: rec.Step}
	if t := rec.Turn; t != nil {
		st.Turn = protocol.Message{Role: protocol.RoleAssistant, Content: t.Text, ToolCalls: t.ToolCalls, Thinking: t.Thinking}
	}
	var images []protocol.Image
	for _, o := range rec.Observations {
		content := o.Content
		if content == "" {
			content = "(no output)" // providers refuse an empty tool result
		}
		s.calls[o.CallID] = [2]int{len(s.steps), len(st.Results)}
		st.Results = append(st.Results, assemble.Result{CallID: o.CallID, Content: content, IsError: o.IsError})
		if o.Image != nil {
			images = append(images, *o.Image)
		}
	}
	if len(images) > 0 {
		// Tool results carry no pictures; they follow as a user message.
		st.After = append(st.After, protocol.Message{Role: protocol.RoleUser, Content: "The images you asked to view:", Images: images})
	}
	if rec.Note != "" {
		st.After = append(st.After, protocol.Message{Role: protocol.RoleUser, Content: rec.Note})
	}
	s.steps = append(s.steps, st)
	s.foldMemory(rec)
}

// prepare folds in what a step's request was assembled from.
func (s *runState) prepare(rec *protocol.Record) {
	for _, o := range rec.Rereads {
		if at, ok := s.calls[o.CallID]; ok {
			content := o.Content
			r := &s.steps[at[0]].Results[at[1]]
			r.Fresh, r.ReadAt = &content, rec.Step
		}
	}
	if rec.Tools != nil {
		s.tools = rec.Tools
	}
	if rec.Toolchain != nil && s.toolchain == nil {
		s.toolchain = rec.Toolchain
	}
	if rec.Skills != nil && s.skills == nil {
		s.skills = rec.Skills
	}
}

// follow adds a user message after the last step (a decision's note), or
// after the task when no step is committed yet.
func (s *runState) follow(m protocol.Message) {
	if n := len(s.steps); n > 0 {
		s.steps[n-1].After = append(s.steps[n-1].After, m)
		return
	}
	s.lead = append(s.lead, m)
}

// lastTurn is the last committed step's turn, or nil.
func (s *runState) lastTurn() *protocol.Message {
	if n := len(s.steps); n > 0 {
		return &s.steps[n-1].Turn
	}
	return nil
}

// inputs is what one request is assembled from beyond the folded state:
// the tools to offer, the toolchain and the skills (the state's, else
// those the sandboxer just told), the reads read again for it, and the
// run's policy for the toolchain's commands.
type inputs struct {
	tools     []protocol.ToolSpec
	toolchain *protocol.Toolchain
	skills    []protocol.Skill
	fresh     map[string]string
	allowed   func(argv []string) bool
}

// system is the request's system prompt: the harness's own, then the
// catalogue of the run's skills, if it has any.
func (s *runState) system(in inputs) string {
	cat := s.skills
	if cat == nil {
		cat = in.skills
	}
	if sk := skillsPrompt(cat); sk != "" {
		return systemPrompt + "\n\n" + sk
	}
	return systemPrompt
}

// bytesPerToken is the estimate's calibration: the run's requests' bytes
// per token the providers counted, never above four (the uncalibrated
// guess), so calibration only makes the estimate more careful, and never
// under one.
func (s *runState) bytesPerToken() float64 {
	if s.counted <= 0 || s.sent <= 0 {
		return 4
	}
	return min(max(float64(s.sent)/float64(s.counted), 1), 4)
}

// budget is the tokens the next request may carry: the contract's context
// max (else the model's window), capped by its share of what the token
// budget leaves.
func (s *runState) budget() int {
	max := assemble.Window(s.contract.Provider.Model)
	share := protocol.DefaultContextShare
	if c := s.contract.Context; c != nil {
		if c.MaxTokens > 0 {
			max = c.MaxTokens
		}
		if c.Share > 0 {
			share = c.Share
		}
	}
	remaining := int64(-1)
	if cap := s.contract.Budget.MaxTokens; cap > 0 {
		remaining = cap - s.tokens
	}
	return assemble.Effective(max, share, remaining)
}

// assembleInput is the assembly's input for the next step's request.
func (s *runState) assembleInput(in inputs) assemble.Input {
	tc := s.toolchain
	if tc == nil {
		tc = in.toolchain
	}
	task := taskMessage(s.contract)
	if hint := toolchain.Describe(tc, in.allowed); hint != "" {
		task += "\n\n" + hint
	}
	for _, m := range s.lead {
		task += "\n\n" + m.Content // messages before the first step ride after the task
	}
	return assemble.Input{System: s.system(in), Tools: in.tools, Task: task, Notes: s.notes, Steps: s.steps,
		Budget: s.budget(), Output: s.contract.Provider.MaxOutputTokens, BytesPerToken: s.bytesPerToken(),
		Step: s.step + 1, Fresh: in.fresh, Memo: s.memo}
}

// request is the completion request the assembly gives.
func (s *runState) request(in inputs, out assemble.Output) *protocol.CompletionRequest {
	msgs := out.Messages
	if len(s.contract.Images) > 0 && len(msgs) > 0 && msgs[0].Role == protocol.RoleUser {
		// The task's images ride on the task, the first message, in every
		// request: the model sees them whatever the assembly cut.
		msgs = slices.Clone(msgs)
		msgs[0].Images = append(slices.Clone(msgs[0].Images), s.contract.Images...)
	}
	return &protocol.CompletionRequest{
		Model:           s.contract.Provider.Model,
		System:          s.system(in),
		Messages:        msgs,
		Tools:           in.tools,
		MaxOutputTokens: s.contract.Provider.MaxOutputTokens,
		ReasoningEffort: s.contract.Provider.ReasoningEffort,
		ThinkingBudget:  thinkingBudget(s.contract.Provider.Thinking),
	}
}

func thinkingBudget(t *protocol.ThinkingSpec) int {
	if t == nil {
		return 0
	}
	return t.BudgetTokens
}

// execAllowed is the run policy's word on a command: only those it allows
// outright are hinted, so a hint never widens the policy.
func execAllowed(p *policy.Policy) func(argv []string) bool {
	return func(argv []string) bool {
		raw, err := json.Marshal(map[string]any{"argv": argv})
		if err != nil {
			return false
		}
		v, bad := gate.Verdict(p, &protocol.ToolCall{Name: "exec", Arguments: raw})
		return bad == "" && v.Effect == policy.Allow
	}
}

// assembled is the step's request fitted to the context budget, with
// what its record keeps of how: the reads read again, the tools when they
// changed, the toolchain when it is new.
type assembled struct {
	req *protocol.CompletionRequest
	// sizes are the JSON sizes of req's messages, one each.
	sizes     []int
	stats     protocol.Assembly
	rereads   []protocol.Observation
	tools     []protocol.ToolSpec
	toolchain *protocol.Toolchain
	skills    []protocol.Skill
}

// assemble builds the step's request: a first assembly says which stale
// reads it would carry, they are read again through the policy on the
// sandboxer, and the second carries what they hold now.
func (d *driver) assemble(ctx context.Context, step int) *assembled {
	s := d.s
	in := inputs{tools: d.tools, toolchain: d.toolchain, skills: d.skills, allowed: execAllowed(d.pol)}
	out := assemble.Assemble(s.assembleInput(in))
	a := &assembled{}
	if len(out.Stale) > 0 {
		in.fresh = map[string]string{}
		for k, st := range out.Stale {
			obs := d.reread(ctx, step, k, st)
			in.fresh[st.CallID] = obs.Content
			a.rereads = append(a.rereads, *obs)
			d.emit(step, protocol.EventReread, &protocol.Event{Tool: "read_file", Target: st.Path, IsError: obs.IsError, Status: obs.State()})
		}
		out = assemble.Assemble(s.assembleInput(in))
	}
	a.req, a.sizes, a.stats = s.request(in, out), out.Sizes, out.Stats
	if len(a.req.Messages) > 0 && len(a.sizes) == len(a.req.Messages) && len(a.req.Messages[0].Images) != len(out.Messages[0].Images) {
		a.sizes = slices.Clone(a.sizes) // the task's images ride on it (request)
		a.sizes[0] = assemble.MessageLen(&a.req.Messages[0])
	}
	if !protocol.SameTools(in.tools, s.tools) {
		a.tools = in.tools
	}
	if s.toolchain == nil && d.toolchain != nil {
		a.toolchain = d.toolchain
	}
	if s.skills == nil && d.skills != nil {
		a.skills = d.skills
	}
	d.emit(step, protocol.EventAssembled, &protocol.Event{Tokens: int64(out.Stats.Estimate), Assembly: &a.stats,
		Text: fmt.Sprintf("%d of %d tokens: %d results carried, %d stubbed, %d re-read, %d steps collapsed",
			out.Stats.Estimate, out.Stats.Budget, out.Stats.Carried, out.Stats.Stubbed, out.Stats.Reread, out.Stats.Collapsed)})
	return a
}

// reread reads a stale read's path again for the step's request, under the
// run's policy as any read is (a link judged by its target, on the
// sandboxer): what the file holds now, or a stub saying why it could not
// be read.
func (d *driver) reread(ctx context.Context, step, k int, st assemble.Stale) *protocol.Observation {
	args, _ := json.Marshal(map[string]string{"path": st.Path})
	call := &protocol.ToolCall{ID: st.CallID, Name: "read_file", Arguments: args}
	stub := func(why string) *protocol.Observation {
		return &protocol.Observation{CallID: st.CallID, Tool: call.Name, Status: protocol.CallRefused, IsError: true,
			Content: fmt.Sprintf("[%s was written at step %d after this read, and could not be read again: %s]", st.Path, st.WrittenAt, why)}
	}
	v, bad := gate.Verdict(d.pol, call)
	switch {
	case bad != "":
		return stub(bad)
	case v.Effect != policy.Allow:
		return stub(v.Refusal())
	}
	obs := d.dispatch(ctx, step, fmt.Sprintf("%s.%d.reread.%d", d.s.run, step, k), call, "")
	if obs.IsError {
		return stub(obs.Content)
	}
	obs.Content = fmt.Sprintf("[read again at step %d, after the write at step %d]\n%s", step, st.WrittenAt, obs.Content)
	return obs
}

// Request is what a run's model was sent at step: its request rebuilt from
// the run's records (content resolved, as RunHandle.Trace gives them) by
// the same assembly the coordinator ran, with how it was assembled.
// Errors: a damaged trace, or no such step.
func Request(run string, recs []protocol.Record, step int) (*protocol.CompletionRequest, *protocol.Assembly, error) {
	var at *protocol.Record
	upto := recs[:0:0]
	for i := range recs {
		r := &recs[i]
		if r.Kind == protocol.RecordStep && r.Step == step {
			at = r
			break
		}
		upto = append(upto, *r)
	}
	if at == nil {
		return nil, nil, protocol.FieldError(protocol.CodeNotFound, "turn", "give a step the run has committed (harness trace RUN lists them)",
			"run %s has no step %d", run, step)
	}
	s, err := newRunState(run, upto)
	if err != nil {
		return nil, nil, err
	}
	_, pol, err := s.compiled()
	if err != nil {
		return nil, nil, err
	}
	in := inputs{tools: s.tools, toolchain: at.Toolchain, skills: at.Skills, allowed: execAllowed(pol)}
	if at.Tools != nil {
		in.tools = at.Tools
	}
	if len(at.Rereads) > 0 {
		in.fresh = map[string]string{}
		for _, o := range at.Rereads {
			in.fresh[o.CallID] = o.Content
		}
	}
	out := assemble.Assemble(s.assembleInput(in))
	stats := out.Stats
	if at.Turn != nil {
		stats.Reported = at.Turn.Usage.InputTokens
	}
	return s.request(in, out), &stats, nil
}

// foldMemory adds the notes the step's remember calls wrote to what the
// run's requests carry, with the bounds the store keeps (memory.Upsert),
// so the run sees its own notes as its next run would.
func (s *runState) foldMemory(rec *protocol.Record) {
	if rec.Turn == nil {
		return
	}
	for i, call := range rec.Turn.ToolCalls {
		if call.Name != RememberTool || i >= len(rec.Observations) || rec.Observations[i].State() != protocol.CallOK {
			continue
		}
		var a struct{ Key, Value string }
		if json.Unmarshal(call.Arguments, &a) != nil {
			continue
		}
		s.notes, _ = memory.Upsert(s.notes, protocol.Note{Key: a.Key, Value: a.Value, Run: s.run, Step: rec.Step, Time: rec.Time})
	}
}
