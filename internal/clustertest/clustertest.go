// Package clustertest is what the tests of more than one package share
// to run harness in a test: an embedded cluster composed as harness.Start
// composes it (Start), the repository's files wherever the test runs
// (Repo, CopyDir), contracts written as JSON (SubmitJSON, RunJSON), the
// README's example and its scripted agent (ExampleContract, ExampleTurns,
// ExampleReplay), a run that asks a person (AskContract, AskingAgent) and
// waits for a run's state (WaitPaused, WaitSettled, WaitStep), checks of a
// finished run's trace and what the budget ledger charged for it
// (CheckTrace, Canonical, CheckCharged), and the role binaries built from
// the module (BuildRoles). It is imported only by tests and the packages
// under tests/.
package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
)

// Start starts an embedded cluster for the test, closed at its end: the
// composition of harness.Start, on a data directory of the test's own
// unless cfg names one, driving only the runs submitted to it unless the
// test says otherwise by setting cfg itself.
func Start(t testing.TB, cfg harness.Config) *harness.Cluster {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cl, err := harness.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start the embedded cluster: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Repo returns the path of a file or directory of the repository, given
// relative to its root, wherever the test runs.
func Repo(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", filepath.FromSlash(rel))
}

// CopyDir copies a directory of the repository (relative to its root)
// into a fresh directory of the test, and returns the copy's path.
func CopyDir(t testing.TB, rel string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(dst, os.DirFS(Repo(rel))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Submitter is a cluster or a client.
type Submitter interface {
	Submit(context.Context, *protocol.Contract, ...harness.SubmitOption) (*harness.RunHandle, error)
}

// SubmitJSON submits an encoded contract, decoded as the CLI decodes a
// file, under the idempotency key id (a fresh one when empty), and returns
// its run id.
func SubmitJSON(ctx context.Context, s Submitter, raw []byte, id string) (string, error) {
	h, err := submit(ctx, s, raw, id)
	if err != nil {
		return "", err
	}
	return h.ID(), nil
}

// RunJSON is SubmitJSON, then waits for the run's outcome.
func RunJSON(ctx context.Context, s Submitter, raw []byte, id string) (*protocol.Result, error) {
	h, err := submit(ctx, s, raw, id)
	if err != nil {
		return nil, err
	}
	return h.Wait(ctx)
}

func submit(ctx context.Context, s Submitter, raw []byte, id string) (*harness.RunHandle, error) {
	c, err := protocol.DecodeContract(raw)
	if err != nil {
		return nil, err
	}
	var opts []harness.SubmitOption
	if id != "" {
		opts = append(opts, harness.WithRunID(id))
	}
	return s.Submit(ctx, c, opts...)
}
