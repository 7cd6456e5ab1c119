package harness_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/wire"
)

// TestSnapshotWorkspaceComesBackAsAPatch carries the example's workspace
// to the sandboxer as a snapshot, lets the scripted agent fix it there, and
// brings the fix back as a patch (and a commit) that applies to the
// original, which the run itself never touched.
func TestSnapshotWorkspaceComesBackAsAPatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := clustertest.ExampleContract(t)
	src := c.Workspace.Root
	cl, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: t.TempDir(), Provider: provider.NewScripted(clustertest.ExampleTurns()...)})
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
	res, err := clustertest.RunJSON(ctx, cl, data, "")
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
	p, diff, err := cl.Run(res.Run).Patch(ctx)
	if err != nil || p.Ref != res.Patch.Ref || !strings.Contains(string(diff), "+\treturn a + b") {
		t.Fatalf("Patch = %+v, %q, %v", p, diff, err)
	}
	if _, err := snapshot.Apply(diff, src); err != nil {
		t.Fatal(err)
	}
	if code, _ := os.ReadFile(filepath.Join(src, "calc.go")); !strings.Contains(string(code), "return a + b") {
		t.Errorf("after applying the patch calc.go is\n%s", code)
	}
	recs, err := cl.Run(res.Run).Trace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Kind != protocol.RecordFinished || last.Patch == nil || last.Patch.Ref != p.Ref {
		t.Errorf("finished record = %+v, want the patch in it", last)
	}

	// A patch replaced in the object store after the run (anyone who may
	// write the store could) is refused, not handed out.
	js, _ := jetstream.New(cl.Conn())
	store, err := js.ObjectStore(ctx, wire.BucketWorkspaces)
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte("--- a/calc.go\n+++ b/calc.go\n@@ -1 +1 @@\n-x\n+y\n")
	if _, err := store.PutBytes(ctx, p.Ref, forged); err != nil {
		t.Fatal(err)
	}
	if _, diff, err := cl.Run(res.Run).Patch(ctx); err == nil || diff != nil || !strings.Contains(err.Error(), "replaced") {
		t.Errorf("Patch of a replaced patch = %q, %v; want it refused", diff, err)
	}
}

func TestPatchOfARootWorkspace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := clustertest.ExampleContract(t)
	c.Verification = protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "calc.go", Needle: "return a + b"}}
	cl, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: t.TempDir(), Provider: provider.NewScripted(clustertest.ExampleTurns()...), Roots: []string{c.Workspace.Root}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	data, _ := json.Marshal(c)
	res, err := clustertest.RunJSON(ctx, cl, data, "")
	if err != nil || res.Patch != nil {
		t.Fatalf("RunContract = %+v, %v; a root workspace has no patch", res, err)
	}
	if _, _, err := cl.Run(res.Run).Patch(ctx); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("Patch(root run) = %v, want not_found", err)
	}
	if _, _, err := cl.Run("no-such-run").Patch(ctx); !errors.Is(err, protocol.ErrUnknownRun) {
		t.Errorf("Patch(unknown) = %v, want unknown_run", err)
	}
}

// TestSnapshotOpenGoesToItsHolder has another sandboxer hold runs'
// snapshot workspaces before their coordinator opens them, as after a
// takeover: whichever sandboxer of the queue group the open reaches, the
// run works in the holder's copy, and its changes come back from there.
func TestSnapshotOpenGoesToItsHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var turns []*protocol.Turn
	for range 4 {
		turns = append(turns,
			&protocol.Turn{Text: "Writing.", ToolCalls: []protocol.ToolCall{{ID: "w", Name: "write_file", Arguments: json.RawMessage(`{"path":"out.txt","content":"done\n"}`)}}},
			&protocol.Turn{Text: "Done."})
	}
	cl, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: t.TempDir(), Provider: provider.NewScripted(turns...)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	nc, err := nats.Connect("", nats.InProcessServer(cl.Server()), nats.UserInfo(cl.Credentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	assets, err := wire.Ensure(ctx, js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	extra, err := sandboxer.New(nc, sandboxer.Config{AllowFloor: true, ID: "sb-extra", Ops: assets.Ops, Workspaces: assets.Workspaces, SnapshotDir: t.TempDir(), Roots: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- extra.Run(sctx) }()
	defer func() { stop(); <-done }()

	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "in.txt"), []byte("in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := cl.UploadWorkspace(ctx, src, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		run := "held-" + string(rune('a'+i))
		op, _ := json.Marshal(&protocol.SandboxOp{OpID: run + ".open", Run: run, Kind: protocol.OpOpen, Snapshot: ref})
		var reply protocol.SandboxReply
		for deadline := time.Now().Add(10 * time.Second); ; {
			m, err := nc.Request("harness.sandbox.sb-extra.op", op, 10*time.Second)
			if err == nil {
				_ = json.Unmarshal(m.Data, &reply)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sb-extra does not answer: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if reply.Error != nil || reply.Node != "sb-extra" {
			t.Fatalf("open %s at sb-extra = %+v", run, reply)
		}
		c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "write out.txt", Workspace: protocol.Workspace{Snapshot: ref},
			Verification: protocol.Verification{None: &struct{}{}},
			Policy:       &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
		data, _ := json.Marshal(c)
		res, err := clustertest.RunJSON(ctx, cl, data, run)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != protocol.OutcomeFinished || res.Patch == nil || res.Patch.Node != "sb-extra" || len(res.Patch.Files) != 1 {
			t.Fatalf("run %s = %s (%s), patch %+v; want it finished in sb-extra's copy", run, res.Outcome, res.Reason, res.Patch)
		}
	}
	// The cluster first, while sb-extra still answers the runs' closes.
	if err := cl.Close(); err != nil {
		t.Error(err)
	}
}

// TestHostileSnapshotFailsTheRun refuses a snapshot that would write
// outside its workspace: the run ends failed, saying which entry, and
// nothing is written beside the sandboxer's snapshot directory.
func TestHostileSnapshotFailsTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := t.TempDir()
	cl, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: data, Provider: provider.NewScripted()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "../../planted", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	_, _ = tw.Write([]byte("x\n"))
	_ = tw.Close()
	_ = zw.Close()
	ref := snapshot.Ref(buf.Bytes())
	nc, err := nats.Connect("", nats.InProcessServer(cl.Server()), nats.UserInfo(cl.Credentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	store, err := js.ObjectStore(ctx, wire.BucketWorkspaces)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutBytes(ctx, ref, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	c, _ := json.Marshal(&protocol.Contract{Schema: protocol.ContractSchema, Task: "t", Workspace: protocol.Workspace{Snapshot: ref},
		Verification: protocol.Verification{None: &struct{}{}}})
	res, err := clustertest.RunJSON(ctx, cl, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFailed || !strings.Contains(res.Reason, "path_escape") || !strings.Contains(res.Reason, "../../planted") {
		t.Errorf("run = %s (%s), want failed with a path_escape naming the entry", res.Outcome, res.Reason)
	}
	for _, p := range []string{filepath.Join(data, "planted"), filepath.Join(data, "snapshots", "planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the hostile snapshot planted %s", p)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(data, "snapshots")); len(entries) != 0 {
		t.Errorf("a refused snapshot left %v behind", entries)
	}
}

// TestSnapshotRunResumes stops an embedded cluster in the middle of a run
// on a snapshot workspace and resumes the run from the same data
// directory: it carries on in the copy it had (the first step's change
// included), and its patch has both steps' changes.
func TestSnapshotRunResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := t.TempDir()
	write := func(path string) *protocol.Turn {
		return &protocol.Turn{Text: "Writing " + path, ToolCalls: []protocol.ToolCall{{ID: path, Name: "write_file",
			Arguments: json.RawMessage(`{"path":"` + path + `","content":"x\n"}`)}}}
	}
	first := &stalling{first: write("a.txt")}
	a, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: data, Provider: first})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := a.UploadWorkspace(ctx, t.TempDir(), snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := json.Marshal(&protocol.Contract{Schema: protocol.ContractSchema, Task: "write two files", Workspace: protocol.Workspace{Snapshot: ref},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 5},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}})
	run, err := clustertest.SubmitJSON(ctx, a, c, "resumable")
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err := a.Run(run).Status(ctx)
		if err != nil || st.Step < 1 {
			return fmt.Errorf("not at step 1 yet: %+v %v", st, err)
		}
		return nil
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b, err := harness.Start(ctx, harness.Config{AllowFloor: true, DataDir: data, Provider: provider.NewScripted(write("b.txt"), &protocol.Turn{Text: "Done."}), NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.Run(run).Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Patch == nil {
		t.Fatalf("resumed run = %s (%s), patch %+v", res.Outcome, res.Reason, res.Patch)
	}
	var files []string
	for _, f := range res.Patch.Files {
		files = append(files, f.Path+" "+f.Change)
	}
	if strings.Join(files, ", ") != "a.txt added, b.txt added" {
		t.Errorf("resumed run's changes = %v, want a.txt and b.txt added", files)
	}
}

// stalling answers its first call, then waits on every later one until
// its process stops.
type stalling struct {
	first *protocol.Turn
	calls atomic.Int32
}

func (s *stalling) Name() string { return "stalling" }

func (s *stalling) Complete(ctx context.Context, _ *protocol.CompletionRequest) (*protocol.Turn, error) {
	if s.calls.Add(1) == 1 {
		return s.first, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
