package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/conf"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/console"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/worker"
)

// TestConsolePermissionsMatchAuthConf checks the console user of
// deploy/nats/auth.conf may do exactly what harness.ConsolePermissions
// lists, which is what an embedded cluster gives its console.
func TestConsolePermissionsMatchAuthConf(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "nats", "auth.conf")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$(HARNESS_[A-Z0-9_]+)`).FindAllStringSubmatch(string(raw), -1) {
		t.Setenv(m[1], "pw")
	}
	cfg, err := conf.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	strs := func(v any) []string {
		var out []string
		for _, s := range v.([]any) {
			out = append(out, s.(string))
		}
		return out
	}
	set := cfg["CONSOLE"].(map[string]any)
	pub := strs(set["publish"].(map[string]any)["allow"])
	sub := strs(set["subscribe"].(map[string]any)["allow"])
	wantPub, wantSub := harness.ConsolePermissions()
	if diff := cmp.Diff(wantPub, pub); diff != "" {
		t.Errorf("auth.conf's CONSOLE publish differs from harness.ConsolePermissions (-Go +conf):\n%s", diff)
	}
	if diff := cmp.Diff(wantSub, sub); diff != "" {
		t.Errorf("auth.conf's CONSOLE subscribe differs from harness.ConsolePermissions (-Go +conf):\n%s", diff)
	}
	if !strings.Contains(string(raw), "{ user: console, password: $HARNESS_CONSOLE_PASSWORD, permissions: $CONSOLE }") {
		t.Error("auth.conf has no console user with the CONSOLE permissions")
	}
}

// askOrBlock is a model for the console's runs: a task saying [block]
// waits until its call is abandoned; any other edits notes.txt (which the
// policy asks about), then stops.
type askOrBlock struct{}

func (askOrBlock) Name() string { return "ask-or-block" }

func (askOrBlock) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	all, step := "", 1
	for _, m := range req.Messages {
		all += m.Content
		if m.Role == protocol.RoleAssistant {
			step++
		}
	}
	u := protocol.Usage{InputTokens: 10, OutputTokens: 5}
	switch {
	case strings.Contains(all, "[block]"):
		<-ctx.Done()
		return nil, ctx.Err()
	case step > 1:
		return &protocol.Turn{Text: "Done.", Usage: u}, nil
	}
	return &protocol.Turn{Usage: u, ToolCalls: []protocol.ToolCall{{ID: "e", Name: "edit_file",
		Arguments: json.RawMessage(`{"path":"notes.txt","search":"draft","replace":"final"}`)}}}, nil
}

// TestTheConsoleUnderItsOwnPermissions serves the console connected as
// the console user of deploy/nats/auth.conf, on a cluster whose roles run
// as their own users, and reads every page, decides an approval and
// cancels a run through it: the server refuses the console nothing it
// needs. It refuses it what it must not do: submit, resume, write a
// bucket.
func TestTheConsoleUnderItsOwnPermissions(t *testing.T) {
	natsURL := startSecure(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("a draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cnc, _, _, err := streams.Connect(ctx, natsURL, "harness-coordinator", streams.Options{Auth: as("coordinator"), Pools: []string{"default"}})
	if err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	defer cnc.Close()
	wnc, _, _, err := streams.Connect(ctx, natsURL, "harness-worker", streams.Options{Auth: as("worker"), Bind: true})
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	defer wnc.Close()
	snc, _, sassets, err := streams.Connect(ctx, natsURL, "harness-sandboxer", streams.Options{Auth: as("sandboxer-sb1"), Bind: true})
	if err != nil {
		t.Fatalf("sandboxer: %v", err)
	}
	defer snc.Close()
	co, err := coordinator.New(cnc, coordinator.Config{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	wk, err := worker.New(wnc, askOrBlock{}, worker.Config{ID: "w1", Bind: true})
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

	var refused refusals
	nc := dial(t, natsURL, as("console"), refused.option())
	cc, err := harness.BindClient(ctx, nc, 30*time.Second)
	if err != nil {
		t.Fatalf("the console binding to the streams: %v", err)
	}
	tokens, err := console.ParseTokens("test", []byte("alice:alice-token-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := console.New(console.Config{Client: cc, Tokens: tokens})
	if err != nil {
		t.Fatalf("the console following the events: %v", err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	get := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequestWithContext(ctx, method, hs.URL+path, body)
		req.Header.Set("Authorization", "Bearer alice-token-0123456789")
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	admin, err := harness.NewClient(ctx, dial(t, natsURL, as("admin")))
	if err != nil {
		t.Fatal(err)
	}
	contract := func(task string) *protocol.Contract {
		return &protocol.Contract{Task: task, Workspace: protocol.Workspace{Root: ws}, Verification: protocol.Verification{None: &struct{}{}},
			Sandbox: protocol.SandboxSpec{Backend: "floor"}, Budget: protocol.Budget{MaxSteps: 4},
			Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "ask", Exec: "deny", Net: "deny"}}}
	}
	h, err := admin.Submit(ctx, contract("finish the notes"), harness.WithRunID("asked"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err := h.Status(ctx)
		if err == nil && st.Status != protocol.StatusPaused {
			err = fmt.Errorf("run %s is %s", h.ID(), st.Status)
		}
		return err
	})
	for _, path := range []string{"/runs", "/runs/asked", "/runs/asked/story", "/runs/asked/steps/1", "/approvals", "/fleet"} {
		status, body := get("GET", path, nil)
		if status != http.StatusOK || strings.Contains(body, "could not be read") || strings.Contains(body, "did not answer") {
			t.Errorf("GET %s as the console user: status %d, body %s", path, status, body)
		}
	}
	if status, body := get("POST", "/approvals/asked.1.0", url.Values{"action": {"approve"}}); status != http.StatusOK {
		t.Fatalf("approve as the console user: status %d, %s", status, body)
	}
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err := h.Status(ctx)
		if err == nil && st.Outcome != protocol.OutcomeFinished {
			err = fmt.Errorf("the approved run is %s %s (%s), want finished", st.Status, st.Outcome, st.Reason)
		}
		return err
	})
	b, err := admin.Submit(ctx, contract("[block]"), harness.WithRunID("blocked"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err := b.Status(ctx)
		if err == nil && st.Status != protocol.StatusRunning {
			err = fmt.Errorf("run %s is %s", b.ID(), st.Status)
		}
		return err
	})
	if status, body := get("POST", "/runs/blocked/cancel", url.Values{"reason": {"enough"}}); status != http.StatusOK {
		t.Fatalf("cancel as the console user: status %d, %s", status, body)
	}
	if res, err := b.Wait(ctx); err != nil || res.Outcome != protocol.OutcomeCancelled {
		t.Fatalf("the cancelled run: %+v, %v; want cancelled", res, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	refused.mu.Lock()
	if len(refused.errs) > 0 {
		t.Errorf("the server refused the console: %v", refused.errs)
	}
	refused.mu.Unlock()

	// What the console may not do, the server refuses.
	for _, subj := range []string{"harness.submit", "harness.resume.asked", "$KV.harness-approvals.asked.1.0", "$KV.harness-runs.asked", "$JS.API.STREAM.CREATE.X"} {
		if err := nc.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	testkit.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		for _, subj := range []string{"harness.submit", "harness.resume.asked", "$KV.harness-approvals.asked.1.0", "$KV.harness-runs.asked", "$JS.API.STREAM.CREATE.X"} {
			if !refused.has(subj) {
				return fmt.Errorf("the server did not refuse the console a publish on %s", subj)
			}
		}
		return nil
	})
	if _, err := nc.SubscribeSync("harness.turns.>"); err == nil {
		_ = nc.Flush()
		testkit.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
			if !refused.has("harness.turns.>") {
				return fmt.Errorf("the server did not refuse the console a subscription to the turns")
			}
			return nil
		})
	}
}
