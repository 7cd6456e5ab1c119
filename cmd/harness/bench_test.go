package main

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

// TestBench runs `harness bench` as docs/benchmarks.md does, for a few
// steps and runs: every run must finish after all its steps (a run stalled
// or cut short is an error, exit 1), and it prints the three figures. Ten
// steps are enough for an agent that repeats itself to be stalled under
// the default stall detection (a window of 3, one re-plan). Nothing here
// times anything: the figures are only checked to be there.
func TestBench(t *testing.T) {
	code, out, errOut := cli(t, t.Context(), nil, "bench", "--steps", "10", "--runs", "3")
	if code != exitOK {
		t.Fatalf("bench: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, re := range []string{
		`(?m)^bare JetStream publish\+ack \(synced\): p50 \S+  p99 \S+$`,
		`(?m)^bare step path \(task queued, turn synced and heard stored, a request and reply, the record synced beside\): p50 \S+  p99 \S+  \(\S+× a bare publish\)$`,
		`(?m)^harness step \(scripted provider, read_file, durable trace\): p50 \S+  p99 \S+  \(\S+× a bare publish, \S+× the bare path\)$`,
		`(?m)^throughput: \d+ steps/s from one coordinator across 3 concurrent runs of 10 steps \(\S+ of CPU a step, [0-9.]+ of \d+ cores busy\)$`,
		`(?m)^throughput floor: \d+ synced publishes/s from 3 publishers over two streams, \d+ steps/s at two a step \(the throughput is [0-9.]+ of it\)$`,
		`(?m)^bare step path, 3 at once: \d+ steps/s at \S+ of CPU a step \(the throughput is [0-9.]+ of it\)$`,
		`(?m)^where a step goes \(medians, by the run's events\):$`,
		`(?m)^  observation -> next request assembled .* \S+  \(\S+× a bare publish\)$`,
		`(?m)^  assembled -> turn back .* \S+  \(\S+× a bare publish\)$`,
		`(?m)^  observation -> commit done, beside the first two .* \S+  \(\S+× a bare publish\)$`,
		`(?m)^the same, in one of the 3 runs at once \(medians\):$`,
		`(?m)^  assembled -> turn back .* \S+  \(\S+× alone\)$`,
		`(?m)^  turn -> observation .* \S+  \(\S+× alone\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("bench output lacks a line matching %s:\n%s", re, out)
		}
	}
	m := regexp.MustCompile(`\((\S+)× a bare publish\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ratio in the output:\n%s", out)
	}
	if r, err := strconv.ParseFloat(m[1], 64); err != nil || r <= 0 || math.IsInf(r, 0) {
		t.Errorf("step/publish ratio = %q, want a positive number", m[1])
	}
	if m := regexp.MustCompile(`throughput: (\d+) steps/s`).FindStringSubmatch(out); m != nil && m[1] == "0" {
		t.Errorf("throughput is 0 steps/s:\n%s", out)
	}
}

// TestBenchWaiting runs `harness bench --waiting` small: every held run
// and every run of slow turns must finish after its turns (anything else
// is exit 1), and it prints the waiting and fan figures; the goroutines
// of the coordinator while the runs wait are not one per run.
func TestBenchWaiting(t *testing.T) {
	const waiting = 60
	code, out, errOut := cli(t, t.Context(), nil, "bench", "--waiting", strconv.Itoa(waiting), "--fan", "20", "--turns", "2", "--think", "20ms", "--quiet", "200ms")
	if code != exitOK {
		t.Fatalf("bench --waiting: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, re := range []string{
		`(?m)^waiting: 60 runs held on a model that has not answered, admitted in \S+$`,
		`(?m)^  per waiting run: -?[\d.]+ KB of Go heap, -?[\d.]+ KB resident`,
		`(?m)^  CPU while they wait: [\d.]+% of one core`,
		`(?m)^fan: 20 runs of 2 turns, 20ms each, submitted at once: \S+ \(ideal 40ms, [\d.]+×\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("bench output lacks a line matching %s:\n%s", re, out)
		}
	}
	m := regexp.MustCompile(`coordinator goroutines: (\d+) waiting, (\d+) before`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no goroutine counts in the output:\n%s", out)
	}
	during, _ := strconv.Atoi(m[1])
	before, _ := strconv.Atoi(m[2])
	if during-before >= waiting/4 {
		t.Errorf("%d coordinator goroutines while %d runs wait, %d before: waiting runs hold goroutines", during, waiting, before)
	}
}

// TestBenchUsage: steps and runs below one are a usage error, not a
// silent default.
func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"--steps", "0"}, {"--runs", "-1"}, {"--waiting", "-1"}, {"--waiting", "5", "--think", "0s"}, {"extra"}} {
		if code, _, errOut := cli(t, t.Context(), nil, append([]string{"bench"}, args...)...); code != exitUsage {
			t.Errorf("bench %v: exit %d, want %d\nstderr: %s", args, code, exitUsage, errOut)
		}
	}
}
