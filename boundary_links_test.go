package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/docker"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandbox/native"
	"github.com/ioharness/harness/pkg/tools"
)

// The boundary against the agent itself, through links (issue 12, item
// 3): a relative symbolic link inside the workspace leads to a file the
// builtin secrets or a user rule denies, and the agent reads, writes,
// greps, finds and verifies through it. Each test runs the real roles of
// an embedded cluster with a scripted model, on every sandbox backend this
// machine has. The file tools run in the sandboxer whatever the backend,
// so the backend is named by the contract and the same verdicts must come
// back on each.

// linkSecrets are the bytes of the files the policy hides; none may reach
// the model, the trace or the workspace's other files.
var linkSecrets = []string{"S3CR3T-ENV-7f1c", "S3CR3T-CREDS-2b9e", "S3CR3T-ID-c40d", "S3CR3T-PIC-88aa"}

// linkWorkspace makes the workspace of the link attacks: secrets, and
// links to them from innocent names.
func linkWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	files := map[string]string{
		".env":              "API_KEY=" + linkSecrets[0] + "\n",
		"private/creds.txt": "password=" + linkSecrets[1] + "\n",
		"secrets/id":        linkSecrets[2] + "\n",
		"private/pic.png":   "\x89PNG\r\n\x1a\n" + linkSecrets[3] + strings.Repeat("\x00", 32),
		"calc_test.go":      "package calc\n\n// the tests a person guards\n",
		"docs/readme.md":    "the readme\n",
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"notes.txt":  ".env",
		"public.txt": "private/creds.txt",
		"src/keys":   "../secrets",
		"pic.png":    "private/pic.png",
		"dangle":     "secrets/planted",
		"alias.go":   "calc_test.go",
		"readme.lnk": "docs/readme.md",
	} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// linkContract is the contract of the link attacks: the builtin secrets,
// a user layer hiding private/ and secrets/ and asking before a test file
// (or, with more, other files) is written, exec and net denied.
func linkContract(t *testing.T, ws, backend string, verification map[string]any, more ...map[string]string) []byte {
	t.Helper()
	rules := []map[string]string{
		{"act": "read", "effect": "deny", "pattern": "private/*"},
		{"act": "write", "effect": "deny", "pattern": "private/*"},
		{"act": "read", "effect": "deny", "pattern": "secrets/*"},
		{"act": "write", "effect": "deny", "pattern": "secrets/*"},
		{"act": "write", "effect": "ask", "pattern": "*_test.go"},
	}
	b, err := json.Marshal(map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "Tidy the notes.",
		"workspace":    map[string]string{"root": ws},
		"verification": verification,
		"policy": map[string]any{
			"layers":   []map[string]any{{"name": "user", "rules": append(rules, more...)}},
			"defaults": map[string]string{"read": "allow", "write": "allow", "exec": "deny", "net": "deny"},
		},
		"budget":  map[string]any{"max_steps": 6},
		"sandbox": map[string]any{"backend": backend},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// linkBackend is a sandbox backend the link tests run on.
type linkBackend struct {
	name string
	// start returns the backends, or skips t when this machine has none
	// of this kind (fails instead under the variable CI sets).
	start func(t *testing.T) []sandbox.Backend
}

var linkBackends = []linkBackend{
	{"floor", func(t *testing.T) []sandbox.Backend { return []sandbox.Backend{floor.New()} }},
	{"native", func(t *testing.T) []sandbox.Backend {
		b, err := native.New(native.Config{})
		if err != nil {
			if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
				t.Fatalf("native.New: %v (HARNESS_REQUIRE_NATIVE=1)", err)
			}
			t.Skipf("no native sandbox here (HARNESS_REQUIRE_NATIVE=1 makes this a failure): %v", err)
		}
		return []sandbox.Backend{b}
	}},
	{"docker", func(t *testing.T) []sandbox.Backend {
		b, err := docker.New(docker.Config{})
		if err == nil {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			err = b.Ping(ctx)
			cancel()
		}
		if err != nil {
			if os.Getenv("HARNESS_REQUIRE_DOCKER") == "1" {
				t.Fatalf("HARNESS_REQUIRE_DOCKER=1 but no Docker engine answers: %v", err)
			}
			t.Skipf("no Docker engine answers (%v); set HARNESS_REQUIRE_DOCKER=1 to make this a failure", err)
		}
		return []sandbox.Backend{b}
	}},
}

// linkCluster starts an embedded cluster serving ws on the backend.
func linkCluster(t *testing.T, be linkBackend, ws string, p *provider.Scripted) *harness.Cluster {
	t.Helper()
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: p,
		Backends: be.start(t), AllowFloor: be.name == "floor", Tools: tools.BuiltinsWithImages()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// linkCall is a call of tool with args.
func linkCall(id, tool string, args map[string]string) protocol.ToolCall {
	b, _ := json.Marshal(args)
	return protocol.ToolCall{ID: id, Name: tool, Arguments: b}
}

// leakWatch is a scripted model that also checks every request it is sent
// for the secrets' bytes: what reaches it is what the model would read.
type leakWatch struct {
	mu    sync.Mutex
	leaks []string
}

// scan notes every secret req carries.
func (l *leakWatch) scan(req *protocol.CompletionRequest, call int) {
	b, _ := json.Marshal(req)
	for _, s := range linkSecrets {
		if strings.Contains(string(b), s) {
			l.mu.Lock()
			l.leaks = append(l.leaks, fmt.Sprintf("request %d carries %s", call, s))
			l.mu.Unlock()
		}
	}
}

// agent answers with turns in order, then "Done.".
func (l *leakWatch) agent(turns ...[]protocol.ToolCall) *provider.Scripted {
	return provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		l.scan(req, call)
		if call <= len(turns) {
			return &protocol.Turn{ToolCalls: turns[call-1]}, nil
		}
		return &protocol.Turn{Text: "Done."}, nil
	})
}

func (l *leakWatch) check(t *testing.T, recs []protocol.Record) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, leak := range l.leaks {
		t.Error(leak)
	}
	b, _ := json.Marshal(recs)
	for _, s := range linkSecrets {
		if strings.Contains(string(b), s) {
			t.Errorf("the trace carries %s", s)
		}
	}
}

// linkObservation returns the observation of call in a run's trace.
func linkObservation(t *testing.T, recs []protocol.Record, call string) protocol.Observation {
	t.Helper()
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.CallID == call {
				return o
			}
		}
	}
	t.Fatalf("no observation of call %s in the trace", call)
	return protocol.Observation{}
}

// unchanged checks that the files the policy guards hold what they held.
func unchanged(t *testing.T, ws string) {
	t.Helper()
	for name, want := range map[string]string{".env": linkSecrets[0], "private/creds.txt": linkSecrets[1], "secrets/id": linkSecrets[2], "calc_test.go": "the tests a person guards"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s = %q, %v after the run; it must not change", name, b, err)
		}
	}
	for _, dir := range []string{"secrets", "private"} {
		entries, _ := os.ReadDir(filepath.Join(ws, dir))
		if len(entries) > 2 {
			t.Errorf("%s/ holds %d entries after the run; nothing may be written there", dir, len(entries))
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "secrets", "planted")); err == nil {
		t.Error("secrets/planted was created through a dangling link")
	}
}

// TestLinksAreJudgedByTheirTargets reads, writes, edits, views, greps and
// finds through links to denied files, and checks a file_contains
// verification through one: every call is refused by the target's rule,
// or leaves the target out, and the verification never answers for it.
func TestLinksAreJudgedByTheirTargets(t *testing.T) {
	for _, be := range linkBackends {
		t.Run(be.name, func(t *testing.T) {
			ws := linkWorkspace(t)
			var watch leakWatch
			agent := watch.agent(
				[]protocol.ToolCall{
					linkCall("r-notes", "read_file", map[string]string{"path": "notes.txt"}),
					linkCall("r-public", "read_file", map[string]string{"path": "public.txt"}),
					linkCall("r-keys", "read_file", map[string]string{"path": "src/keys/id"}),
					linkCall("r-readme", "read_file", map[string]string{"path": "readme.lnk"}),
					linkCall("v-pic", "view_image", map[string]string{"path": "pic.png"}),
				},
				[]protocol.ToolCall{
					linkCall("w-notes", "write_file", map[string]string{"path": "notes.txt", "content": "API_KEY=mine\n"}),
					linkCall("w-keys", "write_file", map[string]string{"path": "src/keys/planted", "content": "x\n"}),
					linkCall("w-dangle", "write_file", map[string]string{"path": "dangle", "content": "x\n"}),
					linkCall("e-public", "edit_file", map[string]string{"path": "public.txt", "search": "password=", "replace": "pw="}),
				},
				[]protocol.ToolCall{
					linkCall("g-all", "grep", map[string]string{"pattern": "S3CR3T"}),
					linkCall("g-keys", "grep", map[string]string{"pattern": "S3CR3T", "path_glob": "src/keys/*"}),
					linkCall("f-all", "find", map[string]string{"name_glob": "*"}),
					linkCall("f-keys", "find", map[string]string{"name_glob": "src/keys/*"}),
				},
			)
			cl := linkCluster(t, be, ws, agent)
			// The check asks whether .env holds its key, through a name the
			// policy lets be read: an oracle on the secret if it answered.
			raw := linkContract(t, ws, be.name, map[string]any{"file_contains": map[string]string{"path": "notes.txt", "needle": "API_KEY=" + linkSecrets[0][:6]}})
			res, err := clustertest.RunJSON(t.Context(), cl, raw, "links-"+be.name)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome == protocol.OutcomeSuccess {
				t.Errorf("run = %s: the verification passed on a file the policy hides", res.Outcome)
			}
			recs, err := cl.Run("links-" + be.name).Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			watch.check(t, recs)
			for _, r := range []struct{ call, act, target, rule, layer string }{
				{"r-notes", "read", ".env", ".env", "builtin-secrets"},
				{"r-public", "read", "private/creds.txt", "private/*", "user"},
				{"r-keys", "read", "secrets/id", "secrets/*", "user"},
				{"v-pic", "read", "private/pic.png", "private/*", "user"},
				{"w-notes", "write", ".env", ".env", "builtin-secrets"},
				{"w-keys", "write", "secrets/planted", "secrets/*", "user"},
				{"w-dangle", "write", "secrets/planted", "secrets/*", "user"},
				{"e-public", "write", "private/creds.txt", "private/*", "user"},
			} {
				o := linkObservation(t, recs, r.call)
				want := &protocol.Refusal{Act: r.act, Target: r.target, Effect: "deny", Rule: r.rule, Layer: r.layer}
				if !o.IsError || o.Refused == nil || *o.Refused != *want {
					t.Errorf("%s = %q (refused %+v), want refused %+v", r.call, o.Content, o.Refused, want)
				}
				if !strings.Contains(o.Content, fmt.Sprintf("%q", r.target)) || !strings.Contains(o.Content, "through a symbolic link") {
					t.Errorf("%s said %q; want it to name the target %s and the link", r.call, o.Content, r.target)
				}
			}
			if o := linkObservation(t, recs, "r-readme"); o.IsError || !strings.Contains(o.Content, "the readme") {
				t.Errorf("reading readme.lnk, a link to a file the policy allows = %q, want the readme", o.Content)
			}
			for _, call := range []string{"f-all", "f-keys"} {
				o := linkObservation(t, recs, call)
				for _, hidden := range []string{"notes.txt", "public.txt", "pic.png", "dangle", "src/keys/id", ".env", "creds"} {
					if strings.Contains(o.Content, hidden) {
						t.Errorf("%s = %q, names %s, which leads to a hidden file", call, o.Content, hidden)
					}
				}
				if o.IsError {
					t.Errorf("%s = %q, want a listing", call, o.Content)
				}
			}
			var check *protocol.CheckResult
			for _, r := range recs {
				if r.Check != nil {
					check = r.Check
				}
			}
			if check == nil || check.Passed || !strings.Contains(check.Detail, ".env") || !strings.Contains(check.Detail, "explicit allow") {
				t.Errorf("the verification = %+v, want it refused naming .env, the link's target", check)
			}
			unchanged(t, ws)
		})
	}
}

// TestApprovalCoversOnlyTheNamedPath asks a person about a write of
// alias.go, which they approve (or they rewrite a write of draft.go into
// one of alias.go, and approve that); alias.go is a link to calc_test.go,
// which the policy asks about too. The write is refused where it would
// land, telling the model to name the real path, so what a person
// approves is what changes.
func TestApprovalCoversOnlyTheNamedPath(t *testing.T) {
	alias := map[string]string{"path": "alias.go", "content": "package calc\n\n// rewritten\n"}
	rewrite, _ := json.Marshal(alias)
	tests := []struct {
		name     string
		first    protocol.ToolCall
		decision protocol.Decision
		shown    string
	}{
		{"approve", linkCall("w", "write_file", alias), protocol.Decision{Approve: true}, "alias.go"},
		{"rewrite", linkCall("w", "write_file", map[string]string{"path": "draft.go", "content": "package calc\n"}), protocol.Decision{Approve: true, Rewrite: rewrite}, "draft.go"},
	}
	for _, be := range linkBackends {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				ws := linkWorkspace(t)
				var watch leakWatch
				cl := linkCluster(t, be, ws, watch.agent([]protocol.ToolCall{tt.first}))
				run := "approve-" + be.name + "-" + tt.name
				raw := linkContract(t, ws, be.name, map[string]any{"none": map[string]any{}},
					map[string]string{"act": "write", "effect": "ask", "pattern": "alias.go"}, map[string]string{"act": "write", "effect": "ask", "pattern": "draft.go"})
				if _, err := clustertest.SubmitJSON(t.Context(), cl, raw, run); err != nil {
					t.Fatal(err)
				}
				clustertest.WaitPaused(t, cl.Client, run)
				aps, err := cl.Approvals(t.Context())
				if err != nil || len(aps) != 1 || aps[0].Pending == nil || aps[0].Pending.Target != tt.shown {
					t.Fatalf("approvals = %+v, %v; want one, for %s", aps, err, tt.shown)
				}
				d := tt.decision
				if _, err := cl.Decide(t.Context(), aps[0].ID, &d); err != nil {
					t.Fatal(err)
				}
				st := clustertest.WaitSettled(t, cl.Client, run)
				if st.Outcome != protocol.OutcomeFinished {
					t.Errorf("run = %s (%s), want finished", st.Outcome, st.Reason)
				}
				recs, err := cl.Run(run).Trace(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				watch.check(t, recs)
				var approved []protocol.Observation
				for _, r := range recs {
					if r.Kind == protocol.RecordDecision {
						approved = append(approved, r.Observations...)
					}
				}
				i := slices.IndexFunc(approved, func(o protocol.Observation) bool { return o.Tool == "write_file" })
				if i < 0 {
					t.Fatalf("the decision record holds %+v, want the approved write's observation", approved)
				}
				o := approved[i]
				want := &protocol.Refusal{Act: "write", Target: "calc_test.go", Effect: "ask", Rule: "*_test.go", Layer: "user"}
				if !o.IsError || o.Refused == nil || *o.Refused != *want || !strings.Contains(o.Content, `Name the real path "calc_test.go"`) {
					t.Errorf("the approved write of alias.go = %q (refused %+v), want refused %+v telling the model to name calc_test.go", o.Content, o.Refused, want)
				}
				unchanged(t, ws)
			})
		}
	}
}

// TestSpawnVerifyFileThroughALink has the agent spawn a sub-agent whose
// verify_file is notes.txt, a name the policy lets be read, linked to
// .env: the sub-agent's check is refused by the target's rule, so it can
// never answer whether the secret holds a text.
func TestSpawnVerifyFileThroughALink(t *testing.T) {
	for _, be := range linkBackends {
		t.Run(be.name, func(t *testing.T) {
			ws := linkWorkspace(t)
			var watch leakWatch
			spawn, _ := json.Marshal(map[string]any{"goal": "check the key", "verify_file": "notes.txt", "verify_contains": "API_KEY=S3CR3T", "max_steps": 1})
			agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
				watch.scan(req, call)
				if len(req.Messages) == 1 && strings.Contains(req.Messages[0].Content, "Tidy the notes.") {
					return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "spawn", Name: "spawn_agent", Arguments: spawn}}}, nil
				}
				return &protocol.Turn{Text: "Done."}, nil
			})
			cl := linkCluster(t, be, ws, agent)
			var c map[string]any
			if err := json.Unmarshal(linkContract(t, ws, be.name, map[string]any{"none": map[string]any{}}), &c); err != nil {
				t.Fatal(err)
			}
			c["budget"] = map[string]any{"max_steps": 3, "tree": map[string]any{"max_agents": 2, "max_steps": 20}}
			raw, _ := json.Marshal(c)
			run := "spawn-" + be.name
			res, err := clustertest.RunJSON(t.Context(), cl, raw, run)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFinished {
				t.Errorf("run = %s (%s), want finished", res.Outcome, res.Reason)
			}
			recs, err := cl.Run(run).Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			watch.check(t, recs)
			if o := linkObservation(t, recs, "spawn"); !o.IsError || strings.Contains(o.Content, "-> success") {
				t.Errorf("the spawn = %q, want the sub-agent not to succeed", o.Content)
			}
			child := protocol.RunIDFor(run + "-s1c0")
			crecs, err := cl.Run(child).Trace(t.Context())
			if err != nil {
				t.Fatalf("the sub-agent's trace: %v", err)
			}
			watch.check(t, crecs)
			checks := 0
			for _, r := range crecs {
				if r.Check == nil {
					continue
				}
				checks++
				if r.Check.Passed || !strings.Contains(r.Check.Detail, ".env") {
					t.Errorf("the sub-agent's check = %+v, want it refused naming .env", r.Check)
				}
			}
			if checks == 0 {
				t.Error("the sub-agent's trace holds no check")
			}
			unchanged(t, ws)
		})
	}
}
