package sandboxer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// start runs a real in-process NATS server and a sandboxer serving root.
func start(t *testing.T, root string) (*nats.Conn, *sandboxer.Sandboxer) {
	t.Helper()
	return startWith(t, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}})
}

// startWith runs a real in-process NATS server and a sandboxer of cfg.
func startWith(t *testing.T, cfg sandboxer.Config) (*nats.Conn, *sandboxer.Sandboxer) {
	t.Helper()
	// A server without JetStream: these sandboxers keep no ops bucket.
	srv := testkit.NATS(t, func(o *server.Options) { o.JetStream = false })
	connect := func() *nats.Conn { return testkit.Conn(t, srv) }
	sb, err := sandboxer.New(connect(), cfg)
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
	nc := connect()
	// Wait until the service lists its op endpoint: it answers pings
	// before its endpoints are registered.
	testkit.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		m, err := nc.Request("$SRV.INFO.harness-sandboxer", nil, time.Second)
		if err != nil {
			return fmt.Errorf("sandboxer did not come up: %w", err)
		}
		var info micro.Info
		if json.Unmarshal(m.Data, &info) != nil || !slices.ContainsFunc(info.Endpoints, func(e micro.EndpointInfo) bool { return e.Name == "op" }) {
			return errors.New("sandboxer did not come up: no op endpoint yet")
		}
		return nil
	})
	return nc, sb
}

func do(t *testing.T, nc *nats.Conn, subject string, op *protocol.SandboxOp, timeout time.Duration) (*protocol.SandboxReply, error) {
	t.Helper()
	data, err := json.Marshal(op)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(subject, data, timeout)
	if err != nil {
		return nil, err
	}
	var r protocol.SandboxReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatal(err)
	}
	return &r, nil
}

func call(name, args string) *protocol.ToolCall {
	return &protocol.ToolCall{ID: "c", Name: name, Arguments: json.RawMessage(args)}
}

func TestOpenServesOnlyItsRoots(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	nc, _ := start(t, root)
	r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "o1", Run: "r1", Kind: protocol.OpOpen, Workspace: "ws"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || r.Node != "sb1" || len(r.Tools) != 6 {
		t.Fatalf("open ws = %+v, want node sb1 with the six built-in tools", r)
	}
	for _, outside := range []string{t.TempDir(), "../", "/etc", root + "/../"} {
		_, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "o2", Run: "r2", Kind: protocol.OpOpen, Workspace: outside}, 300*time.Millisecond)
		if !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("open %q answered (%v); a root it does not serve must get no answer", outside, err)
		}
	}
	if r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: "o3", Run: "r3", Kind: protocol.OpOpen, Workspace: "missing"}, 2*time.Second); err != nil || !errors.Is(r.Error, protocol.ErrNotFound) {
		t.Errorf("open a missing dir under the root = %+v, %v; want not_found", r, err)
	}
}

func TestOps(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("code.go", "package x // TODO\n")
	write("secret.txt", "TODO the password is hunter2\n")
	nc, _ := start(t, root)
	op := func(id string, c *protocol.ToolCall, pol *protocol.Policy) *protocol.SandboxReply {
		t.Helper()
		r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: id, Run: "r1", Kind: protocol.OpTool, Workspace: root, Call: c, Policy: pol}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	allowAll := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}
	t.Run("a repeated op id runs once", func(t *testing.T) {
		c := call("exec", `{"argv":["sh","-c","echo ran >> count.txt"]}`)
		for range 3 {
			if r := op("r1.1.0.1", c, allowAll); r.Observation == nil || r.Observation.IsError {
				t.Fatalf("exec = %+v", r)
			}
		}
		got, _ := os.ReadFile(filepath.Join(root, "count.txt"))
		if string(got) != "ran\n" {
			t.Errorf("count.txt = %q after three deliveries of one op, want one line", got)
		}
	})
	t.Run("grep leaves out what the policy does not let the agent read", func(t *testing.T) {
		pol := &protocol.Policy{Layers: []protocol.Layer{{Name: "t", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "secret.txt"}}}}}
		r := op("r1.2.0.1", call("grep", `{"pattern":"TODO"}`), pol)
		if r.Observation == nil || !strings.Contains(r.Observation.Content, "code.go") || strings.Contains(r.Observation.Content, "hunter2") || strings.Contains(r.Observation.Content, "secret") {
			t.Errorf("grep = %+v, want code.go and nothing of secret.txt", r.Observation)
		}
		r = op("r1.2.1.1", call("find", `{"name_glob":"*.txt"}`), pol)
		if r.Observation == nil || strings.Contains(r.Observation.Content, "secret") {
			t.Errorf("find = %+v, want secret.txt left out", r.Observation)
		}
	})
	t.Run("an operation without a verdict covering it is refused and changes nothing", func(t *testing.T) {
		denyWrites := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}
		askWrites := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "ask", Exec: "deny", Net: "deny"}}
		for i, tt := range []struct {
			name string
			pol  *protocol.Policy
			c    *protocol.ToolCall
		}{
			{"no policy at all", nil, call("write_file", `{"path":"new.txt","content":"x"}`)},
			{"a write the policy denies", denyWrites, call("write_file", `{"path":"new.txt","content":"x"}`)},
			{"a secret, whatever the contract says", allowAll, call("write_file", `{"path":".env","content":"x"}`)},
			{"an exec the policy denies", denyWrites, call("exec", `{"argv":["touch","new.txt"]}`)},
			{"an ask without a person's approval", askWrites, call("write_file", `{"path":"new.txt","content":"x"}`)},
		} {
			r := op("r1.9."+string(rune('0'+i))+".1", tt.c, tt.pol)
			if r.Observation == nil || !r.Observation.IsError || !strings.Contains(r.Observation.Content, "refused") {
				t.Errorf("%s: %+v, want a refusal", tt.name, r.Observation)
			}
			for _, f := range []string{"new.txt", ".env"} {
				if _, err := os.Stat(filepath.Join(root, f)); err == nil {
					t.Fatalf("%s: %s was created", tt.name, f)
				}
			}
		}
	})
	t.Run("a path escape is an observation and touches nothing", func(t *testing.T) {
		r := op("r1.3.0.1", call("write_file", `{"path":"../escaped.txt","content":"x"}`), allowAll)
		if r.Observation == nil || !r.Observation.IsError || !strings.Contains(r.Observation.Content, "workspace") {
			t.Errorf("write ../escaped.txt = %+v, want a refusal naming the workspace", r.Observation)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escaped.txt")); err == nil {
			t.Error("the escaped write landed outside the workspace")
		}
	})
}

func TestVerify(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "out.txt"), []byte("all good\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nc, _ := start(t, root)
	tests := []struct {
		name   string
		v      protocol.Verification
		limits protocol.Limits
		passed bool
		detail string
	}{
		{"exit as expected", protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"true"}}}, protocol.Limits{}, true, "exited 0 as expected"},
		{"wrong exit", protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"false"}}}, protocol.Limits{}, false, "exited 1 (expected 0)"},
		{"expected non-zero exit", protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"sh", "-c", "exit 3"}, ExpectExit: 3}}, protocol.Limits{}, true, "exited 3"},
		{"killed by the wall clock never passes, whatever it would have exited",
			protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"sh", "-c", "sleep 10; exit 0"}}}, protocol.Limits{WallSecs: 1}, false, "killed by the wall cap"},
		{"missing program", protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"no-such-program-here"}}}, protocol.Limits{}, false, "could not start"},
		{"file contains", protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "out.txt", Needle: "good"}}, protocol.Limits{}, true, "contains the expected text"},
		{"file lacks", protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "out.txt", Needle: "bad"}}, protocol.Limits{}, false, "does not contain"},
		{"file missing", protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "nope.txt", Needle: "x"}}, protocol.Limits{}, false, "does not exist yet"},
		{"file outside", protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "../out.txt", Needle: "x"}}, protocol.Limits{}, false, "cannot be checked"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.v
			pol := &protocol.Policy{Defaults: &protocol.Defaults{Exec: "allow"}}
			r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "v" + string(rune('a'+i)), Run: "r1", Kind: protocol.OpVerify,
				Workspace: root, Verification: &v, Sandbox: &protocol.SandboxSpec{Limits: tt.limits}, Policy: pol}, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.Check == nil || r.Check.Passed != tt.passed || !strings.Contains(r.Check.Detail, tt.detail) {
				t.Errorf("verify = %+v, want passed=%v with %q", r.Check, tt.passed, tt.detail)
			}
		})
	}
}

// TestSymlinkSwappedBetweenCheckAndUse races a writer against a path that
// flips between a regular file and a symlink to a file outside: however
// the race falls, the outside file never changes.
func TestSymlinkSwappedBetweenCheckAndUse(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside.txt")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nc, _ := start(t, root)
	allow := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		link, file := filepath.Join(root, "flip"), filepath.Join(root, "flip.tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				_ = os.WriteFile(file, []byte("inside\n"), 0o644)
				_ = os.Rename(file, link)
			} else {
				_ = os.Remove(file)
				_ = os.Symlink("../outside.txt", file)
				_ = os.Rename(file, link)
			}
		}
	}()
	for i := range 200 {
		c := call("write_file", `{"path":"flip","content":"pwned\n"}`)
		if _, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "swap." + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Run: "r1", Kind: protocol.OpTool, Workspace: root, Call: c, Policy: allow}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	if got, _ := os.ReadFile(outside); string(got) != "keep\n" {
		t.Fatalf("the file outside the workspace became %q", got)
	}
}

// TestExecArgvTricks sends argv tricks past a policy that allows only
// `go test`: each is refused by the sandboxer's own verdict, or runs only
// as the harmless argv it is (no shell ever interprets it).
func TestExecArgvTricks(t *testing.T) {
	root := t.TempDir()
	nc, _ := start(t, root)
	pol := &protocol.Policy{Layers: []protocol.Layer{{Name: "t", Rules: []protocol.Rule{
		{Act: "exec", Effect: "allow", Pattern: "go"}, {Act: "exec", Effect: "allow", Pattern: "go test*"}}}},
		Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}
	for i, argv := range []string{
		`["sh","-c","touch pwned"]`,
		`["/bin/sh","-c","touch pwned"]`,
		`["env","touch","pwned"]`,
		`["./go","test"]`,
		`["../../usr/bin/touch","pwned"]`,
		`["touch","pwned"]`,
		`["go","test","&&","touch","pwned"]`, // allowed, but no shell reads "&&"
		`["go test; touch pwned"]`,           // one program name with spaces: not found
	} {
		r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "argv." + string(rune('a'+i)), Run: "r1", Kind: protocol.OpTool,
			Workspace: root, Call: call("exec", `{"argv":`+argv+`}`), Policy: pol}, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Observation == nil {
			t.Fatalf("%s: no observation: %+v", argv, r)
		}
		if _, err := os.Stat(filepath.Join(root, "pwned")); err == nil {
			t.Fatalf("%s created a file: %s", argv, r.Observation.Content)
		}
	}
}

// TestOpsOutliveTheSandboxer keeps op results in a real JetStream bucket:
// a new sandboxer answers a repeated op id from the first result, and a
// tool call the old one died under is reported as indeterminate, not run,
// unless the tool only reads.
func TestOpsOutliveTheSandboxer(t *testing.T) {
	nc, kv := opsBucket(t)
	root := t.TempDir()
	allow := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}
	appendOp := &protocol.SandboxOp{OpID: "r1.1.0.1", Run: "r1", Kind: protocol.OpTool, Workspace: root,
		Call: call("exec", `{"argv":["sh","-c","echo ran >> count.txt"]}`), Policy: allow}
	runOnce := func(op *protocol.SandboxOp) *protocol.SandboxReply {
		t.Helper()
		return askAnew(t, nc, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}, Ops: kv}, op)
	}
	first := runOnce(appendOp)
	second := runOnce(appendOp) // another sandboxer process, the same op id
	if first.Observation == nil || second.Observation == nil || second.Observation.Content != first.Observation.Content {
		t.Fatalf("replies differ: %+v then %+v", first.Observation, second.Observation)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "count.txt")); string(got) != "ran\n" {
		t.Errorf("count.txt = %q after two deliveries across a restart, want one line", got)
	}

	// An op the previous node began and never finished.
	if _, err := kv.Put(t.Context(), "r1.2.0.1", []byte(`{"done":false}`)); err != nil {
		t.Fatal(err)
	}
	cut := *appendOp
	cut.OpID = "r1.2.0.1"
	r := runOnce(&cut)
	if r.Observation == nil || r.Observation.Status != protocol.CallIndeterminate {
		t.Errorf("a cut-off op = %+v, want indeterminate", r.Observation)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "count.txt")); string(got) != "ran\n" {
		t.Errorf("the cut-off op ran again: count.txt = %q", got)
	}

	// A read cut off the same way changes nothing: it is run again.
	if _, err := kv.Put(t.Context(), "r1.3.0.1", []byte(`{"done":false}`)); err != nil {
		t.Fatal(err)
	}
	read := &protocol.SandboxOp{OpID: "r1.3.0.1", Run: "r1", Kind: protocol.OpTool, Workspace: root,
		Call: call("read_file", `{"path":"count.txt"}`), Policy: allow}
	r = runOnce(read)
	if r.Observation == nil || r.Observation.IsError || !strings.Contains(r.Observation.Content, "ran") {
		t.Errorf("a cut-off read = %+v, want it run again and count.txt's content", r.Observation)
	}
}

// unrecordable is an ops bucket that cannot take a record while down is
// set, as when NATS restarts under the sandboxer.
type unrecordable struct {
	jetstream.KeyValue
	down atomic.Bool
}

func (u *unrecordable) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if u.down.Load() {
		return 0, errors.New("nats: no response from stream")
	}
	return u.KeyValue.Put(ctx, key, value)
}

func (u *unrecordable) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if u.down.Load() {
		return 0, errors.New("nats: no response from stream")
	}
	return u.KeyValue.Create(ctx, key, value, opts...)
}

// TestAChangeRunsOnlyOnceRecorded asks for a command while the ops bucket
// cannot record its start: the sandboxer does not run it and does not
// answer, so the coordinator asks again; a read still runs. Once the
// bucket takes records, the next ask runs the command, once. Run
// unrecorded, the command would run again on whichever node was asked
// after an answer was lost (the e2e suite saw lines appended twice).
func TestAChangeRunsOnlyOnceRecorded(t *testing.T) {
	nc, kv := opsBucket(t)
	ops := &unrecordable{KeyValue: kv}
	ops.down.Store(true)
	root := t.TempDir()
	sb, err := sandboxer.New(nc, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{root}, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- sb.Run(ctx) }()
	defer func() { cancel(); <-done }()

	allow := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}
	appendOp := &protocol.SandboxOp{OpID: "r1.1.0.1", Run: "r1", Kind: protocol.OpTool, Workspace: root,
		Call: call("exec", `{"argv":["sh","-c","echo ran >> count.txt"]}`), Policy: allow}
	var r *protocol.SandboxReply
	waitUntil := time.Now().Add(5 * time.Second)
	for {
		// The first asks may come before the sandboxer listens; a read
		// answers once it does.
		r, err = do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.0.0.1", Run: "r1", Kind: protocol.OpTool, Workspace: root,
			Call: call("find", `{"name_glob":"*"}`), Policy: allow}, time.Second)
		if err == nil || time.Now().After(waitUntil) {
			break
		}
	}
	if err != nil || r.Observation == nil || r.Observation.IsError {
		t.Fatalf("a read while the bucket is down = %+v, %v; want it run", r, err)
	}
	if _, err := do(t, nc, "harness.sandbox.sb1.op", appendOp, time.Second); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a command whose start cannot be recorded was answered (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "count.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran before its start was recorded (%v)", err)
	}

	ops.down.Store(false)
	for range 2 { // asked again, and once more as if the answer were lost
		r, err = do(t, nc, "harness.sandbox.sb1.op", appendOp, 5*time.Second)
		if err != nil || r.Observation == nil || r.Observation.IsError {
			t.Fatalf("the command asked again = %+v, %v; want it run", r, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "count.txt")); string(got) != "ran\n" {
		t.Errorf("count.txt = %q, want the command run once", got)
	}
}

// countedCreates is an ops bucket that counts the records created in it.
type countedCreates struct {
	jetstream.KeyValue
	creates atomic.Int32
}

func (c *countedCreates) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	c.creates.Add(1)
	return c.KeyValue.Create(ctx, key, value, opts...)
}

// TestAVerificationRecordsOnlyItsResult runs a verification with an ops
// bucket: its start is not recorded (a verification cut off is run again,
// so the record would be a synced write on the step's path for nothing),
// its result is, and another sandboxer asked the same op answers with
// that result instead of running the verification again.
func TestAVerificationRecordsOnlyItsResult(t *testing.T) {
	nc, kv := opsBucket(t)
	ops := &countedCreates{KeyValue: kv}
	root := t.TempDir()
	allow := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}}
	verify := &protocol.SandboxOp{OpID: "r1.1.verify.1", Run: "r1", Kind: protocol.OpVerify, Workspace: root, Policy: allow,
		Verification: &protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"sh", "-c", "echo checked >> checks.txt"}}}}
	ask := func(id string) *protocol.SandboxReply {
		t.Helper()
		return askAnew(t, nc, sandboxer.Config{AllowFloor: true, ID: id, Roots: []string{root}, Ops: ops}, verify)
	}
	first := ask("sb1")
	if first.Check == nil || !first.Check.Passed {
		t.Fatalf("the verification = %+v, want it passed", first)
	}
	if n := ops.creates.Load(); n != 0 {
		t.Errorf("the verification created %d records, want none: its start needs no record", n)
	}
	testkit.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		e, err := kv.Get(t.Context(), wire.OpKey(verify.OpID))
		if err != nil {
			return err
		}
		var rec wire.OpRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil || !rec.Done || rec.Reply == nil || rec.Reply.Check == nil {
			return fmt.Errorf("the verification's record is %s, want its result", e.Value())
		}
		return nil
	})
	second := ask("sb2")
	if second.Check == nil || second.Check.Detail != first.Check.Detail {
		t.Errorf("asked again elsewhere = %+v, want the first result %+v", second.Check, first.Check)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "checks.txt")); string(got) != "checked\n" {
		t.Errorf("checks.txt = %q, want the verification run once", got)
	}
}

// askAnew starts a sandboxer with cfg, asks it op on its node's subject
// (again while it is not listening yet), and stops it.
func askAnew(t *testing.T, nc *nats.Conn, cfg sandboxer.Config, op *protocol.SandboxOp) *protocol.SandboxReply {
	t.Helper()
	sb, err := sandboxer.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- sb.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var r *protocol.SandboxReply
	testkit.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() (err error) {
		r, err = do(t, nc, wire.SandboxOps(cfg.ID), op, 5*time.Second)
		return err
	})
	return r
}

// opsBucket is a connection to a server of its own with an ops bucket.
func opsBucket(t *testing.T) (*nats.Conn, jetstream.KeyValue) {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	return nc, kv
}
