package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/snapshot"
)

// TestSnapshotWorkspaceComesBackAsAPatch carries the example's workspace
// to the sandboxer as a snapshot, lets the scripted agent fix it there, and
// brings the fix back as a patch (and a commit) that applies to the
// original, which the run itself never touched.
func TestSnapshotWorkspaceComesBackAsAPatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exampleContract(t)
	src := c.Workspace.Root
	cl, err := harness.Start(ctx, harness.Config{DataDir: t.TempDir(), Provider: provider.NewScripted(exampleTurns()...)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ref, err := cl.UploadWorkspace(ctx, src, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Workspace = protocol.Workspace{Snapshot: ref, Commit: &protocol.CommitSpec{}}
	c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "calc.go", Needle: "return a + b"}}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.RunContract(ctx, data, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("outcome = %s (%s), want success", res.Outcome, res.Reason)
	}
	if res.Patch == nil || res.Patch.Ref == "" || len(res.Patch.Files) != 1 || res.Patch.Files[0].Path != "calc.go" {
		t.Fatalf("result patch = %+v, want calc.go modified", res.Patch)
	}
	if _, err := exec.LookPath("git"); err == nil && (res.Patch.Commit == "" || res.Patch.Error != nil) {
		t.Errorf("patch commit = %q, error %v; the contract asked for a commit", res.Patch.Commit, res.Patch.Error)
	}
	code, _ := os.ReadFile(filepath.Join(src, "calc.go"))
	if !strings.Contains(string(code), "return a - b") {
		t.Fatal("the run changed the uploaded directory; it must work on its own copy")
	}
	p, diff, err := cl.Patch(ctx, res.Run)
	if err != nil || p.Ref != res.Patch.Ref || !strings.Contains(string(diff), "+\treturn a + b") {
		t.Fatalf("Patch = %+v, %q, %v", p, diff, err)
	}
	if _, err := snapshot.Apply(diff, src); err != nil {
		t.Fatal(err)
	}
	if code, _ := os.ReadFile(filepath.Join(src, "calc.go")); !strings.Contains(string(code), "return a + b") {
		t.Errorf("after applying the patch calc.go is\n%s", code)
	}
	recs, err := cl.Trace(ctx, res.Run)
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Kind != protocol.RecordFinished || last.Patch == nil || last.Patch.Ref != p.Ref {
		t.Errorf("finished record = %+v, want the patch in it", last)
	}
}

func TestPatchOfARootWorkspace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exampleContract(t)
	c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "calc.go", Needle: "return a + b"}}
	cl, err := harness.Start(ctx, harness.Config{DataDir: t.TempDir(), Provider: provider.NewScripted(exampleTurns()...), Roots: []string{c.Workspace.Root}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	data, _ := json.Marshal(c)
	res, err := cl.RunContract(ctx, data, "", nil)
	if err != nil || res.Patch != nil {
		t.Fatalf("RunContract = %+v, %v; a root workspace has no patch", res, err)
	}
	if _, _, err := cl.Patch(ctx, res.Run); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("Patch(root run) = %v, want not_found", err)
	}
	if _, _, err := cl.Patch(ctx, "no-such-run"); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("Patch(unknown) = %v, want unknown_run", err)
	}
}
