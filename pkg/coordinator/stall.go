package coordinator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// stallState is how far a run has gone without changing the workspace,
// folded from its committed steps (io-harness 0.17 §2.14 semantics, but
// rebuilt on resume rather than forgotten).
type stallState struct {
	window  []string        // signatures of the unproductive steps so far
	seen    map[string]bool // the same signatures, so a repeat is found without a scan; built by fold
	replans int
}

type stallVerdict int

const (
	stallFine stallVerdict = iota
	stallReplan
	stallStopped
)

// check says what folding one step into the stall state would decide,
// without folding it. A step that wrote or edited a file (and changed its
// bytes) is fine and clears the window; otherwise its signature joins it,
// and once the window is full and the signature repeats one already in
// it, the run is told to re-plan, up to MaxReplans times, then stopped. A
// command never counts as change: its effect is unknown.
//
// It also returns the signatures of the window that led to a re-plan or a
// stop, for the directive and the reason. It costs the same whatever the
// window holds, so folding a long trace stays linear.
func (st *stallState) check(spec *protocol.StallSpec, rec *protocol.Record) (stallVerdict, []string) {
	if spec == nil || spec.Window == 0 || rec.Turn == nil || changedFiles(rec) {
		return stallFine, nil
	}
	return st.checkSig(spec, signature(rec.Turn))
}

// checkSig is check of an unproductive step whose calls' signature is sig.
func (st *stallState) checkSig(spec *protocol.StallSpec, sig string) (stallVerdict, []string) {
	if len(st.window)+1 < spec.Window || !st.has(sig) {
		return stallFine, nil
	}
	tried := append(slices.Clone(st.window), sig)
	if st.replans < spec.MaxReplans {
		return stallReplan, tried
	}
	return stallStopped, tried
}

func (st *stallState) has(sig string) bool {
	if st.seen == nil {
		return slices.Contains(st.window, sig)
	}
	return st.seen[sig]
}

// fold folds one committed step into the stall state, in place, as check
// decides.
func (st *stallState) fold(spec *protocol.StallSpec, rec *protocol.Record) {
	if spec == nil || spec.Window == 0 || rec.Turn == nil {
		return
	}
	if changedFiles(rec) {
		st.window, st.seen = nil, nil
		return
	}
	sig := signature(rec.Turn) // made once, for the verdict and the window
	if v, _ := st.checkSig(spec, sig); v == stallReplan {
		st.window, st.seen = nil, nil
		st.replans++
		return
	}
	if st.seen == nil {
		st.seen = make(map[string]bool, len(st.window)+1)
		for _, w := range st.window {
			st.seen[w] = true
		}
	}
	st.window = append(st.window, sig)
	st.seen[sig] = true
}

// nextStall is check and fold as one pure function: the state after rec,
// the verdict, and the signatures behind it. st is left as it was.
func nextStall(st stallState, spec *protocol.StallSpec, rec *protocol.Record) (stallState, stallVerdict, []string) {
	v, tried := st.check(spec, rec)
	next := stallState{window: slices.Clone(st.window), replans: st.replans}
	next.fold(spec, rec)
	return next, v, tried
}

// changedFiles reports whether a step's writes or edits changed a file.
func changedFiles(rec *protocol.Record) bool {
	for _, o := range rec.Observations {
		if o.Changed && (o.Tool == "write_file" || o.Tool == "edit_file") {
			return true
		}
	}
	return false
}

// signature names a turn's tool calls: name:{arguments} joined by " | ".
func signature(t *protocol.Turn) string {
	parts := make([]string, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		parts[i] = c.Name + ":" + string(c.Arguments)
	}
	return strings.Join(parts, " | ")
}

// replanNote is the directive a run gets when it repeats itself.
func replanNote(tried []string) string {
	return fmt.Sprintf("[re-plan] The last %d steps changed nothing in the workspace and repeated what was already tried:\n- %s\nStop repeating these calls. Re-read the task, think about why they did not help, and take a different approach.",
		len(tried), strings.Join(tried, "\n- "))
}
