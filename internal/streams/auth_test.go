package streams_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// passwords of the users in deploy/nats/auth.conf, for these tests only.
var passwords = map[string]string{
	"admin": "HARNESS_ADMIN_PASSWORD", "approver": "HARNESS_APPROVER_PASSWORD", "console": "HARNESS_CONSOLE_PASSWORD", "coordinator": "HARNESS_COORDINATOR_PASSWORD", "worker": "HARNESS_WORKER_PASSWORD",
	"sandboxer-sb1": "HARNESS_SANDBOXER_SB1_PASSWORD", "sandboxer-sb2": "HARNESS_SANDBOXER_SB2_PASSWORD",
	"acme": "HARNESS_TENANT_ACME_PASSWORD", "bravo": "HARNESS_TENANT_BRAVO_PASSWORD",
}

// startSecure starts an embedded NATS server with the permission sets
// the deployment ships (deploy/nats/single-secure.conf), on a free port
// and a temporary store.
func startSecure(t *testing.T) string {
	t.Helper()
	t.Setenv("NATS_NAME", "secure-test")
	for user, env := range passwords {
		t.Setenv(env, "pw-"+user)
	}
	return testkit.NATS(t, testkit.Config(t, filepath.Join("..", "..", "deploy", "nats", "single-secure.conf")), testkit.Listen).ClientURL()
}

func as(user string) streams.Auth { return streams.Auth{User: user, Password: "pw-" + user} }

// refusals collects the permission violations the server reports to a
// connection.
type refusals struct {
	mu   sync.Mutex
	errs []string
}

func (r *refusals) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.errs = append(r.errs, err.Error())
	})
}

func (r *refusals) has(subject string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if strings.Contains(e, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

func dial(t *testing.T, url string, a streams.Auth, extra ...nats.Option) *nats.Conn {
	t.Helper()
	opts, err := a.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if err != nil {
		t.Fatalf("connect as %s: %v", a.User, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestRolesRunUnderTheirOwnPermissions runs a contract with every role
// connected as its own restricted user, the worker and the sandboxer
// binding to what the coordinator created, submitted by a tenant that
// hears its answer and its run's events under its own names.
func TestRolesRunUnderTheirOwnPermissions(t *testing.T) {
	url := startSecure(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// The worker comes up first and waits for the coordinator.
	type bound struct {
		nc  *nats.Conn
		err error
	}
	workerUp := make(chan bound, 1)
	go func() {
		nc, _, _, err := streams.Connect(ctx, url, "harness-worker", streams.Options{Auth: as("worker"), Bind: true})
		workerUp <- bound{nc, err}
	}()
	cnc, _, _, err := streams.Connect(ctx, url, "harness-coordinator", streams.Options{Auth: as("coordinator"), Pools: []string{"default"}})
	if err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	defer cnc.Close()
	w := <-workerUp
	if w.err != nil {
		t.Fatalf("worker binding: %v", w.err)
	}
	defer w.nc.Close()
	snc, _, sassets, err := streams.Connect(ctx, url, "harness-sandboxer", streams.Options{Auth: as("sandboxer-sb1"), Bind: true})
	if err != nil {
		t.Fatalf("sandboxer binding: %v", err)
	}
	defer snc.Close()

	ws := t.TempDir()
	write := &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"out.txt","content":"done\n"}`)}},
		Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5}}
	read := &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c0", Name: "read_file", Arguments: json.RawMessage(`{"path":"out.txt"}`)}},
		Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5}}
	// The root run's steps, then the snapshot run's: each run's second
	// step task extends its first, and the worker keeps no request, so it
	// asks the coordinator for each whole, under its own permissions.
	script := provider.NewScripted(read, write, read, write)
	co, err := coordinator.New(cnc, coordinator.Config{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	wk, err := worker.New(w.nc, script, worker.Config{ID: "w1", Bind: true, TranscriptBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandboxer.New(snc, sandboxer.Config{AllowFloor: true, ID: "sb1", Roots: []string{ws}, Ops: sassets.Ops,
		Workspaces: sassets.Workspaces, SnapshotDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, role := range []interface{ Run(context.Context) error }{sb, wk, co} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := role.Run(rctx); err != nil && rctx.Err() == nil {
				t.Errorf("role stopped: %v", err)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	// The tenant submits on its own subject and listens on its own names.
	tnc := dial(t, url, as("acme"))
	events, err := tnc.SubscribeSync("harness.tenant.acme.events.>")
	if err != nil {
		t.Fatal(err)
	}
	answers, err := tnc.SubscribeSync("_INBOX.acme.answers")
	if err != nil {
		t.Fatal(err)
	}
	submit := func(workspace, id string) {
		t.Helper()
		contract := `{"schema":"harness.contract/v1","task":"write done to out.txt","workspace":` + workspace + `,
		"verification":{"file_contains":{"path":"out.txt","needle":"done"}},
		"policy":{"layers":[],"defaults":{"read":"allow","write":"allow","exec":"deny","net":"deny"}},"sandbox":{"backend":"floor"}}`
		msg := &nats.Msg{Subject: "harness.submit.acme", Data: []byte(contract),
			Header: nats.Header{"Harness-Reply": []string{"_INBOX.acme.answers"}, "Nats-Msg-Id": []string{id}}}
		if err := tnc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		m, err := answers.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("the tenant heard no answer: %v", err)
		}
		var reply protocol.SubmitReply
		if err := json.Unmarshal(m.Data, &reply); err != nil || reply.Error != nil {
			t.Fatalf("answer %s: %v %v", m.Data, err, reply.Error)
		}
		if want := "t-acme-" + id; reply.Run != want {
			t.Errorf("tenant run id = %q, want %s", reply.Run, want)
		}
		for {
			m, err := events.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("no finished event on the tenant's subjects: %v", err)
			}
			var ev protocol.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Kind == protocol.EventFinished {
				if ev.Outcome != protocol.OutcomeSuccess {
					t.Fatalf("outcome %s (%s), want success", ev.Outcome, ev.Text)
				}
				break
			}
		}
	}
	submit(`{"root":"`+ws+`"}`, "job1")
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "done\n" {
		t.Errorf("out.txt = %q, %v", b, err)
	}

	// The coordinator lists the run index with one direct get of the
	// bucket's stream (trace.ListDirect): a request its user may make,
	// answered with the index's entries. A refused one would get no
	// answer, and the listing would wait and watch instead.
	m, err := cnc.Request("$JS.API.DIRECT.GET.KV_"+wire.BucketRuns, []byte(`{"multi_last":["$KV.`+wire.BucketRuns+`.>"]}`), 5*time.Second)
	if err != nil {
		t.Fatalf("the coordinator's direct get of the run index: %v", err)
	}
	if subj := m.Header.Get("Nats-Subject"); !strings.HasPrefix(subj, "$KV."+wire.BucketRuns+".") {
		t.Errorf("the coordinator's direct get of the run index answered %q %q, want an entry", m.Header, m.Data)
	}

	// The tenant uploads a workspace to the object store itself, and a
	// contract naming it runs on the sandboxer, which reads the snapshot
	// and writes the run's patch under its own credentials.
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "in.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := snapshot.Pack(&archive, src, snapshot.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := snapshot.Ref(archive.Bytes())
	tjs, err := jetstream.New(tnc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := tjs.ObjectStore(ctx, wire.BucketWorkspaces)
	if err != nil {
		t.Fatalf("the tenant binding the workspaces object store: %v", err)
	}
	if _, err := obs.PutBytes(ctx, ref, archive.Bytes()); err != nil {
		t.Fatalf("the tenant uploading a snapshot: %v", err)
	}
	submit(`{"snapshot":"`+ref+`"}`, "job2")
	admin := dial(t, url, as("admin"))
	cl, err := harness.NewClient(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	p, diff, err := cl.Run("t-acme-job2").Patch(ctx)
	if err != nil {
		t.Fatalf("the snapshot run's patch: %v", err)
	}
	if p.Node != "sb1" || !bytes.Contains(diff, []byte("+done")) {
		t.Errorf("the snapshot run's patch from %q: %q, want out.txt added with done", p.Node, diff)
	}
}

// TestTheServerRefuses checks that each role's user is refused what it
// must not do, by the server, and that bad credentials and refused
// creation give errors that say what to change.
func TestTheServerRefuses(t *testing.T) {
	url := startSecure(t)
	ctx := t.Context()

	// A worker on an empty server, without --bind-streams, may not create
	// the streams; the error says so.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _, _, err := streams.Connect(wctx, url, "harness-worker", streams.Options{Auth: as("worker")})
	var pe *wire.PermissionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "--bind-streams") {
		t.Errorf("worker creating streams: %v, want a permission error that points at --bind-streams", err)
	}

	// A wrong password names the user, never the password.
	_, _, _, err = streams.Connect(ctx, url, "harness-worker", streams.Options{Auth: streams.Auth{User: "worker", Password: "not-the-secret"}})
	if err == nil || !strings.Contains(err.Error(), `user "worker"`) || strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("wrong password: %v, want an error naming the user and not the password", err)
	}
	_, _, _, err = streams.Connect(ctx, url, "harness-worker", streams.Options{})
	if err == nil || !strings.Contains(err.Error(), "NATS_USER") {
		t.Errorf("no credentials: %v, want an error saying which to set", err)
	}

	// The coordinator creates the streams; then each refusal.
	cnc, _, _, err := streams.Connect(ctx, url, "harness-coordinator", streams.Options{Auth: as("coordinator"), Pools: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cnc.Close()

	tests := []struct {
		name, user, subject string
		subscribe           bool
	}{
		{"a worker appends to the trace", "worker", "harness.trace.r1", false},
		{"a worker creates a consumer", "worker", "$JS.API.CONSUMER.CREATE.HARNESS_STEPS.mine", false},
		{"a worker writes the run index", "worker", "$KV.harness-runs.r1", false},
		{"a sandboxer appends to the trace", "sandboxer-sb1", "harness.trace.r1", false},
		{"a sandboxer takes another node's operations", "sandboxer-sb1", "harness.sandbox.sb2.op", true},
		{"a sandboxer publishes a turn", "sandboxer-sb1", "harness.turns.r1.1.1", false},
		{"a worker publishes outside a call's turn subject", "worker", "harness.turns.r1", false},
		// Only the turns stream tells a coordinator a turn is stored.
		{"a worker tells a turn stored", "worker", "harness.stored.turns.r1.1.1", false},
		{"a sandboxer tells a turn stored", "sandboxer-sb1", "harness.stored.turns.r1.1.1", false},
		{"a tenant tells a turn stored", "acme", "harness.stored.turns.r1.1.1", false},
		// A run's requests are the workers' and the coordinators' alone.
		{"a tenant asks for a step task whole", "acme", "harness.task.r1.1.1", false},
		{"a sandboxer asks for a step task whole", "sandboxer-sb1", "harness.task.r1.1.1", false},
		{"a worker hears the asks for step tasks whole", "worker", "harness.task.>", true},
		{"a tenant reads another tenant's events", "acme", "harness.tenant.bravo.events.>", true},
		{"a tenant reads another tenant's answers", "acme", "_INBOX.bravo.>", true},
		{"a tenant reads every run's events", "acme", "harness.events.>", true},
		{"a tenant submits as another", "acme", "harness.submit.bravo", false},
		{"a tenant submits outside tenancy", "acme", "harness.submit", false},
		{"a tenant reads the trace", "acme", "$JS.API.STREAM.MSG.GET.HARNESS_TRACE", false},
		{"a tenant reads the run index", "acme", "$JS.API.DIRECT.GET.KV_harness-runs.$KV.harness-runs.r1", false},
		// A tenant may upload to the workspaces object store, not read it.
		{"a tenant reads an object's chunks", "acme", "$JS.API.DIRECT.GET.OBJ_harness-workspaces.$O.harness-workspaces.C.n1", false},
		{"a tenant reads a message of the object store", "acme", "$JS.API.STREAM.MSG.GET.OBJ_harness-workspaces", false},
		{"a tenant reads the object store through a consumer", "acme", "$JS.API.CONSUMER.CREATE.OBJ_harness-workspaces.c1.$O.harness-workspaces.C.n1", false},
		{"a tenant purges the object store", "acme", "$JS.API.STREAM.PURGE.OBJ_harness-workspaces", false},
		{"a tenant lists the streams", "acme", "$JS.API.STREAM.NAMES", false},
		{"a tenant writes the blob store", "acme", "$O.harness-blobs.M.b1", false},
		{"a worker writes the workspaces object store", "worker", "$O.harness-workspaces.M.w1", false},
		{"a sandboxer purges the object store", "sandboxer-sb1", "$JS.API.STREAM.PURGE.OBJ_harness-workspaces", false},
		// Approvals are a person's: no role and no tenant decides one.
		{"a tenant decides an approval", "acme", "harness.decide.r1.1.0", false},
		{"a worker decides an approval", "worker", "harness.decide.r1.1.0", false},
		{"a sandboxer decides an approval", "sandboxer-sb1", "harness.decide.r1.1.0", false},
		{"the coordinator decides an approval", "coordinator", "harness.decide.r1.1.0", false},
		{"an approver submits a contract", "approver", "harness.submit", false},
		{"an approver reads the trace", "approver", "$JS.API.STREAM.MSG.GET.HARNESS_TRACE", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r refusals
			nc := dial(t, url, as(tt.user), r.option())
			if tt.subscribe {
				if _, err := nc.SubscribeSync(tt.subject); err != nil {
					t.Fatal(err)
				}
			} else if err := nc.Publish(tt.subject, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			testkit.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
				if !r.has(tt.subject) {
					return errors.New("the server did not refuse " + tt.subject + " to " + tt.user)
				}
				return nil
			})
		})
	}
}
