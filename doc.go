// Package harness is the embeddable Go API of harness, a distributed agent
// runtime: give it a contract (a task, a workspace, what the agent may do,
// budgets, and how success is checked) and it runs the agent loop to a
// verified result, leaving a durable trace anyone can read afterwards.
//
// [Run] runs one contract on the embedded default: an in-process NATS
// server with JetStream on a local data directory and one coordinator,
// worker and sandboxer over in-process connections. It is the same code
// path as a cluster. [Start] keeps such a cluster up for many runs (what
// `harness up` does), and [Connect] returns a [Client] of any cluster,
// local or remote. [Client.Submit] returns a [RunHandle]: Wait, Watch,
// Trace, Patch, Decide and Resume act on that one run, and [Client.Run]
// gives a handle on a run by id. [Resume] carries on a run of a data
// directory in this process; [Open] reads one while nothing serves it.
//
// Options are typed by where they apply: [Option] configures the cluster
// [Run] and [Resume] start, [WithRunID] and [WithObserver] a submission,
// [WithPolicy] and [WithDecision] a resume. Passing one where it does not
// apply is a compile error, not an option silently ignored.
package harness
