// Package harness is the embeddable Go API of harness, a distributed agent
// runtime: give it a contract (a task, a workspace, what the agent may do,
// budgets, and how success is checked) and it runs the agent loop to a
// verified result, leaving a durable trace anyone can read afterwards.
//
// [Run] runs one contract on the embedded default: an in-process NATS
// server with JetStream on a local data directory and one coordinator,
// worker and sandboxer over in-process connections. It is the same code
// path as a cluster. [Start] keeps such a cluster up for many runs (what
// `harness up` does), and [Connect] returns a [Client] that submits to,
// waits on and reads the traces of any cluster, local or remote.
package harness
