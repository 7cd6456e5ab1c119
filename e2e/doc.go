// Package e2e runs harness as a cluster of containers (compose.yaml with
// compose.secure.yaml: a three-node NATS cluster, Redis, two coordinators,
// workers, two sandboxers) and drives it from outside with the nats and
// harness command lines: a workspace uploaded to the object store, many
// contracts at once on it, workers scaled under load, containers killed
// and cut off, the NATS cluster restarted, and credentials refused by the
// server.
//
// The tests run only with HARNESS_E2E=1 (scripts/e2e sets it), so a plain
// `go test ./...` stays fast:
//
//	scripts/e2e
//
// Start brings a cluster up under a unique project name on its own
// network and takes it down with its volumes when the test ends, failed or
// not.
package e2e
