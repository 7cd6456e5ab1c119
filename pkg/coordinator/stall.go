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
	window  []string // signatures of the unproductive steps so far
	replans int
}

type stallVerdict int

const (
	stallFine stallVerdict = iota
	stallReplan
	stallStopped
)

// nextStall folds one step into the stall state. A step that wrote or
// edited a file (and changed its bytes) clears the window; otherwise its
// signature joins it, and once the window is full and the signature
// repeats one already in it, the run is told to re-plan, up to MaxReplans
// times, then stopped. A command never counts as change: its effect is
// unknown.
//
// It also returns the signatures of the window that led to a re-plan or a
// stop, for the directive and the reason.
func nextStall(st stallState, spec *protocol.StallSpec, rec *protocol.Record) (stallState, stallVerdict, []string) {
	if spec == nil || spec.Window == 0 || rec.Turn == nil {
		return st, stallFine, nil
	}
	if changedFiles(rec) {
		return stallState{replans: st.replans}, stallFine, nil
	}
	sig := signature(rec.Turn)
	repeats := slices.Contains(st.window, sig)
	next := stallState{window: append(slices.Clone(st.window), sig), replans: st.replans}
	if len(next.window) < spec.Window || !repeats {
		return next, stallFine, nil
	}
	if next.replans < spec.MaxReplans {
		return stallState{replans: next.replans + 1}, stallReplan, next.window
	}
	return next, stallStopped, next.window
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
