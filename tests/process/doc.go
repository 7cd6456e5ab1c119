// Package process runs harness as separate processes: the real
// coordinator, worker, sandboxer and harness binaries, built from the
// module, against a NATS server, killed with SIGKILL and started again. Its
// tests build the binaries, so they skip under -short:
//
//	go test ./tests/process
//
// The package has no code of its own; what its tests share with the other
// packages' tests is in internal/clustertest.
package process
