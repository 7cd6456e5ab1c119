// Package fault lets a harness process kill itself with SIGKILL at a named
// point of its work, so the fault-injection suite can crash a coordinator,
// a worker or a sandboxer exactly where a crash hurts most and check that
// nothing is lost and nothing is done twice.
//
// The role mains arm it from the environment, once, before they start:
//
//	HARNESS_FAULT=<point>:<n>[@<delay>][,<point>:<n>[@<delay>]...]
//
// "after-commit:3" kills the process the third time it reaches
// after-commit. A span point (during-verification) is entered and left
// rather than reached: "during-verification:2@150ms" kills the process
// 150 ms into the second verification it runs, or into the first one after
// that lasting longer than 150 ms; the delay of a span point defaults to
// 100 ms, and an instant point takes none. Several entries arm several
// points; the first to fire ends the process. Before it dies the process
// writes one line to its standard error:
//
//	harness fault: SIGKILL at after-commit (hit 3)
//
// A spec that does not parse (an unknown point, a count below 1, a delay
// on an instant point) is an error wrapping ErrSpec: a fault plan that
// silently does nothing would let the suite pass without testing anything.
//
// Unarmed, a hook costs one atomic load. This package is the one piece of
// process-wide state in harness, deliberately: what it arms is the death
// of the whole process.
package fault

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// EnvVar is the variable the role mains read the fault plan from.
const EnvVar = "HARNESS_FAULT"

// Point names a place in a role's work where a crash can be injected.
type Point string

// The points, by role. Each is one call in the role's code.
const (
	// BeforeProviderCall is in the worker, just before it calls the
	// provider for a step task.
	BeforeProviderCall Point = "before-provider-call"
	// AfterTurnPublished is in the worker, right after the turn is durable
	// in the turns stream and before the step task is acknowledged.
	AfterTurnPublished Point = "after-turn-published"
	// AfterToolEffect is in the sandboxer, right after a tool call took
	// effect in the workspace and before the operation is remembered as
	// done or answered.
	AfterToolEffect Point = "after-tool-effect"
	// BeforeSettle is in the coordinator, after a provider call's turn
	// arrived and before its draw is settled on the budget ledger.
	BeforeSettle Point = "before-settle"
	// BeforeCommit is in the coordinator, after every effect of a step
	// (or of an approved action) and before its trace record is appended.
	BeforeCommit Point = "before-commit"
	// AfterCommit is in the coordinator, right after a step's record is
	// acknowledged (the next step's task may be out already, its request
	// assembled beside the write) and before the index or the step's
	// event know of it.
	AfterCommit Point = "after-commit"
	// DuringVerification is a span: in the sandboxer while it runs a
	// verification, and in the coordinator while it waits for one.
	DuringVerification Point = "during-verification"
	// DuringApprovalPause is in the coordinator, right after the pause
	// record is appended and before the run index says paused.
	DuringApprovalPause Point = "during-approval-pause"
)

// DefaultSpanDelay is how long into a span a kill lands when the spec
// gives no delay.
const DefaultSpanDelay = 100 * time.Millisecond

// spans are the points entered and left (During) rather than reached.
var spans = []Point{DuringVerification}

// Points returns every point, in the order of the role's work.
func Points() []Point {
	return []Point{BeforeProviderCall, AfterTurnPublished, BeforeSettle, AfterToolEffect, BeforeCommit, AfterCommit, DuringVerification, DuringApprovalPause}
}

// IsSpan reports whether p is entered and left (use During) rather than
// reached (use Hit).
func IsSpan(p Point) bool { return slices.Contains(spans, p) }

// ErrSpec is wrapped by every error of a fault spec that does not parse.
var ErrSpec = errors.New("bad fault spec")

// Entry is one armed point of a plan: kill at the N-th time the process
// reaches Point (for a span, Delay into the N-th or a later entry).
type Entry struct {
	Point Point
	N     int
	Delay time.Duration
}

// String renders the entry as the spec syntax.
func (e Entry) String() string {
	s := string(e.Point) + ":" + strconv.Itoa(e.N)
	if IsSpan(e.Point) && e.Delay != DefaultSpanDelay {
		s += "@" + e.Delay.String()
	}
	return s
}

// Parse parses a spec. An empty spec is an empty plan. Errors: ErrSpec,
// wrapped with what is wrong and what the points are.
func Parse(spec string) ([]Entry, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	var out []Entry
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		name, rest, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%w %q: %q is not <point>:<n>", ErrSpec, spec, part)
		}
		p := Point(name)
		if !slices.Contains(Points(), p) {
			return nil, fmt.Errorf("%w %q: unknown point %q; the points are %s", ErrSpec, spec, name, pointList())
		}
		count, delay, hasDelay := strings.Cut(rest, "@")
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w %q: the count of %s must be a whole number from 1, not %q", ErrSpec, spec, name, count)
		}
		e := Entry{Point: p, N: n}
		switch {
		case hasDelay && !IsSpan(p):
			return nil, fmt.Errorf("%w %q: %s is reached, not entered: it takes no delay", ErrSpec, spec, name)
		case hasDelay:
			d, err := time.ParseDuration(delay)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("%w %q: the delay of %s must be a duration such as 150ms, not %q", ErrSpec, spec, name, delay)
			}
			e.Delay = d
		case IsSpan(p):
			e.Delay = DefaultSpanDelay
		}
		out = append(out, e)
	}
	return out, nil
}

func pointList() string {
	names := make([]string, 0, len(Points()))
	for _, p := range Points() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

// armed is set while a plan is armed; the hooks read nothing else when it
// is not.
var armed atomic.Bool

// plan is the armed plan: per point, its entry and how often it was
// reached.
var plan struct {
	mu      sync.Mutex
	entries map[Point]*state
}

type state struct {
	Entry
	hits int
}

// Arm parses spec and arms it for this process, replacing any plan armed
// before; an empty spec disarms. Errors: as Parse, and then nothing is
// armed.
func Arm(spec string) error {
	entries, err := Parse(spec)
	if err != nil {
		return err
	}
	plan.mu.Lock()
	defer plan.mu.Unlock()
	plan.entries = make(map[Point]*state, len(entries))
	for _, e := range entries {
		plan.entries[e.Point] = &state{Entry: e}
	}
	armed.Store(len(entries) > 0)
	return nil
}

// Hit marks that the process reached p; if that is the armed count, the
// process is killed there and Hit does not return.
func Hit(p Point) {
	if armed.Load() {
		hit(p)
	}
}

func hit(p Point) {
	plan.mu.Lock()
	st := plan.entries[p]
	if st == nil {
		plan.mu.Unlock()
		return
	}
	st.hits++
	n := st.hits
	plan.mu.Unlock()
	if n == st.N {
		kill(p, n)
	}
}

func nothing() {}

// During marks that the process entered the span p and returns the
// function that marks it left; call it when the span ends (defer
// fault.During(p)() does both). If the span is armed and this is its
// count or later, the process is killed the armed delay into the span,
// unless it has left by then.
func During(p Point) (leave func()) {
	if !armed.Load() {
		return nothing
	}
	return during(p)
}

func during(p Point) func() {
	plan.mu.Lock()
	st := plan.entries[p]
	if st == nil {
		plan.mu.Unlock()
		return nothing
	}
	st.hits++
	n := st.hits
	plan.mu.Unlock()
	if n < st.N {
		return nothing
	}
	t := time.AfterFunc(st.Delay, func() { kill(p, n) })
	return func() { t.Stop() }
}

// kill writes the fault line and kills this process with SIGKILL (on
// Windows, TerminateProcess): no deferred function runs, no buffer is
// flushed, no connection is closed.
func kill(p Point, n int) {
	fmt.Fprintf(os.Stderr, "harness fault: SIGKILL at %s (hit %d)\n", p, n)
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Kill()
	}
	select {} // the signal is on its way; nothing more runs here
}
