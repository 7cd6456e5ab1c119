package faults

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/pkg/protocol"
)

// targets are what the loops kill, one loop each.
var targets = []string{"coordinator", "worker", "sandboxer", "nats"}

// points are the points each target is killed at, each at least once per
// loop.
var points = map[string][]fault.Point{
	"coordinator": {fault.BeforeCommit, fault.AfterCommit, fault.DuringVerification, fault.DuringApprovalPause},
	"worker":      {fault.BeforeProviderCall, fault.AfterTurnPublished},
	"sandboxer":   {fault.AfterToolEffect, fault.DuringVerification},
	"nats":        {fault.AfterTurnPublished, fault.AfterToolEffect, fault.BeforeCommit, fault.AfterCommit, fault.DuringApprovalPause},
}

// killsPerLoop is how many kills each loop plans.
var killsPerLoop = map[string]int{"coordinator": 6, "worker": 6, "sandboxer": 5, "nats": 5}

// natsTrigger is what is seen from outside when a NATS kill point is
// reached: the live event right after it, or "pause" for an approval the
// suite sees pending.
var natsTrigger = map[fault.Point]string{
	fault.AfterTurnPublished:  protocol.EventTurn,
	fault.AfterToolEffect:     protocol.EventObserved,
	fault.BeforeCommit:        protocol.EventCheck,
	fault.AfterCommit:         protocol.EventStep,
	fault.DuringApprovalPause: "pause",
}

// Kill is one kill of a loop's plan.
type Kill struct {
	Point   fault.Point
	N       int           // the n-th time the point is reached (from the process start, or from the last NATS restart)
	Delay   time.Duration // into a span
	Restart time.Duration // pause before the restart
}

// Spec is the kill as a process is armed with it (HARNESS_FAULT).
func (k Kill) Spec() string {
	return fault.Entry{Point: k.Point, N: k.N, Delay: k.Delay}.String()
}

// MakePlan draws a loop's kills of target from rng: every point of the
// target once, in a random order, then as many more as the loop makes, at
// random points; counts small enough that each is reached while the runs
// last (at most twice into an approval pause, six times for NATS, twelve
// otherwise), a delay into each span, and a pause of up to half a second
// before each restart. The same rng state gives the same plan. An unknown
// target has no plan.
func MakePlan(rng *rand.Rand, target string) []Kill {
	pts := slices.Clone(points[target])
	rng.Shuffle(len(pts), func(i, j int) { pts[i], pts[j] = pts[j], pts[i] })
	for range killsPerLoop[target] - len(pts) {
		pts = append(pts, points[target][rng.IntN(len(points[target]))])
	}
	var plan []Kill
	for _, p := range pts {
		k := Kill{Point: p, N: 1 + rng.IntN(12), Restart: time.Duration(rng.IntN(500)) * time.Millisecond}
		switch {
		case p == fault.DuringApprovalPause:
			k.N = 1 + rng.IntN(2)
		case target == "nats":
			k.N = 1 + rng.IntN(6)
		}
		if fault.IsSpan(p) {
			k.Delay = time.Duration(20+rng.IntN(160)) * time.Millisecond
		}
		plan = append(plan, k)
	}
	return plan
}
