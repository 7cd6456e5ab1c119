package wire_test

import (
	"testing"

	"github.com/ioharness/harness/pkg/wire"
)

// TestNamesAreTheDocumentedOnes pins the wire names: operators, ACLs
// (docs/security.md) and the e2e suite type them, so a change here is a
// change of protocol, never a refactoring.
func TestNamesAreTheDocumentedOnes(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{wire.SubjectSubmit, "harness.submit"},
		{wire.Steps("gpu"), "harness.steps.gpu"},
		{wire.Turn("r1", 2, 3), "harness.turns.r1.2.3"},
		{wire.Stored("r1"), "harness.stored.turns.r1.>"},
		{wire.Trace("r1"), "harness.trace.r1"},
		{wire.Event("r1", "step"), "harness.events.r1.step"},
		{wire.SandboxOpenSubject, "harness.sandbox.open"},
		{wire.SandboxSnapshotSubject, "harness.sandbox.snapshot"},
		{wire.SandboxOps("n1"), "harness.sandbox.n1.op"},
		{wire.DecidePrefix, "harness.decide."},
		{wire.CoordinatorStatus("c1"), "harness.coordinator.c1.status"},
		{wire.WorkerStatus("w1"), "harness.worker.w1.status"},
		{wire.TenantEvent("acme", "r1", "step"), "harness.tenant.acme.events.r1.step"},
		{wire.SubmitTenantPrefix + "acme", "harness.submit.acme"},
		{wire.StreamSubmit, "HARNESS_SUBMIT"},
		{wire.StreamSteps, "HARNESS_STEPS"},
		{wire.StreamTurns, "HARNESS_TURNS"},
		{wire.StreamTrace, "HARNESS_TRACE"},
		{wire.BucketRuns, "harness-runs"},
		{wire.BucketLeases, "harness-leases"},
		{wire.BucketApprovals, "harness-approvals"},
		{wire.BucketOps, "harness-ops"},
		{wire.BucketBlobs, "harness-blobs"},
		{wire.BucketWorkspaces, "harness-workspaces"},
		{wire.BucketMemory, "harness-memory"},
		{wire.ConsumerCoordinators, "coordinators"},
		{wire.WorkerConsumer("gpu"), "workers-gpu"},
		{wire.HeaderReply, "Harness-Reply"},
	} {
		if tt.got != tt.want {
			t.Errorf("wire name %q, want %q", tt.got, tt.want)
		}
	}
}
