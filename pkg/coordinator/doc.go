// Package coordinator owns harness runs. A coordinator takes contracts from
// harness.submit, starts each run with a fenced first trace record, and
// drives it step by step: it publishes the step task for a worker, waits for
// the turn (durable in the turns stream before anything acts on it), sends
// each tool call to the sandboxer that holds the workspace, runs the
// verification, commits the step as one trace record, and applies the stop
// conditions in the order of io-harness 0.17.
//
// The loop's decisions live in a pure state machine (runState) rebuilt from
// the trace; this package's I/O only feeds it. Because every run starts by
// reading its trace, a run picked up again after a crash continues from the
// step after its last committed one with the same code path.
//
// A run submitted with a parent (a spawn_agent sub-agent or any contract
// naming one) runs under its parent's effective policy contained with its
// own, fixed in its started record and carried by every sandbox op, so no
// sub-agent at any depth may do what its root may not.
//
// To embed: connect to NATS, then New (which ensures the streams of
// pkg/wire) and Run. Run returns when its context ends; Shutdown waits for
// the runs in hand.
package coordinator
