package sandboxer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
)

// TestRunsOnOneDirShareAWorkspace: the runs whose workspace is one
// directory hold one open handle on it among them, however many they are;
// it stays usable while any of them is open, and the last to close
// releases its descriptors.
func TestRunsOnOneDirShareAWorkspace(t *testing.T) {
	root := t.TempDir()
	nc, sb := start(t, root)
	const runs = 200
	before := openFDs(t)
	for i := range runs {
		openRun(t, nc, fmt.Sprintf("r%d", i), root)
	}
	if n := sandboxer.OpenHandles(sb); n != 1 {
		t.Errorf("OpenHandles with %d runs on one directory = %d, want 1", runs, n)
	}
	// Each handle is two descriptors: one per run would be 2*runs more.
	if grew := openFDs(t) - before; grew > 10 {
		t.Errorf("%d runs on one directory opened %d descriptors, want one handle's", runs, grew)
	}
	for i := range runs - 1 {
		closeRun(t, nc, fmt.Sprintf("r%d", i))
	}
	if n := sandboxer.OpenHandles(sb); n != 1 {
		t.Errorf("OpenHandles with one run left = %d, want 1", n)
	}
	last := fmt.Sprintf("r%d", runs-1)
	writeRun(t, nc, last, root, "kept.txt")
	if _, err := os.Stat(filepath.Join(root, "kept.txt")); err != nil {
		t.Errorf("the write of the last run open did not land: %v", err)
	}
	closeRun(t, nc, last)
	if n := sandboxer.OpenHandles(sb); n != 0 {
		t.Errorf("OpenHandles with every run closed = %d, want 0", n)
	}
	if after := openFDs(t); after-before > 1 {
		t.Errorf("%d descriptors open after every run closed, %d before any opened; want the handle's two released", after, before)
	}
}

// TestRecreatedDirGetsAFreshWorkspace: a directory removed and made again
// at its path, while a run holds the old one open, is a new directory, and
// a run opened on the path then works in it, not in the removed one.
func TestRecreatedDirGetsAFreshWorkspace(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	nc, sb := start(t, root)
	openRun(t, nc, "old", ws)
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	openRun(t, nc, "new", ws)
	if n := sandboxer.OpenHandles(sb); n != 2 {
		t.Errorf("OpenHandles with a run on the removed directory and one on the new = %d, want 2", n)
	}
	writeRun(t, nc, "new", ws, "new.txt")
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err != nil {
		t.Errorf("the write of the run opened on the new directory is not in it: %v", err)
	}
	// A later run joins the new directory's handle, not the old one's.
	openRun(t, nc, "later", ws)
	if n := sandboxer.OpenHandles(sb); n != 2 {
		t.Errorf("OpenHandles with a later run on the new directory = %d, want 2", n)
	}
	closeRun(t, nc, "old")
	closeRun(t, nc, "new")
	if n := sandboxer.OpenHandles(sb); n != 1 {
		t.Errorf("OpenHandles with only the later run open = %d, want 1", n)
	}
	writeRun(t, nc, "later", ws, "later.txt")
	if _, err := os.Stat(filepath.Join(ws, "later.txt")); err != nil {
		t.Errorf("the write of the later run is not in the new directory: %v", err)
	}
	closeRun(t, nc, "later")
	if n := sandboxer.OpenHandles(sb); n != 0 {
		t.Errorf("OpenHandles with every run closed = %d, want 0", n)
	}
}

// openFDs returns the number of descriptors this process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open descriptors without /proc/self/fd: %v", err)
	}
	return len(fds)
}

func openRun(t *testing.T, nc *nats.Conn, run, dir string) {
	t.Helper()
	r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: run + ".open", Run: run, Kind: protocol.OpOpen, Workspace: dir}, 5*time.Second)
	if err != nil || r.Error != nil {
		t.Fatalf("open %s on %s = %+v, %v", run, dir, r, err)
	}
}

func closeRun(t *testing.T, nc *nats.Conn, run string) {
	t.Helper()
	r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: run + ".close", Run: run, Kind: protocol.OpClose}, 5*time.Second)
	if err != nil || r.Error != nil {
		t.Fatalf("close %s = %+v, %v", run, r, err)
	}
}

// writeRun writes the file name through the run's workspace.
func writeRun(t *testing.T, nc *nats.Conn, run, dir, name string) {
	t.Helper()
	c := call("write_file", fmt.Sprintf(`{"path":%q,"content":"x"}`, name))
	r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: run + ".write." + name, Run: run, Kind: protocol.OpTool, Workspace: dir, Call: c, Policy: noExec}, 5*time.Second)
	if err != nil {
		t.Fatalf("write %s through run %s: %v", name, run, err)
	}
	if r.Observation == nil || r.Observation.IsError {
		t.Fatalf("write %s through run %s = %+v, error %v; want it written", name, run, r.Observation, r.Error)
	}
}
