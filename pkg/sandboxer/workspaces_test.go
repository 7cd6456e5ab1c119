package sandboxer_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
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
	if n := workspacesOpen(t, nc); n != runs {
		t.Errorf("nats micro stats says %d workspaces open with %d runs open, want %d", n, runs, runs)
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
	if n := workspacesOpen(t, nc); n != 0 {
		t.Errorf("nats micro stats says %d workspaces open with every run closed, want 0", n)
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

// TestCloseWaitsForTheRunsOpsInProgress: a coordinator that lets go of a
// run (it stops, or its heartbeat lapsed) closes the run's workspace with
// a tool call it stopped waiting for still running here. The call ends as
// it would have, its reply the one the next coordinator gets for the same
// op id, and the close is answered only after it: before, the close took
// the workspace from under the call (an edit failed on a closed handle,
// and the failure was kept as the call's answer). The close asked again
// meanwhile is answered at once, and holds no place of its own.
func TestCloseWaitsForTheRunsOpsInProgress(t *testing.T) {
	root := t.TempDir()
	nc, _ := start(t, root)
	openRun(t, nc, "r1", root)
	replies := answers(t, nc)
	send := func(reply string, op *protocol.SandboxOp) { sendOp(t, nc, reply, op) }
	send("answers.exec", execOp("r1.3.0.1", "r1", root, "touch started; while [ ! -e release ]; do sleep 0.01; done; echo done > out.txt"))
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(root, "started"))
		return err
	})
	send("answers.close", &protocol.SandboxOp{OpID: "r1.close", Run: "r1", Kind: protocol.OpClose})
	// Asked again while the first waits: answered at once, holding no
	// place while the call runs.
	send("answers.again", &protocol.SandboxOp{OpID: "r1.close", Run: "r1", Kind: protocol.OpClose})
	select {
	case m := <-replies:
		if m.Subject != "answers.again" {
			t.Fatalf("%s answered while the run's call still ran, want only the repeated close", m.Subject)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the close asked again while the first waited was not answered")
	}
	// The close is in the sandboxer's hands before the call may end.
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := opsHandled(t, nc); n != 3 {
			return fmt.Errorf("the op endpoint handled %d requests, want the call and the two closes", n)
		}
		return nil
	})
	if err := os.WriteFile(filepath.Join(root, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(order) < 2 {
		select {
		case m := <-replies:
			order = append(order, m.Subject)
			if m.Subject != "answers.exec" {
				continue
			}
			var r protocol.SandboxReply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatal(err)
			}
			if r.Observation == nil || r.Observation.IsError {
				t.Errorf("the call in progress at the close = %+v, want its observation ok", r)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("replies %v, want the call's and the close's", order)
		}
	}
	if order[0] != "answers.exec" {
		t.Errorf("replies came in the order %v: the close was answered while the run's call still ran", order)
	}
	if b, err := os.ReadFile(filepath.Join(root, "out.txt")); err != nil || string(b) != "done\n" {
		t.Errorf("out.txt = %q, %v; want the call's write", b, err)
	}
}

// TestStaleCloseLeavesTheRunToItsNewCoordinator: a close that waits for
// the run's call in progress while another coordinator takes the run over
// and opens it again is answered but not carried out, so the workspace
// stays open for the new coordinator; the new coordinator's own close,
// later, is carried out.
func TestStaleCloseLeavesTheRunToItsNewCoordinator(t *testing.T) {
	root := t.TempDir()
	nc, sb := start(t, root)
	openRun(t, nc, "r1", root)
	replies := answers(t, nc)
	sendOp(t, nc, "answers.exec", execOp("r1.3.0.1", "r1", root, "touch started; while [ ! -e release ]; do sleep 0.01; done"))
	sendOp(t, nc, "answers.close", &protocol.SandboxOp{OpID: "r1.close", Run: "r1", Kind: protocol.OpClose})
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if _, err := os.Stat(filepath.Join(root, "started")); err != nil {
			return err
		}
		if n := opsHandled(t, nc); n != 2 {
			return fmt.Errorf("the op endpoint handled %d requests, want the call and the close", n)
		}
		return nil
	})
	openRun(t, nc, "r1", root) // the coordinator that took the run over
	if err := os.WriteFile(filepath.Join(root, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for got := map[string]bool{}; len(got) < 2; {
		select {
		case m := <-replies:
			got[m.Subject] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("replies %v, want the call's and the close's", got)
		}
	}
	if n := sandboxer.OpenHandles(sb); n != 1 {
		t.Errorf("OpenHandles after the stale close = %d, want the run's workspace still open for its new coordinator", n)
	}
	closeRun(t, nc, "r1")
	if n := sandboxer.OpenHandles(sb); n != 0 {
		t.Errorf("OpenHandles after the new coordinator's close = %d, want 0", n)
	}
}

// answers subscribes to the replies of ops sent with sendOp.
func answers(t *testing.T, nc *nats.Conn) chan *nats.Msg {
	t.Helper()
	replies := make(chan *nats.Msg, 128)
	sub, err := nc.ChanSubscribe("answers.>", replies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return replies
}

// sendOp sends op to the sandboxer sb1 without waiting, its reply to
// come on the subject reply (answers.*).
func sendOp(t *testing.T, nc *nats.Conn, reply string, op *protocol.SandboxOp) {
	t.Helper()
	data, err := json.Marshal(op)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(wire.SandboxOps("sb1"), reply, data); err != nil {
		t.Fatal(err)
	}
}

// execOp is a call of exec, running sh in run's workspace root, under a
// policy that allows it.
func execOp(id, run, root, sh string) *protocol.SandboxOp {
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", sh}})
	return &protocol.SandboxOp{OpID: id, Run: run, Kind: protocol.OpTool, Workspace: root, Call: call("exec", string(args)),
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}}
}

// workspacesOpen is what the sandboxer's micro stats say of the runs'
// workspaces it holds open (`nats micro stats harness-sandboxer`).
func workspacesOpen(t *testing.T, nc *nats.Conn) int {
	t.Helper()
	st, err := stats(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Endpoints {
		var data struct {
			Workspaces *int `json:"workspaces"`
		}
		if json.Unmarshal(e.Data, &data) == nil && data.Workspaces != nil {
			return *data.Workspaces
		}
	}
	t.Fatalf("no endpoint's stats say how many workspaces are open: %+v", st)
	return -1
}

// stats asks the sandboxer for its micro stats.
func stats(nc *nats.Conn) (*micro.Stats, error) {
	m, err := nc.Request("$SRV.STATS.harness-sandboxer", nil, 2*time.Second)
	if err != nil {
		return nil, err
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// opsHandled is how many requests the sandboxer's op endpoint has
// returned from.
func opsHandled(t *testing.T, nc *nats.Conn) int {
	t.Helper()
	st, err := stats(nc)
	if err != nil {
		return -1
	}
	for _, e := range st.Endpoints {
		if e.Name == "op" {
			return e.NumRequests
		}
	}
	return -1
}

// runsOwn is a backend that runs a program of its own outside every
// sandbox, as the native backend runs harness-sandbox-init.
type runsOwn struct {
	sandbox.Backend
	program string
}

func (r runsOwn) Programs() []string { return []string{r.program} }

// TestNoWorkspaceHoldsABackendsProgram: a workspace that contains the
// directory of a program a backend runs outside the sandboxes, or lies in
// it, is refused (an agent could rewrite the program); one beside it is
// served.
func TestNoWorkspaceHoldsABackendsProgram(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	for _, d := range []string{bin, filepath.Join(bin, "inner"), filepath.Join(root, "project")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nc, _ := startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root},
		Backends: []sandbox.Backend{runsOwn{floor.New(), filepath.Join(bin, "harness-sandbox-init")}}})
	for _, ws := range []string{root, bin, filepath.Join(bin, "inner")} {
		r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "o", Run: "r1", Kind: protocol.OpOpen, Workspace: ws}, 5*time.Second)
		if err != nil || r.Error == nil || r.Error.Code != protocol.CodePathEscape || !strings.Contains(r.Error.Message, bin) {
			t.Errorf("open of %s = %+v, %v; want path_escape naming %s", ws, r, err, bin)
		}
	}
	openRun(t, nc, "r2", filepath.Join(root, "project"))
}

// TestACloseOfAnOpenFollowedByAnotherIsNotCarriedOut: each open's reply
// carries its stamp, and a close that names one (a coordinator giving
// back a workspace a sandboxer opened beside the one its run took) is
// carried out only while that open is the run's last here: after a later
// open, the run is held again, and the close leaves it open.
func TestACloseOfAnOpenFollowedByAnotherIsNotCarriedOut(t *testing.T) {
	root := t.TempDir()
	nc, sb := start(t, root)
	open := func() uint64 {
		t.Helper()
		r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "twice.open", Run: "twice", Kind: protocol.OpOpen, Workspace: root}, 5*time.Second)
		if err != nil || r.Error != nil {
			t.Fatalf("open = %+v, %v", r, err)
		}
		if r.Opened == 0 {
			t.Fatalf("the open's reply carries no stamp: %+v", r)
		}
		return r.Opened
	}
	closeOpen := func(opened uint64) {
		t.Helper()
		r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "twice.close", Run: "twice", Kind: protocol.OpClose, Opened: opened}, 5*time.Second)
		if err != nil || r.Error != nil {
			t.Fatalf("close = %+v, %v", r, err)
		}
	}
	first := open()
	second := open()
	if second == first {
		t.Fatalf("two opens stamped alike: %d", first)
	}
	closeOpen(first)
	if n := sandboxer.OpenHandles(sb); n != 1 {
		t.Fatalf("OpenHandles after a close of an open another followed = %d, want the run still open", n)
	}
	writeRun(t, nc, "twice", root, "still.txt")
	closeOpen(second)
	if n := sandboxer.OpenHandles(sb); n != 0 {
		t.Errorf("OpenHandles after a close of the run's last open = %d, want 0", n)
	}
}
