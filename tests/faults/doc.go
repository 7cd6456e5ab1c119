// Package faults is the fault-injection suite (issue 6) and what it is
// made of. For each role, and for NATS itself, a loop of 50 runs goes
// through a cluster of real processes (a nats-server built from the
// module, two coordinators, two workers, two sandboxers) while the loop's
// target is killed with SIGKILL again and again at named points
// (internal/fault), chosen with their timing from one seed, and restarted.
// The runs overlap: they are submitted a little apart and all run at once,
// so each kill lands among many of them.
//
// The agent is agent_test.go's: three changes, each visible if it lands
// twice, and a careful look when a call's outcome is unknown. A third of
// the runs ask a person before the third change (approved or denied by the
// suite), so the approval path is killed too.
//
// After each loop, for every run: it reached its expected outcome; its
// workspace holds each change exactly once; its trace numbers its steps
// 1, 2, 3... with none repeated and ends with one finished record
// (CheckShape); the tokens and cost in its status are the sum over its
// committed steps (CheckSpend), and so are the budget ledger's totals
// (CheckLedger); and the trace, replayed from the start into a fresh copy
// of the workspace, reproduces the final workspace and the recorded
// outcome (see ReplayExplains for what replaying means when a call was cut
// off).
//
// Kills of NATS are triggered from outside, through the live events (the
// k-th turn, observation, check or step event seen) and the approvals the
// suite sees pending, so they land just after the point they are named
// for.
//
// The package's code is the suite's parts, each with tests of its own: the
// plan of kills (MakePlan), the supervisor that starts, kills and restarts
// the processes (Supervisor, NATSServer) and the trace checker (CheckShape,
// CheckSpend, CheckLedger, ReplayOps, ReplayExplains, ReplayOutcome). The
// suite itself is TestFaults, which skips under -short:
//
//	make faults    # go test -count=1 -run '^TestFaults$' -parallel 4 -timeout 12m -v ./tests/faults
//
// HARNESS_FAULT_SEED=N replays a seed's plan: the same kinds of runs, kill
// points, counts, delays and restart pauses. The interleaving of 50 runs
// on real processes differs from one replay to the next, so a failure may
// take a few replays to show again.
package faults
