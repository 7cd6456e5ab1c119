package main

import (
	"context"
	"fmt"

	"github.com/ioharness/harness/internal/bench"
)

func cmdBench(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "bench", "[flags]",
		`Measures the harness's own overhead per step on the embedded default, with
the trace synced to disk: a scripted provider that answers at once and a
trivial tool (read_file), beside a bare JetStream publish-with-ack on the
same server in the same run. Then the throughput of one coordinator across
concurrent runs.`)
	steps := fs.Int("steps", 100, "steps per run")
	runs := fs.Int("runs", 16, "concurrent runs for the throughput figure")
	if _, err := parse(fs, args); err != nil {
		return exitForParse(err)
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
