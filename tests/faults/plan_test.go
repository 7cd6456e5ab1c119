package faults

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/internal/fault"
)

// TestMakePlan checks each target's plan over many seeds: the same seed
// gives the same plan, every point of the target is killed at least once,
// the loop's count of kills is planned, each spec parses back to its kill,
// and counts, delays and restarts stay in their ranges.
func TestMakePlan(t *testing.T) {
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			differs := false
			var first []Kill
			for seed := range uint64(200) {
				plan := MakePlan(rand.New(rand.NewPCG(seed, 7)), target)
				if again := MakePlan(rand.New(rand.NewPCG(seed, 7)), target); !cmp.Equal(plan, again) {
					t.Fatalf("seed %d: two plans differ:\n%s", seed, cmp.Diff(plan, again))
				}
				if seed == 0 {
					first = plan
				} else if !cmp.Equal(plan, first) {
					differs = true
				}
				if len(plan) != killsPerLoop[target] {
					t.Errorf("seed %d: %d kills planned, want %d", seed, len(plan), killsPerLoop[target])
				}
				for _, p := range points[target] {
					if !slices.ContainsFunc(plan, func(k Kill) bool { return k.Point == p }) {
						t.Errorf("seed %d: the plan %v never kills at %s", seed, plan, p)
					}
				}
				for _, k := range plan {
					checkKill(t, target, k)
				}
			}
			if !differs {
				t.Errorf("200 seeds gave one plan: %v", first)
			}
		})
	}
	if plan := MakePlan(rand.New(rand.NewPCG(1, 1)), "nobody"); plan != nil {
		t.Errorf("MakePlan of an unknown target = %v, want none", plan)
	}
}

// checkKill checks one planned kill of target.
func checkKill(t *testing.T, target string, k Kill) {
	t.Helper()
	if !slices.Contains(points[target], k.Point) {
		t.Errorf("kill %v: %s is not a point of the %s", k, k.Point, target)
	}
	most := 12
	switch {
	case k.Point == fault.DuringApprovalPause:
		most = 2
	case target == "nats":
		most = 6
	}
	if k.N < 1 || k.N > most {
		t.Errorf("kill %v: count %d, want 1 to %d", k, k.N, most)
	}
	if k.Restart < 0 || k.Restart >= 500*time.Millisecond {
		t.Errorf("kill %v: restart after %v, want under 500ms", k, k.Restart)
	}
	span := fault.IsSpan(k.Point)
	if span && (k.Delay < 20*time.Millisecond || k.Delay >= 180*time.Millisecond) || !span && k.Delay != 0 {
		t.Errorf("kill %v: delay %v, want 20ms to 180ms into a span and none at a point", k, k.Delay)
	}
	entries, err := fault.Parse(k.Spec())
	if err != nil || len(entries) != 1 {
		t.Fatalf("kill %v: spec %q parses to %v, %v", k, k.Spec(), entries, err)
	}
	if e := entries[0]; e.Point != k.Point || e.N != k.N || e.Delay != k.Delay {
		t.Errorf("kill %v: spec %q parses to %+v", k, k.Spec(), e)
	}
}

// TestNATSTriggers checks every point the NATS loop kills at is seen from
// outside by a trigger.
func TestNATSTriggers(t *testing.T) {
	for _, p := range points["nats"] {
		if natsTrigger[p] == "" {
			t.Errorf("the NATS loop kills at %s, which no event or pause triggers", p)
		}
	}
}
