package sandboxer_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// TestAdmissionIsBounded: with one slot and one place to wait, an
// operation beyond them is left unanswered and starts no goroutine, while
// repeats of the two admitted take neither a slot nor a place and are
// answered when those end; the operation left out runs when it is asked
// again.
func TestAdmissionIsBounded(t *testing.T) {
	root := t.TempDir()
	nc, _ := startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}, MaxConcurrent: 1, MaxQueued: 1})
	replies := answers(t, nc)
	script := func(id, sh string) *protocol.SandboxOp { return execOp(id, "r1", root, sh) }
	send := func(reply string, op *protocol.SandboxOp) { sendOp(t, nc, reply, op) }
	waitHandled := func(n int) {
		t.Helper()
		testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			if got := opsHandled(t, nc); got != n {
				return fmt.Errorf("the op endpoint handled %d requests, want %d", got, n)
			}
			return nil
		})
	}

	a := script("r1.1.0.1", "touch a-started; while [ ! -e release ]; do sleep 0.01; done; echo a >> ran")
	b := script("r1.2.0.1", "echo b >> ran")
	send("answers.a.0", a)
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(root, "a-started"))
		return err
	})
	send("answers.b.0", b) // waits for a's slot
	waitHandled(2)
	for i := 1; i <= 3; i++ {
		send(fmt.Sprintf("answers.a.%d", i), a)
		send(fmt.Sprintf("answers.b.%d", i), b)
	}
	waitHandled(8)

	before := runtime.NumGoroutine()
	const beyond = 50
	for i := range beyond {
		send(fmt.Sprintf("answers.c.%d", i), script(fmt.Sprintf("r1.3.%d.1", i), "echo c >> ran"))
	}
	waitHandled(8 + beyond)
	if grew := runtime.NumGoroutine() - before; grew > beyond/2 {
		t.Errorf("%d operations beyond MaxConcurrent+MaxQueued added %d goroutines, want them turned away", beyond, grew)
	}

	if err := os.WriteFile(filepath.Join(root, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for len(answered) < 8 {
		select {
		case m := <-replies:
			var r protocol.SandboxReply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(m.Subject, "answers.c.") {
				t.Errorf("%s was answered (%+v); an operation beyond the bound must be left for its coordinator to ask again", m.Subject, r)
				continue
			}
			if r.Observation == nil || r.Observation.IsError {
				t.Errorf("%s = %+v, want the exec's observation", m.Subject, r)
			}
			answered[m.Subject] = true
		case <-deadline:
			t.Fatalf("answered %v after the release, want a and b each four times: the first ask and three repeats", answered)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "ran")); string(got) != "a\nb\n" {
		t.Errorf("ran = %q, want a and b once each and none of the operations turned away", got)
	}

	r, err := do(t, nc, wire.SandboxOps("sb1"), script("r1.3.0.1", "echo c >> ran"), 10*time.Second)
	if err != nil || r.Observation == nil || r.Observation.IsError {
		t.Fatalf("an operation turned away, asked again = %+v, %v; want it run", r, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "ran")); string(got) != "a\nb\nc\n" {
		t.Errorf("ran = %q, want the operation asked again run once", got)
	}
}

// TestConfigIsTheCallers: New copies what it keeps of the caller's
// Config, so neither changes the other.
func TestConfigIsTheCallers(t *testing.T) {
	root := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	cfg := sandboxer.Config{
		AllowFloor: true, ID: "sb1",
		Roots:    []string{link},
		Reserved: []string{filepath.Join(link, "..", "data")},
		CmdEnv:   []string{"MARK=before"},
		Missing:  map[string]string{"docker": "no engine answers here"},
	}
	nc, _ := startWith(t, cfg)
	if cfg.Roots[0] != link || cfg.Reserved[0] != filepath.Join(link, "..", "data") || cfg.Backends != nil || cfg.Tools != nil || cfg.MaxConcurrent != 0 {
		t.Errorf("after New the caller's Config is %+v, want it as it gave it", cfg)
	}
	cfg.CmdEnv[0] = "MARK=after"
	cfg.Missing["docker"] = "changed by the caller"

	allowAll := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}
	r, err := do(t, nc, wire.SandboxOps("sb1"), &protocol.SandboxOp{OpID: "r1.1.0.1", Run: "r1", Kind: protocol.OpTool, Workspace: root,
		Call: call("exec", `{"argv":["env"]}`), Policy: allowAll}, 10*time.Second)
	if err != nil || r.Observation == nil {
		t.Fatalf("exec env = %+v, %v", r, err)
	}
	if !strings.Contains(r.Observation.Content, "MARK=before") {
		t.Errorf("exec env printed %q, want the CmdEnv New was given (MARK=before)", r.Observation.Content)
	}
	r, err = do(t, nc, wire.SandboxOpenSubject, &protocol.SandboxOp{OpID: "r2.open", Run: "r2", Kind: protocol.OpOpen, Workspace: root,
		Sandbox: &protocol.SandboxSpec{Backend: "docker"}, Verification: &protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"true"}}}}, 10*time.Second)
	if err != nil || r.Error == nil {
		t.Fatalf("open naming docker = %+v, %v; want it refused", r, err)
	}
	if !strings.Contains(r.Error.Message, "no engine answers here") {
		t.Errorf("refusal = %q, want the reason New was given", r.Error.Message)
	}
}

// TestOpensWaitForNoCommand: a run's open takes no slot, so a new run's
// workspace opens while other runs' commands hold every slot; an open
// that finds every place taken is told at once to ask again (a retryable
// unavailable), where an op left unanswered costs its coordinator the
// wait of a whole request.
func TestOpensWaitForNoCommand(t *testing.T) {
	root := t.TempDir()
	nc, _ := startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}, MaxConcurrent: 1, MaxQueued: 1})
	hold := func(id string) {
		t.Helper()
		sendOp(t, nc, "answers."+id, execOp(id, "r1", root, "touch "+id+"; while [ ! -e release ]; do sleep 0.01; done"))
	}
	t.Cleanup(func() { os.WriteFile(filepath.Join(root, "release"), nil, 0o644) })
	hold("held")
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(root, "held"))
		return err
	})
	// The only slot is taken by a command that will not end by itself.
	openRun(t, nc, "r2", root)

	hold("queued") // waits for the slot, in the only place left
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := opsHandled(t, nc); n != 2 {
			return fmt.Errorf("the op endpoint handled %d requests, want the two commands", n)
		}
		return nil
	})
	r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "r3.open", Run: "r3", Kind: protocol.OpOpen, Workspace: root}, 5*time.Second)
	if err != nil || r.Error == nil || r.Error.Code != protocol.CodeUnavailable || !r.Error.Retryable() {
		t.Errorf("open with every place taken = %+v, %v; want a retryable unavailable at once", r, err)
	}
}

// TestFileToolsWaitForNoCommand: the file tools take no slot, so with the
// only slot held by another run's command that will not end by itself, a
// run's reads, searches and edits are still answered; and a command of its
// own waits for the slot, run once the first command ends.
func TestFileToolsWaitForNoCommand(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("read me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nc, _ := startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}, MaxConcurrent: 1, MaxQueued: 4})
	replies := answers(t, nc)
	t.Cleanup(func() { os.WriteFile(filepath.Join(root, "release"), nil, 0o644) })
	sendOp(t, nc, "answers.held", execOp("r1.1.0.1", "r1", root, "touch held; while [ ! -e release ]; do sleep 0.01; done"))
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(root, "held"))
		return err
	})
	allow := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}
	for i, c := range []struct{ tool, args, want string }{
		{"read_file", `{"path":"notes.txt"}`, "read me"},
		{"grep", `{"pattern":"read"}`, "notes.txt"},
		{"find", `{"name_glob":"*.txt"}`, "notes.txt"},
		{"write_file", `{"path":"out.txt","content":"written"}`, ""},
		{"edit_file", `{"path":"notes.txt","search":"read me","replace":"edited"}`, ""},
	} {
		op := &protocol.SandboxOp{OpID: fmt.Sprintf("r2.%d.0.1", i+1), Run: "r2", Kind: protocol.OpTool, Workspace: root, Call: call(c.tool, c.args), Policy: allow}
		r, err := do(t, nc, wire.SandboxOps("sb1"), op, 5*time.Second)
		if err != nil {
			t.Fatalf("%s while another run's command holds the only slot: %v; want it answered", c.tool, err)
		}
		if r.Observation == nil || r.Observation.IsError || !strings.Contains(r.Observation.Content, c.want) {
			t.Errorf("%s = %+v, want its observation (with %q)", c.tool, r, c.want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "notes.txt")); string(got) != "edited\n" {
		t.Errorf("notes.txt = %q after edit_file, want %q", got, "edited\n")
	}

	sendOp(t, nc, "answers.second", execOp("r2.9.0.1", "r2", root, "echo second > second"))
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := opsHandled(t, nc); n != 7 {
			return fmt.Errorf("the op endpoint handled %d requests, want 7", n)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(root, "second")); err == nil {
		t.Fatal("a second command ran while the only slot was held")
	}
	if err := os.WriteFile(filepath.Join(root, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case m := <-replies:
			var r protocol.SandboxReply
			if err := json.Unmarshal(m.Data, &r); err != nil || r.Observation == nil || r.Observation.IsError {
				t.Errorf("%s = %s, want the command's observation", m.Subject, m.Data)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the two commands were not both answered after the release")
		}
	}
}

// TestAnsweredOpHoldsNoPlace: an op gives its place back before it is
// answered, so the op its coordinator sends on that answer is admitted.
// With one place left (of three: a command that does not end holds one,
// and the close of its run, waiting for it, another), a run's read_file
// calls, each sent the moment the one before is answered, are every one
// answered: none finds the last place still held by the op just
// answered, which would leave it unanswered until its coordinator asked
// again.
func TestAnsweredOpHoldsNoPlace(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("read me"), 0o644); err != nil {
		t.Fatal(err)
	}
	nc, _ := startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}, MaxConcurrent: 2, MaxQueued: 1})
	t.Cleanup(func() { os.WriteFile(filepath.Join(root, "release"), nil, 0o644) })
	sendOp(t, nc, "answers.held", execOp("r0.1.0.1", "r0", root, "touch held; while [ ! -e release ]; do sleep 0.01; done"))
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(root, "held"))
		return err
	})
	sendOp(t, nc, "answers.close", &protocol.SandboxOp{OpID: "r0.close", Run: "r0", Kind: protocol.OpClose})
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := opsHandled(t, nc); n != 2 {
			return fmt.Errorf("the op endpoint handled %d requests, want the command and the close", n)
		}
		return nil
	})
	openRun(t, nc, "r1", root)
	for i := range 300 {
		op := &protocol.SandboxOp{OpID: fmt.Sprintf("r1.%d.0.1", i+1), Run: "r1", Kind: protocol.OpTool, Workspace: root,
			Call: call("read_file", `{"path":"notes.txt"}`), Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
		r, err := do(t, nc, wire.SandboxOps("sb1"), op, 2*time.Second)
		if err != nil || r.Error != nil || r.Observation == nil || r.Observation.Status != protocol.CallOK {
			t.Fatalf("read %d, sent on the answer of the one before = %+v, %v; want answered", i+1, r, err)
		}
	}
}

// TestRootInAReservedDirIsRefused: a root inside a directory no workspace
// may be in (the data directory, the directory of a program run outside
// the sandboxes) would serve no run, so New refuses it, saying where it
// lies; a root that holds such a directory serves the rest of itself.
func TestRootInAReservedDirIsRefused(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t, func(o *server.Options) { o.JetStream = false }))
	base := t.TempDir()
	data := filepath.Join(base, "data")
	if err := os.MkdirAll(filepath.Join(data, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := sandboxer.New(nc, sandboxer.Config{AllowFloor: true, Roots: []string{filepath.Join(data, "work")}, Reserved: []string{data}})
	if err == nil || !strings.Contains(err.Error(), "lies in "+data) {
		t.Errorf("New with a root in the data directory: %v, want it refused, naming the directory", err)
	}
	if _, err := sandboxer.New(nc, sandboxer.Config{AllowFloor: true, Roots: []string{base}, Reserved: []string{data}}); err != nil {
		t.Errorf("New with a root holding the data directory: %v, want it served", err)
	}
	// Through a link, to a directory not made yet.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	_, err = sandboxer.New(nc, sandboxer.Config{AllowFloor: true, Roots: []string{filepath.Join(link, "data", "later")}, Reserved: []string{data}})
	if err == nil || !strings.Contains(err.Error(), "lies in "+data) {
		t.Errorf("New with a root in the data directory through a link: %v, want it refused", err)
	}
	_, err = sandboxer.New(nc, sandboxer.Config{AllowFloor: true, Roots: []string{"/usr/src/project"}})
	if err == nil || !strings.Contains(err.Error(), "lies in /usr, a system directory") {
		t.Errorf("New with a root in /usr: %v, want it refused", err)
	}
}
