package sandboxer_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/wire"
)

// cluster is a real NATS server with JetStream and the harness streams,
// for sandboxers that serve snapshots.
type cluster struct {
	t      *testing.T
	srv    *server.Server
	nc     *nats.Conn
	assets *wire.Assets
}

func startJS(t *testing.T) *cluster {
	t.Helper()
	srv := testkit.NATS(t)
	c := &cluster{t: t, srv: srv}
	c.nc = c.connect()
	js, err := jetstream.New(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	if c.assets, err = wire.Ensure(context.Background(), js, wire.Config{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) connect() *nats.Conn { return testkit.Conn(c.t, c.srv) }

// sandboxer starts a sandboxer serving snapshots (and root, if given).
func (c *cluster) sandboxer(id string, cfg sandboxer.Config) *sandboxer.Sandboxer {
	t := c.t
	t.Helper()
	cfg.ID, cfg.Ops, cfg.Workspaces = id, c.assets.Ops, c.assets.Workspaces
	if cfg.SnapshotDir == "" {
		cfg.SnapshotDir = t.TempDir()
	}
	if len(cfg.Roots) == 0 {
		cfg.Roots = []string{t.TempDir()}
	}
	sb, err := sandboxer.New(c.connect(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sb.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Any answer on its op subject, even to an empty op, means it is up.
	testkit.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if _, err := c.nc.Request("harness.sandbox."+id+".op", []byte("{}"), time.Second); err != nil {
			return fmt.Errorf("sandboxer %s did not come up: %w", id, err)
		}
		return nil
	})
	return sb
}

// put packs dir into the workspaces store and returns its ref.
func (c *cluster) put(dir string) string {
	c.t.Helper()
	var buf bytes.Buffer
	if _, err := snapshot.Pack(&buf, dir, snapshot.PackOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return c.putBytes(buf.Bytes())
}

func (c *cluster) putBytes(data []byte) string {
	c.t.Helper()
	ref := snapshot.Ref(data)
	if _, err := c.assets.Workspaces.PutBytes(context.Background(), ref, data); err != nil {
		c.t.Fatal(err)
	}
	return ref
}

var allowAll = &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}

func TestSnapshotWorkspace(t *testing.T) {
	c := startJS(t)
	snapDir := t.TempDir()
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true, SnapshotDir: snapDir})
	src := t.TempDir()
	for name, body := range map[string]string{"hello.txt": "Hello, world\n", "keep.txt": "same\n", "old.txt": "remove me\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := c.put(src)
	commit := &protocol.CommitSpec{Message: "friendlier"}
	r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref, Commit: commit}, 20*time.Second)
	if err != nil || r.Error != nil || r.Node != "sb1" || len(r.Tools) == 0 {
		t.Fatalf("open snapshot = %+v, %v; want sb1 with its tools", r, err)
	}
	tool := func(id string, call *protocol.ToolCall) *protocol.Observation {
		t.Helper()
		r, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: id, Run: "r1", Kind: protocol.OpTool, Call: call, Policy: allowAll}, 10*time.Second)
		if err != nil || r.Error != nil || r.Observation == nil || r.Observation.IsError {
			t.Fatalf("op %s = %+v, %v", id, r, err)
		}
		return r.Observation
	}
	tool("r1.1.0.1", call("write_file", `{"path":"hello.txt","content":"Hello, friend\n"}`))
	tool("r1.1.1.1", call("write_file", `{"path":"new/file.txt","content":"added\n"}`))
	tool("r1.1.2.1", call("exec", `{"argv":["rm","old.txt"]}`))
	v := protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "hello.txt", Needle: "Hello, friend"}}
	if r, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.1.verify.1", Run: "r1", Kind: protocol.OpVerify, Verification: &v, Policy: allowAll}, 10*time.Second); err != nil || r.Check == nil || !r.Check.Passed {
		t.Fatalf("verify = %+v, %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "hello.txt")); string(b) != "Hello, world\n" {
		t.Fatalf("the original changed: %q", b)
	}

	collect := &protocol.SandboxOp{OpID: "r1.collect", Run: "r1", Kind: protocol.OpCollect, Snapshot: ref, Commit: commit}
	r, err = do(t, c.nc, "harness.sandbox.sb1.op", collect, 20*time.Second)
	if err != nil || r.Error != nil || r.Patch == nil {
		t.Fatalf("collect = %+v, %v", r, err)
	}
	p := r.Patch
	var files []string
	for _, f := range p.Files {
		files = append(files, f.Path+" "+f.Change)
	}
	if want := "[hello.txt modified new/file.txt added old.txt deleted]"; p.Ref == "" || p.Node != "sb1" || p.Size == 0 || fmtList(files) != want {
		t.Errorf("patch = %+v, files %v; want a stored patch of %s", p, files, want)
	}
	if _, err := exec.LookPath("git"); err == nil {
		if p.Commit == "" || p.Error != nil {
			t.Errorf("patch commit = %q, error %v; want a commit", p.Commit, p.Error)
		}
		out, err := exec.Command("git", "-C", filepath.Join(snapDir, "r1", "work"), "log", "--format=%s", "-n", "1").Output()
		if err != nil || string(out) != "friendlier\n" {
			t.Errorf("git log in the workspace = %q, %v", out, err)
		}
	}
	// A repeated collect is answered from the first.
	if again, err := do(t, c.nc, "harness.sandbox.sb1.op", collect, 20*time.Second); err != nil || again.Patch == nil || again.Patch.Ref != p.Ref || again.Patch.Commit != p.Commit {
		t.Errorf("collect again = %+v, %v; want the first answer", again, err)
	}
	diff, err := c.assets.Workspaces.GetBytes(context.Background(), p.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Apply(diff, src); err != nil {
		t.Fatalf("Apply the run's patch to the original: %v\n%s", err, diff)
	}
	for name, want := range map[string]string{"hello.txt": "Hello, friend\n", "new/file.txt": "added\n", "keep.txt": "same\n"} {
		if b, _ := os.ReadFile(filepath.Join(src, name)); string(b) != want {
			t.Errorf("after apply %s = %q, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt still there after apply: %v", err)
	}
	// Close removes the materialised workspace once collected.
	if _, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.close", Run: "r1", Kind: protocol.OpClose}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(snapDir, "r1")); !os.IsNotExist(err) {
		t.Errorf("the collected workspace is still there after close: %v", err)
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

// TestSnapshotHeldByOneNode checks that an open reaching another sandboxer
// than the one holding the run's workspace (as after a coordinator's
// takeover) names the holder instead of starting afresh, so the run's
// changes are not left behind.
func TestSnapshotHeldByOneNode(t *testing.T) {
	c := startJS(t)
	dirs := map[string]string{"sb1": t.TempDir(), "sb2": t.TempDir()}
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true, SnapshotDir: dirs["sb1"]})
	c.sandboxer("sb2", sandboxer.Config{AllowFloor: true, SnapshotDir: dirs["sb2"]})
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := c.put(src)
	r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref}, 20*time.Second)
	if err != nil || r.Error != nil {
		t.Fatalf("open = %+v, %v", r, err)
	}
	holder, other := r.Node, "sb2"
	if holder == "sb2" {
		other = "sb1"
	}
	r, err = do(t, c.nc, "harness.sandbox."+other+".op", &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref}, 20*time.Second)
	if err != nil || r.Error != nil || r.Holder != holder || len(r.Tools) != 0 {
		t.Errorf("open at %s = %+v, %v; want it to name the holder %s and open nothing", other, r, err, holder)
	}
	r, err = do(t, c.nc, "harness.sandbox."+holder+".op", &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref}, 20*time.Second)
	if err != nil || r.Error != nil || r.Holder != "" || r.Node != holder || len(r.Tools) == 0 {
		t.Errorf("open again at the holder %s = %+v, %v; want it opened there", holder, r, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dirs[other])); len(entries) != 0 {
		t.Errorf("the other sandboxer kept a directory for the run: %v", entries)
	}
}

func TestSnapshotRefused(t *testing.T) {
	c := startJS(t)
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true, SnapshotLimits: snapshot.Limits{MaxBytes: 1 << 20}})
	evil := func() []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		_ = tw.WriteHeader(&tar.Header{Name: "../../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
		_, _ = tw.Write([]byte("x"))
		_ = tw.Close()
		_ = zw.Close()
		return buf.Bytes()
	}()
	big := t.TempDir()
	if err := os.WriteFile(filepath.Join(big, "big"), bytes.Repeat([]byte("z"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	bigRef := c.put(big)
	lying := "sha256-" + string(bytes.Repeat([]byte("0"), 64))
	if _, err := c.assets.Workspaces.PutBytes(context.Background(), lying, []byte("not what the name says")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ref  string
		want *protocol.Error
	}{
		{"missing", "sha256-" + string(bytes.Repeat([]byte("a"), 64)), protocol.ErrNotFound},
		{"traversal", c.putBytes(evil), protocol.ErrPathEscape},
		{"over the limit", bigRef, protocol.ErrTooLarge},
		{"content not its ref", lying, protocol.ErrMalformed},
		{"not a ref", "../../etc", protocol.ErrInvalidField},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := "bad" + string(rune('a'+i))
			r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: run + ".open", Run: run, Kind: protocol.OpOpen, Snapshot: tt.ref}, 20*time.Second)
			if err != nil || !errors.Is(r.Error, tt.want) {
				t.Fatalf("open = %+v, %v; want %s", r, err, tt.want.Code)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), "escaped")); err == nil {
		t.Error("the hostile snapshot wrote outside its workspace")
	}
}

// TestRootReachingSnapshotsRefused keeps root workspaces away from the
// snapshot workspaces of other runs.
func TestRootReachingSnapshotsRefused(t *testing.T) {
	c := startJS(t)
	root := t.TempDir()
	snaps := filepath.Join(root, "snaps")
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true, Roots: []string{root}, SnapshotDir: snaps})
	for _, ws := range []string{root, snaps, filepath.Join(snaps, "x")} {
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := do(t, c.nc, wire.SandboxOpenSubject, &protocol.SandboxOp{OpID: "o", Run: "r9", Kind: protocol.OpOpen, Workspace: ws}, 5*time.Second)
		if err != nil || !errors.Is(r.Error, protocol.ErrPathEscape) {
			t.Errorf("open root %s = %+v, %v; want path_escape", ws, r, err)
		}
	}
}
