package assemble

import (
	"slices"

	"github.com/ioharness/harness/pkg/protocol"
)

// Memo keeps what one run's assemblies measured, for its next: the size
// of the request's frame, each older turn as it is carried and its size,
// each call's kind and target, and each result as it is carried and its
// size. A run's driver assembles a request a step over a transcript that
// grows by one step, so without it every request measures the whole
// transcript again, and a run's assembly costs the square of its length.
//
// What the memo holds is found again only when what it was measured
// from is equal, compared by value (a string or slice the caller kept is
// compared at once, by its address): a Memo never changes what Assemble
// gives, whatever the caller changed between two calls, and a Memo
// given another run's steps only measures them afresh. The zero Memo is
// ready to use. A Memo is one run's: Assemble updates it, and two
// assemblies must not use one Memo at once.
type Memo struct {
	frame frameMemo
	steps []stepMemo
	// The last assembly's views and entries, reused by the next.
	views   []view
	entries []entry
}

// frameMemo is the frame's size, measured from system and tools.
type frameMemo struct {
	system string
	tools  []protocol.ToolSpec
	size   int
	ok     bool
}

// stepMemo is what was measured of one step (by its place in
// Input.Steps), from its turn as turn holds it.
type stepMemo struct {
	turn protocol.Message
	// As an older turn (not the last) carries it, bounded to cap.
	cap     int
	older   protocol.Message
	olderOK bool
	turnLen int
	calls   []callMemo
}

// callMemo is what was measured of one call's entry. A result carries
// one content on the way to the fit and another after it (a stale read's
// stub, a re-read), so each is remembered for its last two.
type callMemo struct {
	kind   Kind
	target string
	kinded bool
	// What a content was bounded to, at cap (tail: a read's, keeping its
	// end).
	cap     int
	tail    bool
	bounded two[string]
	// The size of a message carrying a content whole.
	sized two[int]
}

// two remembers a value for each of the last two strings it was given.
type two[V any] struct {
	key  [2]string
	val  [2]V
	set  [2]bool
	next uint8
}

func (t *two[V]) get(k string) (V, bool) {
	for i := range t.key {
		if t.set[i] && t.key[i] == k {
			return t.val[i], true
		}
	}
	var zero V
	return zero, false
}

func (t *two[V]) put(k string, v V) {
	i := t.next
	t.key[i], t.val[i], t.set[i], t.next = k, v, true, 1-i
}

// frameLen is frameLen(system, tools), measured once while they stay
// the same.
func (m *Memo) frameLen(system string, tools []protocol.ToolSpec) int {
	if m == nil {
		return frameLen(system, tools)
	}
	f := &m.frame
	if !f.ok || f.system != system || !protocol.SameTools(f.tools, tools) {
		*f = frameMemo{system: system, tools: tools, size: frameLen(system, tools), ok: true}
	}
	return f.size
}

// grow makes room for the memos of n steps.
func (m *Memo) grow(n int) {
	if m != nil && n > len(m.steps) {
		m.steps = slices.Grow(m.steps, n-len(m.steps))[:n]
	}
}

// step is the memo of step i (made room for by grow), emptied if its turn is not the
// one it was measured from; nil without a memo.
func (m *Memo) step(i int, s *Step) *stepMemo {
	if m == nil {
		return nil
	}
	sm := &m.steps[i]
	if !protocol.SameMessage(&sm.turn, &s.Turn) || len(sm.calls) != len(s.Turn.ToolCalls) {
		t := s.Turn // its slices copied: an element set in place is seen
		t.ToolCalls, t.Images, t.Thinking = slices.Clone(t.ToolCalls), slices.Clone(t.Images), slices.Clone(t.Thinking)
		*sm = stepMemo{turn: t, calls: make([]callMemo, len(t.ToolCalls))}
	}
	return sm
}

// scratch gives the assembly the last one's views and entries to reuse.
func (m *Memo) scratch(steps, entries int) ([]view, []entry) {
	if m == nil {
		return make([]view, steps), make([]entry, 0, entries)
	}
	m.views = slices.Grow(m.views[:0], steps)[:steps]
	clear(m.views)
	clear(m.entries)
	m.entries = slices.Grow(m.entries[:0], entries)
	return m.views, m.entries
}
