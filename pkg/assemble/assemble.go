package assemble

import (
	"github.com/ioharness/harness/pkg/protocol"
)

// Result is one tool call's result as the run recorded it.
type Result struct {
	CallID  string
	Content string
	IsError bool
	// Fresh, when set, is what the file holds now, read again at step
	// ReadAt after a write made Content stale (the run's trace keeps it);
	// it replaces Content.
	Fresh *string
	// ReadAt is the step whose request carried the re-read; 0 when never
	// re-read.
	ReadAt int
}

// Step is one committed step: the assistant turn and its results, one per
// call in order, and the user messages that followed them (images,
// notes).
type Step struct {
	N       int // the step's number; 0 means its place in Input.Steps, from 1
	Turn    protocol.Message
	Results []Result
	After   []protocol.Message
}

// Input is everything one request is assembled from.
type Input struct {
	System string
	Tools  []protocol.ToolSpec
	// Task is the first user message, always carried whole.
	Task string
	// Notes are the workspace's memory, oldest first.
	Notes []protocol.Note
	// Steps are the committed steps, in order.
	Steps []Step
	// Budget is the tokens the whole request may carry, the output
	// reservation included (see Effective).
	Budget int
	// Output is the output reservation (max_output_tokens).
	Output int
	// BytesPerToken is the estimate's calibration; 0 means 4.
	BytesPerToken float64
	// Step is the step this request is for (len(Steps)+1), the step Fresh
	// was read for. Assemble does not read it.
	Step int
	// Fresh maps a call id to what its file holds now, read again for
	// this request by the caller, for the reads an earlier Assemble of the
	// same request reported in Output.Stale.
	Fresh map[string]string
	// Memo, when set, keeps what this assembly measured for the run's
	// next: a run's driver keeps one, so a request costs the step added
	// since the last rather than the whole transcript. It never changes
	// the Output.
	Memo *Memo
}

// Stale is a read the fit would carry whose file was written after it:
// read at Step, the path written at WrittenAt (the last write).
type Stale struct {
	CallID    string
	Path      string
	Step      int
	WrittenAt int
}

// Output is one request's messages and how they were fitted.
type Output struct {
	// Messages are the request's messages, the task first.
	Messages []protocol.Message
	// Sizes are the sizes of Messages as encoding/json writes them, one
	// each, so a caller can tell the size of any run of them without
	// encoding it.
	Sizes []int
	// Stats is how the request was fitted (Reported is left 0 for the
	// provider's count).
	Stats protocol.Assembly
	// Stale are the reads the fit would carry that are stale and not in
	// Input.Fresh, in step order: the caller reads them again and calls
	// Assemble once more with Fresh.
	Stale []Stale
}

// fate is what becomes of one entry.
type fate uint8

const (
	carried    fate = iota // carried whole
	elided                 // cut to a stub for want of room
	superseded             // cut to a stub naming the later result
	fixed                  // a placeholder for a missing result, never cut
)

// entry is one tool result, or one After message with images: what may
// be carried whole or cut to a stub.
type entry struct {
	step   int  // index of its step in the views
	msg    int  // the index of its call in the turn, or of its After message
	after  bool // an After message with images
	kind   Kind
	target string
	res    *Result
	// content is what it carries whole, and size its message's size (a
	// comma included), -1 until it is needed: measuring every result of a
	// long run would cost more than the rest of the assembly, and the fit
	// needs only those it may carry. reserve, for a stale read waiting for
	// the caller to read it again, is what the fit sets aside to carry it:
	// the size of what it held (at least), since what it holds now is not
	// known yet.
	content string
	id      string // the call's id
	size    int
	reserve int
	stub    string
	stubLen int // the stub message's size, a comma included
	fate    fate
	kinded  bool      // kind and target are set
	reread  bool      // content is Input.Fresh's
	wait    bool      // stale, and not in Input.Fresh: content is the stale stub
	written int       // wait: the step of the last write of its path
	memo    *callMemo // its call's, with Input.Memo; else nil
}

// view is one step as the request shows it.
type view struct {
	n         int // the step's number
	src       *Step
	turn      protocol.Message
	turnLen   int // the turn message's size, a comma included
	plainLen  int // the size of its After messages without images
	first     int // its entries: entries[first:end]
	end       int
	collapsed bool
}

// assembly is the work of one Assemble call.
type assembly struct {
	in        *Input
	memo      *Memo
	bpt       float64
	cap       int
	soft      int // the bytes the fit aims under: 95% of the prompt's room
	hard      int // the bytes the request must stay under
	frame     int // the request's size without steps, task and notes included
	task      protocol.Message
	taskLen   int
	notes     protocol.Message
	notesLen  int
	noteCount int
	views     []view
	entries   []entry
	pressure  bool
	noLines   bool // collapse lines dropped, the last resort to fit
}

// Assemble fits one provider request of a run into in.Budget, by the
// rules of io-harness's context assembly adapted to a transcript:
//
//   - The system prompt, the tools, the task, the memory notes (newest
//     first, within a quarter of the budget, at least one) and the last
//     step are always carried; every turn keeps its calls, and only the
//     last turn its thinking. An older turn's text, a call's string
//     argument and any result over the entry cap (an eighth of the budget
//     at four chars a token, at least 2,000 chars) are cut, a read's to
//     its tail and anything else's to its head.
//   - When the whole transcript fits in 95% of the budget's room beside
//     the output, it is the request as it is, so a provider's prompt
//     cache holds from turn to turn; superseded and stale results stay.
//   - Otherwise, in order: a read, write, grep or find result that a
//     later one of the same kind and target supersedes is a stub naming
//     it; a read of a file written since is stale, carried with
//     Input.Fresh's content, or its recorded re-read when that followed
//     the write, or else a stub naming the write and reported in
//     Output.Stale if the fit would carry it; the oldest steps collapse
//     into one line while the older turns and stubs take over half the
//     room; results are carried whole newest first until one does not
//     fit, and it and all older ones are stubs; and while stubs take
//     over an eighth of the budget, the oldest steps that carry nothing
//     but stubs collapse too. The cut and the collapse move in fixed
//     steps, so the request keeps its prefix for several turns and what
//     was stubbed stays stubbed.
//
// Every tool call keeps exactly one tool message. Output.Stats.Estimate
// (the request's JSON, marshalled as protocol.CompletionRequest, in
// tokens, plus the output reservation) is within in.Budget whenever the
// always-carried parts are; when they are not, they are carried alone
// and the Estimate says by how much. Assemble is pure: the same Input
// gives the same Output, byte for byte. It does not fail, and does not
// change its input.
func Assemble(in Input) Output {
	a := &assembly{in: &in}
	a.build()
	if len(a.views) == 0 {
		return a.emit()
	}
	if a.bound() <= a.soft {
		// Carried whole if it fits, and still fits once invalidation
		// has stubbed the reads of files written since.
		if a.total() <= a.soft && (!a.refresh() || a.fits()) {
			return a.emit()
		}
		// Measured, perhaps refreshed: built again from the transcript as
		// it was, for the fit applies every rule in its order. A
		// transcript over the budget by its bound alone is fitted as
		// built, since nothing measured or changed it.
		a = &assembly{in: &in}
		a.build()
	}
	a.pressure = true
	a.fit()
	return a.emit()
}

// refresh applies invalidation alone to a transcript that fits whole, and
// reports whether it changed anything: with room to spare a superseded
// result is still carried (the prefix stays put for the provider's cache),
// but a read of a file written since never is, since the model would take
// it for what the file holds.
func (a *assembly) refresh() bool {
	for i := range a.entries {
		if e := &a.entries[i]; !e.after && e.res != nil {
			a.kindOf(e)
		}
	}
	a.invalidate()
	for i := range a.entries {
		if a.entries[i].size < 0 {
			return true
		}
	}
	return false
}

// build sizes every part of the request as the full transcript has it.
func (a *assembly) build() {
	in := a.in
	a.bpt = calibration(in.BytesPerToken)
	a.cap = entryCap(in.Budget)
	room := in.Budget - in.Output
	a.hard = maxBytes(room, a.bpt)
	a.soft = maxBytes(room-room/20, a.bpt)

	a.memo = in.Memo
	a.task = protocol.Message{Role: protocol.RoleUser, Content: in.Task}
	a.taskLen = msgLen(&a.task, -1)
	a.frame = a.memo.frameLen(in.System, in.Tools) + a.taskLen + 1
	if len(in.Notes) > 0 {
		m, size, kept := notesMessage(in.Notes, maxBytes(in.Budget/4, a.bpt))
		a.notes, a.notesLen, a.noteCount = m, size, kept
		a.frame += size + 1
	}

	calls := 0
	for i := range in.Steps {
		calls += len(in.Steps[i].Turn.ToolCalls) + len(in.Steps[i].After)
	}
	a.views, a.entries = a.memo.scratch(len(in.Steps), calls)
	a.memo.grow(len(in.Steps))
	for i := range in.Steps {
		a.buildStep(i)
	}
}

// buildStep makes the view of step i and its entries.
func (a *assembly) buildStep(i int) {
	s := &a.in.Steps[i]
	v := &a.views[i]
	v.n, v.src = s.N, s
	if v.n <= 0 {
		v.n = i + 1
	}
	last := i == len(a.in.Steps)-1
	sm := a.memo.step(i, s)
	if !last && sm != nil && sm.olderOK && sm.cap == a.cap {
		v.turn, v.turnLen = sm.older, sm.turnLen
	} else {
		a.measureTurn(v, s, last, sm)
	}
	v.first = len(a.entries)

	results := s.Results
	aligned := len(results) == len(v.turn.ToolCalls)
	for ci := 0; aligned && ci < len(results); ci++ {
		aligned = results[ci].CallID == v.turn.ToolCalls[ci].ID
	}
	var used []bool
	if !aligned {
		used = make([]bool, len(results))
	}
	for ci := range v.turn.ToolCalls {
		id := v.turn.ToolCalls[ci].ID
		e := entry{step: i, msg: ci, id: id, size: -1}
		if sm != nil {
			e.memo = &sm.calls[ci]
		}
		if aligned {
			e.res = &results[ci]
		} else {
			for j := range results {
				if !used[j] && results[j].CallID == id {
					used[j] = true
					e.res = &results[j]
					break
				}
			}
		}
		if e.res == nil {
			e.fate, e.content = fixed, missingResult
		} else {
			a.setContent(&e, e.res.Content)
		}
		a.entries = append(a.entries, e)
	}
	for j := range s.After {
		m := &s.After[j]
		if len(m.Images) == 0 {
			v.plainLen += msgLen(m, -1) + 1
			continue
		}
		a.entries = append(a.entries, entry{step: i, msg: j, after: true, content: m.Content, size: msgLen(m, -1) + 1})
	}
	v.end = len(a.entries)
}

// measureTurn sets the view's turn as the request carries it, and its
// size: the last turn as it is, an older one without its thinking and
// with its text and string arguments bounded.
func (a *assembly) measureTurn(v *view, s *Step, last bool, sm *stepMemo) {
	v.turn = s.Turn
	if v.turn.Role == "" {
		v.turn.Role = protocol.RoleAssistant
	}
	if !last {
		// The provider needs only the last turn's thinking; an older turn's
		// long text and arguments are cut like any entry.
		v.turn.Thinking = nil
		v.turn.Content = bound(v.turn.Content, a.cap, false)
		copied := false
		for ci := range v.turn.ToolCalls {
			if args, cut := boundArgs(v.turn.ToolCalls[ci].Arguments, a.cap); cut {
				if !copied { // the input is not ours to change
					v.turn.ToolCalls = append([]protocol.ToolCall(nil), v.turn.ToolCalls...)
					copied = true
				}
				v.turn.ToolCalls[ci].Arguments = args
			}
		}
	}
	v.turnLen = msgLen(&v.turn, -1) + 1
	if !last && sm != nil {
		sm.older, sm.turnLen, sm.cap, sm.olderOK = v.turn, v.turnLen, a.cap, true
	}
}

// call is the call an entry answers.
func (a *assembly) call(e *entry) *protocol.ToolCall {
	return &a.in.Steps[e.step].Turn.ToolCalls[e.msg]
}

// kindOf sets the entry's kind and target from its call.
func (a *assembly) kindOf(e *entry) {
	switch {
	case e.kinded:
	case e.memo != nil && e.memo.kinded:
		e.kind, e.target, e.kinded = e.memo.kind, e.memo.target, true
	default:
		e.kind, e.target = KindOf(*a.call(e))
		e.kinded = true
		if e.memo != nil {
			e.memo.kind, e.memo.target, e.memo.kinded = e.kind, e.target, true
		}
	}
}

// setContent sets what the entry carries whole: c, cut to the entry cap
// (keeping a read's tail), never empty.
func (a *assembly) setContent(e *entry, c string) {
	if c == "" {
		c = emptyResult
	}
	if len(c) > a.cap {
		a.kindOf(e)
		tail := e.kind == KindRead
		if m := e.memo; m != nil {
			if m.cap != a.cap || m.tail != tail {
				m.cap, m.tail, m.bounded = a.cap, tail, two[string]{}
			}
			b, ok := m.bounded.get(c)
			if !ok {
				b = bound(c, a.cap, tail)
				m.bounded.put(c, b)
			}
			c = b
		} else {
			c = bound(c, a.cap, tail)
		}
	}
	e.content = c
}

// fits reports whether the full transcript fits, measuring it only when
// its bound does.
func (a *assembly) fits() bool {
	return a.bound() <= a.soft && a.total() <= a.soft
}

// bound is at most the size of the full transcript, found without
// measuring any result: each result's bytes unescaped, where it was not
// measured yet.
func (a *assembly) bound() int {
	n := a.frame - 1
	for i := range a.views {
		v := &a.views[i]
		n += v.turnLen + v.plainLen
		for j := v.first; j < v.end; j++ {
			n += a.entries[j].low()
		}
	}
	return n
}

// sizeOf is the size of the entry's message carried whole.
func (a *assembly) sizeOf(e *entry) int {
	if e.size < 0 {
		var ok bool
		if e.memo != nil {
			e.size, ok = e.memo.sized.get(e.content)
		}
		if !ok {
			e.size = toolResultLen(e.content, e.id) + 1
			if e.memo != nil {
				e.memo.sized.put(e.content, e.size)
			}
		}
	}
	return e.size
}

// reserveOf is what carrying the entry whole takes.
func (a *assembly) reserveOf(e *entry) int {
	if e.wait {
		return e.reserve
	}
	return a.sizeOf(e)
}

// low is at most reserveOf, found without reading the content: its
// bytes, unescaped.
func (e *entry) low() int {
	switch {
	case e.wait:
		return e.reserve
	case e.size >= 0:
		return e.size
	}
	return toolLow(len(e.content), e.id)
}

// approx is the entry's size by its bytes unescaped, the same whether
// or not it was measured.
func (e *entry) approx() int {
	switch {
	case e.wait:
		return e.reserve
	case e.after:
		return e.size
	}
	return toolLow(len(e.content), e.id)
}

// toolLow is at most the size of a tool message (a comma included) whose
// content has n bytes.
func toolLow(n int, id string) int {
	return lenRoleKey + len(`"tool"`) + lenContentKey + 2 + n + lenCallIDKey + 2 + len(id) + 1
}

// cur is the size of an entry's message as its fate has it.
func (a *assembly) cur(e *entry) int {
	if e.fate == elided || e.fate == superseded {
		return e.stubLen
	}
	return a.sizeOf(e)
}

// stepLen is the size of step i's messages as planned.
func (a *assembly) stepLen(i int) int {
	v := &a.views[i]
	n := v.turnLen + v.plainLen
	for j := v.first; j < v.end; j++ {
		n += a.cur(&a.entries[j])
	}
	return n
}

// lineLen is the size of a collapse line's message, a comma included,
// counted rather than written: the line is plain text but for its dash,
// which JSON does not escape.
func lineLen(from, to, results int) int {
	n := len("[step ") + digits(from) + len(" elided: ") + digits(results) + len(" tool result") + len("; read again what you need]")
	if from != to {
		n += len("s") + len("–") + digits(to)
	}
	if results != 1 {
		n += len("s")
	}
	return lenRoleKey + len(`"user"`) + lenContentKey + 2 + n + 1
}

// digits is the length of n in decimal.
func digits(n int) int {
	d := 1
	if n < 0 {
		d, n = 2, -n
	}
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// total is the size of the request as planned.
func (a *assembly) total() int {
	n := a.frame
	from, results := -1, 0
	for i := range a.views {
		v := &a.views[i]
		if v.collapsed {
			if from < 0 {
				from, results = i, 0
			}
			results += len(v.turn.ToolCalls)
			continue
		}
		if from >= 0 {
			if !a.noLines {
				n += lineLen(a.views[from].n, a.views[i-1].n, results)
			}
			from = -1
		}
		n += a.stepLen(i)
	}
	if from >= 0 && !a.noLines {
		n += lineLen(a.views[from].n, a.views[len(a.views)-1].n, results)
	}
	return n - 1
}

// quantum is the unit the collapse moves in, in bytes: a sixteenth of
// the prompt's room. Moving the collapsed prefix, and the cut, in such
// steps rather than by the least that would do keeps the request's
// prefix, and a provider's prompt cache, the same for several turns of a
// run under pressure instead of changing it every turn.
func (a *assembly) quantum() int { return max(a.soft/16, 64) }

// cutQuantum is the unit the cut moves in: an eighth of the prompt's
// room. A run that grows an entry a turn under pressure then keeps its
// prefix for a few turns at a time, at the cost of leaving up to that
// much room unused.
func (a *assembly) cutQuantum() int { return max(a.soft/8, 64) }

func roundUp(x, q int) int { return (x + q - 1) / q * q }

// fit applies the rules under pressure: supersession, invalidation and
// re-reads, collapse to make room, the cut newest first, and collapse of
// stubs.
func (a *assembly) fit() {
	last := len(a.views) - 1
	for i := range a.entries {
		if e := &a.entries[i]; !e.after && e.res != nil {
			a.kindOf(e)
		}
	}
	a.supersede(last)
	a.invalidate()

	// Every older result starts as a stub (or whole, when that is no
	// bigger): the baseline the fit adds to.
	for i := range a.entries {
		e := &a.entries[i]
		if e.step == last || e.fate == fixed {
			continue
		}
		n := a.views[e.step].n
		switch {
		case e.after:
			e.stub = imagesStub(n)
			m := protocol.Message{Role: a.in.Steps[e.step].After[e.msg].Role, Content: e.stub}
			e.stubLen = msgLen(&m, -1) + 1
		case e.fate == superseded:
			e.stubLen = toolResultLen(e.stub, a.call(e).ID) + 1
			continue
		default:
			e.stub = elidedStub(e.kind, e.target, a.call(e).Name, n)
			e.stubLen = toolResultLen(e.stub, a.call(e).ID) + 1
		}
		if e.low() > e.stubLen || a.reserveOf(e) > e.stubLen {
			e.fate = elided
		}
	}

	// The older steps' turns and stubs take more than half the room:
	// collapse the oldest of them until they take less, so that results
	// have room. Then, if the request is still over (a long last step),
	// collapse until it fits.
	//
	// The cut is made against the room the older steps leave at most, not
	// against what the collapse happens to leave, so that a collapse
	// does not bring back results the turn before stubbed.
	q := a.quantum()
	fixedLen := a.frame + a.stepLen(last)
	older := a.total() - fixedLen
	if older > a.soft/2 {
		a.collapseOldest(roundUp(older-a.soft/2, q), last)
		older = a.soft / 2
	}
	a.cut(last, a.soft-fixedLen-older)
	if over := a.total() - a.soft; over > 0 {
		a.collapseOldest(roundUp(over, q), last)
	}
	a.collapseStubs(last)

	if a.total() > a.hard {
		a.noLines = true
		if a.total() > a.hard {
			a.noLines = false // no help: the fixed parts alone are over
		}
	}
}

// cut carries whole the newest results that fit with all newer ones, and
// leaves every older one a stub: once a result does not fit, it and all
// before it are stubs. The cut is moved back to the next of a fixed
// series of points (where the results' sizes, summed from the oldest,
// cross a multiple of the quantum), so that as a run grows it stays put
// for several turns, and what it stubbed stays stubbed.
func (a *assembly) cut(last, room int) {
	line := make([]int, 0, len(a.entries)) // the older results in order, superseded ones included
	first := -1                            // the first in a step not collapsed
	for i := range a.entries {
		e := &a.entries[i]
		if e.step < last && (e.fate == elided || e.fate == superseded) {
			if first < 0 && !a.views[e.step].collapsed {
				first = len(line)
			}
			line = append(line, i)
		}
	}
	if first < 0 {
		return
	}
	// The least cut: results from it on fit whole with all newer ones.
	at := first
	if room < 0 {
		at = len(line)
	}
	for p, sum := len(line)-1, 0; p >= first && at == first; p-- {
		if e := &a.entries[line[p]]; e.fate == elided {
			sum += a.reserveOf(e) - e.stubLen
		}
		if sum > room {
			at = p + 1
		}
	}
	// Back to the next point of the series: w is the size of the results
	// before the cut, from the run's first (their bytes unescaped, which is
	// as good a measure and needs no reading), and a point is where it
	// passes a multiple of q.
	grow := func(e *entry) int { return max(e.approx()-e.stubLen, 0) }
	q, w := a.cutQuantum(), 0
	for _, i := range line[:at] {
		w += grow(&a.entries[i])
	}
	for at > first && at < len(line) {
		if w/q > (w-grow(&a.entries[line[at-1]]))/q {
			break
		}
		w += grow(&a.entries[line[at]])
		at++
	}
	for _, i := range line[at:] {
		if e := &a.entries[i]; e.fate == elided {
			e.fate = carried
		}
	}
}

// whole reports whether an entry is carried whole, and more than its stub.
func (a *assembly) whole(e *entry) bool {
	return e.fate == carried && e.stubLen > 0 && a.reserveOf(e) > e.stubLen
}

// collapseOldest collapses the oldest steps not yet collapsed, all
// stubs as the baseline has them, until it saves at least need bytes or
// every step but the last is collapsed. What is collapsed so far is a
// prefix of the steps.
func (a *assembly) collapseOldest(need, last int) {
	start := 0
	for start < last && a.views[start].collapsed {
		start++
	}
	// saved is what collapsing steps 0..end-1 saves against none.
	sum, results := 0, 0
	saved := func(end int) int {
		if end == 0 {
			return 0
		}
		return sum - lineLen(a.views[0].n, a.views[end-1].n, results)
	}
	for i := 0; i < start; i++ {
		sum += a.stepLen(i)
		results += len(a.views[i].turn.ToolCalls)
	}
	base := saved(start)
	for i := start; i < last; i++ {
		a.views[i].collapsed = true
		sum += a.stepLen(i)
		results += len(a.views[i].turn.ToolCalls)
		if saved(i+1)-base >= need {
			return
		}
	}
}

// collapseStubs collapses the oldest steps that carry nothing but stubs
// when the stubs are over an eighth of the budget, until they are under
// it (the saving rounded up to the quantum). Steps collapsed already
// count as the first of those. A collapse whose lines would lengthen the
// request past the fit's limit is undone.
func (a *assembly) collapseStubs(last int) {
	stubs := 0
	for i := range a.entries {
		if e := &a.entries[i]; e.fate == elided || e.fate == superseded {
			stubs += e.stubLen
		}
	}
	limit := maxBytes(max(a.in.Budget/8, 64), a.bpt)
	if stubs <= limit {
		return
	}
	need := roundUp(stubs-limit, a.quantum())
	before := a.total()
	was := make([]bool, last)
	for i := range was {
		was[i] = a.views[i].collapsed
	}
	saved := 0
	for i := 0; i < last && saved < need; i++ {
		v := &a.views[i]
		s, ok := 0, true
		for j := v.first; j < v.end && ok; j++ {
			e := &a.entries[j]
			switch {
			case e.fate == elided || e.fate == superseded:
				s += e.stubLen
			case a.whole(e):
				ok = false
			}
		}
		if ok {
			v.collapsed = true
			saved += s
		}
	}
	if after := a.total(); after > before && after > a.soft {
		for i := range was {
			a.views[i].collapsed = was[i]
		}
	}
}

// supersede stubs each read, write, grep or find result that a later
// result of the same kind and target (not an error) makes redundant,
// naming the nearest such later step. The last step's results are
// carried whatever follows them within it.
func (a *assembly) supersede(last int) {
	type key struct {
		k Kind
		t string
	}
	later := make(map[key]int, len(a.entries))
	for i := len(a.entries) - 1; i >= 0; i-- {
		e := &a.entries[i]
		if e.after || e.res == nil || !e.kind.supersedable() || e.target == "" {
			continue
		}
		k := key{e.kind, e.target}
		if by, ok := later[k]; ok && e.step != last {
			e.fate = superseded
			e.stub = supersededStub(e.kind, e.target, by)
		}
		if !e.res.IsError {
			later[k] = a.views[e.step].n
		}
	}
}

// invalidate finds the reads a later write of their path made stale, and
// sets what each carries: Input.Fresh's content when the caller read it
// again, else its recorded re-read when that came after the write, else
// the stale stub until the caller reads it again.
func (a *assembly) invalidate() {
	type write struct{ at, n int }
	writes := make(map[string]write)
	for i := range a.entries {
		e := &a.entries[i]
		if !e.after && e.res != nil && e.kind == KindWrite && e.target != "" && !e.res.IsError {
			writes[e.target] = write{i, a.views[e.step].n}
		}
	}
	for i := range a.entries {
		e := &a.entries[i]
		if e.after || e.res == nil || e.kind != KindRead || e.fate == superseded || e.res.IsError {
			continue
		}
		r := e.res
		w, ok := writes[e.target]
		stale := ok && w.at > i && (r.Fresh == nil || r.ReadAt <= w.n)
		id := a.call(e).ID
		switch {
		case stale:
			if f, ok := a.in.Fresh[id]; ok {
				a.setContent(e, f)
				e.reread = true
			} else {
				held := r.Content
				if r.Fresh != nil {
					held = *r.Fresh
				}
				a.setContent(e, held)
				e.reserve = toolLow(len(e.content), id)
				e.content = staleStub(e.target, w.n)
				e.reserve = max(e.reserve, toolResultLen(e.content, id)+1)
				e.wait, e.written = true, w.n
			}
		case r.Fresh != nil:
			a.setContent(e, *r.Fresh)
		default:
			continue
		}
		e.size = -1
	}
}

// emit builds the request's messages and their accounting.
func (a *assembly) emit() Output {
	in := a.in
	count := 1
	if a.noteCount > 0 {
		count++
	}
	for i := range a.views {
		if !a.views[i].collapsed {
			count += 1 + len(a.views[i].turn.ToolCalls) + len(a.views[i].src.After)
		} else {
			count++
		}
	}
	msgs := make([]protocol.Message, 0, count)
	sizes := make([]int, 0, count)
	msgs, sizes = append(msgs, a.task), append(sizes, a.taskLen)
	if a.noteCount > 0 {
		msgs, sizes = append(msgs, a.notes), append(sizes, a.notesLen)
	}
	st := protocol.Assembly{Budget: in.Budget, BytesPerToken: a.bpt, Notes: a.noteCount}
	var stale []Stale
	for i := range a.entries {
		e := &a.entries[i]
		if e.after || e.res == nil {
			continue
		}
		switch {
		case e.fate == superseded:
			st.Superseded++
		case e.fate == elided || e.wait || a.views[e.step].collapsed:
			st.Stubbed++
		default:
			st.Carried++
			if e.reread {
				st.Reread++
			}
		}
	}
	from, results := -1, 0
	for i := range a.views {
		v := &a.views[i]
		if v.collapsed {
			if from < 0 {
				from, results = i, 0
			}
			results += len(v.turn.ToolCalls)
			st.Collapsed++
			continue
		}
		if from >= 0 {
			if !a.noLines {
				msgs = append(msgs, protocol.Message{Role: protocol.RoleUser, Content: collapseLine(a.views[from].n, a.views[i-1].n, results)})
				sizes = append(sizes, lineLen(a.views[from].n, a.views[i-1].n, results)-1)
			}
			from = -1
		}
		msgs, sizes = append(msgs, v.turn), append(sizes, v.turnLen-1)
		k := v.first
		for ci := range v.turn.ToolCalls {
			e := &a.entries[k]
			k++
			c := e.content
			if e.fate == elided || e.fate == superseded {
				c = e.stub
			}
			if e.wait && e.fate == carried {
				stale = append(stale, Stale{CallID: v.turn.ToolCalls[ci].ID, Path: e.target, Step: v.n, WrittenAt: e.written})
			}
			msgs = append(msgs, protocol.Message{Role: protocol.RoleTool, ToolCallID: v.turn.ToolCalls[ci].ID, Content: c})
			sizes = append(sizes, a.cur(e)-1)
		}
		for j := range v.src.After {
			m := v.src.After[j]
			size := 0
			if len(m.Images) > 0 {
				e := &a.entries[k]
				k++
				size = e.size
				if e.fate == elided {
					m, size = protocol.Message{Role: m.Role, Content: e.stub}, e.stubLen
				}
			} else {
				size = msgLen(&m, -1) + 1
			}
			msgs, sizes = append(msgs, m), append(sizes, size-1)
		}
	}
	if from >= 0 && !a.noLines {
		msgs = append(msgs, protocol.Message{Role: protocol.RoleUser, Content: collapseLine(a.views[from].n, a.views[len(a.views)-1].n, results)})
		sizes = append(sizes, lineLen(a.views[from].n, a.views[len(a.views)-1].n, results)-1)
	}
	st.Bytes = a.total()
	st.Estimate = Tokens(st.Bytes, a.bpt) + in.Output
	return Output{Messages: msgs, Sizes: sizes, Stats: st, Stale: stale}
}
