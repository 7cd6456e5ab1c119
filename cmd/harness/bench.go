package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ioharness/harness/internal/bench"
)

func cmdBench(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "bench", "[flags]",
		`Measures the harness's own overhead per step on the embedded default, with
the trace synced to disk: a scripted provider that answers at once and a
trivial tool (read_file), beside a bare JetStream publish-with-ack and the
bare path of a step (its messages, with none of the harness's work between
them) on the same server in the same run. Then the throughput of one
coordinator across concurrent runs, beside the bare path's with as many at
once.

With --waiting N it measures instead what runs in flight cost while they
wait on a slow model: N runs held on their first turn (memory, goroutines
and CPU while they wait), then --fan runs of --turns turns, each taking
--think, submitted at once, beside the ideal (turns × think).`)
	steps := fs.Int("steps", 100, "steps per run")
	runs := fs.Int("runs", 16, "concurrent runs for the throughput figure")
	waiting := fs.Int("waiting", 0, "measure N runs waiting on a slow model instead")
	fan := fs.Int("fan", 1000, "with --waiting: runs of slow turns submitted at once")
	turns := fs.Int("turns", 3, "with --waiting: turns of each of the --fan runs")
	think := fs.Duration("think", 2*time.Second, "with --waiting: how long the model takes over a turn")
	quiet := fs.Duration("quiet", 10*time.Second, "with --waiting: how long the CPU is watched while the runs wait")
	heap := fs.String("heap-profile", "", "with --waiting: write a heap profile here while the runs wait")
	if pos, err := parse(fs, args); err != nil {
		return exitForParse(err)
	} else if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	if *waiting != 0 {
		if *waiting < 1 || *fan < 1 || *turns < 1 || *think <= 0 || *quiet <= 0 {
			fail(env.stderr, "bench: --waiting, --fan and --turns must be at least 1, --think and --quiet above zero")
			return exitUsage
		}
		rep, err := bench.RunWaiting(ctx, bench.WaitConfig{Waiting: *waiting, Runs: *fan, Turns: *turns, Think: *think, Quiet: *quiet, HeapProfile: *heap})
		if err != nil {
			fail(env.stderr, "bench: %v", err)
			return exitError
		}
		fmt.Fprintln(env.stdout, rep)
		return exitOK
	}
	if *steps < 1 || *runs < 1 {
		fail(env.stderr, "bench: --steps and --runs must be at least 1")
		return exitUsage
	}
	rep, err := bench.Run(ctx, bench.Config{Steps: *steps, Runs: *runs})
	if err != nil {
		fail(env.stderr, "bench: %v", err)
		return exitError
	}
	fmt.Fprintln(env.stdout, rep)
	return exitOK
}
