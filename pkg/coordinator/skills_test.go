package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/snapshot"
)

// writeFiles writes files (path relative to dir: content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func call(id, name, args string) protocol.ToolCall {
	return protocol.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// TestSkills runs a contract naming a skills directory on the embedded
// default: the catalogue (both forms, NAME.md and DIR/SKILL.md) reaches
// the model's system prompt and read_skill is offered; one skill is read
// and its body reaches the model; one whose file the policy denies is
// refused with the rule, and nothing of it reaches the model; an unknown
// name fails, listing the names. The trace rebuilds the same request.
func TestSkills(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{
		"skills/deploy.md":        "---\nname: deploy\ndescription: How to deploy the service to staging.\n---\nRun make deploy-staging, then check /healthz.\n",
		"skills/secret.md":        "---\nname: secret\ndescription: The on-call runbook.\n---\nThe pager password is hunter2.\n",
		"skills/review/SKILL.md":  "---\nname: code-review\ndescription: What to look for in a change.\n---\nLook for missing tests.\n",
		"skills/review/notes.txt": "not a skill",
	})
	var mu sync.Mutex
	var reqs []*protocol.CompletionRequest
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		switch n {
		case 1:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("a", "read_skill", `{"name":"deploy"}`)}}, nil
		case 2:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("b", "read_skill", `{"name":"secret"}`), call("c", "read_skill", `{"name":"nosuch"}`)}}, nil
		}
		return &protocol.Turn{Text: "done"}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	c := contract(ws)
	c.Skills = &protocol.SkillsSpec{Dir: "skills"}
	c.Policy.Layers = []protocol.Layer{{Name: "private", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "skills/secret.md"}}}}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("skills"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 3 {
		t.Fatalf("outcome = %s after %d steps (%s), want finished after 3", res.Outcome, res.Steps, res.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	first := reqs[0]
	for _, want := range []string{"- code-review: What to look for in a change.", "- deploy: How to deploy the service to staging.", "- secret: The on-call runbook.", "read_skill"} {
		if !strings.Contains(first.System, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, first.System)
		}
	}
	offered := false
	for _, tl := range first.Tools {
		offered = offered || tl.Name == "read_skill"
	}
	if !offered {
		t.Errorf("read_skill is not among the tools offered: %v", first.Tools)
	}
	for _, r := range reqs {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "hunter2") || strings.Contains(r.System, "hunter2") {
				t.Errorf("the denied skill's body reached the model: %q", m.Content)
			}
		}
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Role != protocol.RoleTool || !strings.Contains(last.Content, "make deploy-staging") {
		t.Errorf("the model got %+v after read_skill deploy, want the skill's body", last)
	}

	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var steps []protocol.Record
	for _, r := range recs {
		if r.Kind == protocol.RecordStep {
			steps = append(steps, r)
		}
	}
	if len(steps[0].Skills) != 3 || steps[0].Skills[1].Path != "skills/deploy.md" {
		t.Errorf("step 1 recorded the catalogue %+v, want the three skills", steps[0].Skills)
	}
	if o := steps[0].Observations[0]; o.Tool != "read_skill" || o.State() != protocol.CallOK {
		t.Errorf("read_skill deploy = %+v, want an ok read_skill", o)
	}
	denied := steps[1].Observations[0]
	if denied.State() != protocol.CallRefused || denied.Refused == nil || denied.Refused.Rule != "skills/secret.md" ||
		denied.Refused.Target != "skills/secret.md" || denied.Refused.Layer != "private" || strings.Contains(denied.Content, "hunter2") {
		t.Errorf("read_skill secret = %+v, want refused by the rule skills/secret.md of layer private", denied)
	}
	unknown := steps[1].Observations[1]
	if unknown.State() != protocol.CallFailed || !strings.Contains(unknown.Content, "code-review, deploy, secret") {
		t.Errorf("read_skill nosuch = %+v, want a failure listing the skills", unknown)
	}
	// The assembly is a pure function of the trace: the same system
	// prompt comes back for step 1.
	req, _, err := h.Request(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if req.System != first.System {
		t.Errorf("the trace rebuilds step 1's system prompt as\n%s\nwant\n%s", req.System, first.System)
	}
}

// TestSkillsMalformed checks that a skill with malformed front matter
// refuses the run before its first step, with an error naming the file
// and the contract's field, and no provider call made.
func TestSkillsMalformed(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no front matter", map[string]string{"skills/ok.md": "---\nname: ok\ndescription: Fine.\n---\n", "skills/broken.md": "# Broken\n\nno front matter\n"},
			"the skill skills/broken.md: it has no front matter"},
		{"a name that is no token", map[string]string{"skills/x.md": "---\nname: two words\ndescription: d\n---\n"},
			"the skill skills/x.md: line 2 of its front matter: the name is not a simple token"},
		{"two of one name", map[string]string{"skills/a.md": "---\nname: same\ndescription: d\n---\n", "skills/b/SKILL.md": "---\nname: same\ndescription: d\n---\n"},
			`the skills skills/a.md and skills/b/SKILL.md are both named "same"`},
		{"no directory", map[string]string{"other.md": "x"}, "the skills directory skills does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, tt.files)
			agent := provider.NewScripted(&protocol.Turn{Text: "done"})
			cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
			c := contract(ws)
			c.Skills = &protocol.SkillsSpec{Dir: "skills"}
			h, err := cl.Submit(t.Context(), c, harness.WithRunID("bad-skills"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFailed || res.Steps != 0 || !strings.Contains(res.Reason, tt.want) || !strings.Contains(res.Reason, "invalid_field skills.dir") {
				t.Errorf("outcome = %s after %d steps (%s), want failed before step 1 saying invalid_field skills.dir and %q", res.Outcome, res.Steps, res.Reason, tt.want)
			}
			if n := agent.Calls(); n != 0 {
				t.Errorf("the provider was called %d times, want none", n)
			}
		})
	}
}

// TestSingleFile runs a single-file contract, written as JSON, on the
// embedded default: the agent reads and writes its file, and passes
// file_equals; a sibling is refused to read and to write (whatever the
// contract's policy allows), the same name below the root too, a command
// the policy does not allow is refused, and find and grep show nothing
// but the file.
func TestSingleFile(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"notes.txt": "b\na\n", "secret.txt": "password: hunter2\n"})
	var mu sync.Mutex
	var task string
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		mu.Lock()
		task = req.Messages[0].Content
		mu.Unlock()
		if n == 1 {
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{
				call("read", "read_file", `{"path":"notes.txt"}`),
				call("sibling", "read_file", `{"path":"secret.txt"}`),
				call("find", "find", `{"name_glob":"*"}`),
				call("grep", "grep", `{"pattern":"password|a"}`),
				call("other", "write_file", `{"path":"other.txt","content":"x"}`),
				call("below", "write_file", `{"path":"sub/notes.txt","content":"x"}`),
				call("cat", "exec", `{"argv":["cat","secret.txt"]}`),
			}}, nil
		}
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("write", "write_file", `{"path":"notes.txt","content":"a\nb\n"}`)}}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	raw, err := json.Marshal(map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "Sort the lines of the file.",
		"workspace":    map[string]string{"file": filepath.Join(ws, "notes.txt")},
		"verification": map[string]any{"file_equals": map[string]string{"content": "a\nb\n"}},
		"budget":       map[string]int{"max_steps": 4},
		// A contract that allows everything on the files still gets one.
		"policy": map[string]any{"layers": []any{map[string]any{"name": "wide", "rules": []any{
			map[string]string{"act": "read", "effect": "allow", "pattern": "*"}, map[string]string{"act": "write", "effect": "allow", "pattern": "*"}}}},
			"defaults": map[string]string{"read": "allow", "write": "allow"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := clustertest.RunJSON(t.Context(), cl, raw, "one-file")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 2 {
		t.Fatalf("outcome = %s after %d steps (%s), want success after 2", res.Outcome, res.Steps, res.Reason)
	}
	mu.Lock()
	if !strings.Contains(task, "the one file notes.txt") || !strings.Contains(task, `holds exactly the text "a\nb\n"`) {
		t.Errorf("the task message does not say the workspace is one file checked for its exact text:\n%s", task)
	}
	mu.Unlock()
	recs, err := cl.Run("one-file").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var obs []protocol.Observation
	for _, r := range recs {
		if r.Kind == protocol.RecordStep && r.Step == 1 {
			obs = r.Observations
		}
	}
	if len(obs) != 7 {
		t.Fatalf("step 1 has %d observations, want 7", len(obs))
	}
	for i, want := range []protocol.CallStatus{protocol.CallOK, protocol.CallRefused, protocol.CallOK, protocol.CallOK, protocol.CallRefused, protocol.CallRefused, protocol.CallRefused} {
		if got := obs[i].State(); got != want {
			t.Errorf("%s = %s (%s), want %s", obs[i].CallID, got, obs[i].Content, want)
		}
	}
	if !strings.Contains(obs[0].Content, "b\na") {
		t.Errorf("read_file notes.txt = %q, want the file", obs[0].Content)
	}
	if obs[2].Content != "notes.txt" {
		t.Errorf("find * = %q, want notes.txt alone", obs[2].Content)
	}
	if strings.Contains(obs[3].Content, "secret") || strings.Contains(obs[3].Content, "hunter2") || !strings.Contains(obs[3].Content, "notes.txt:2: a") {
		t.Errorf("grep = %q, want hits in notes.txt alone", obs[3].Content)
	}
	for _, o := range obs {
		if strings.Contains(o.Content, "hunter2") {
			t.Errorf("%s leaked the sibling: %q", o.CallID, o.Content)
		}
	}
	if r := obs[5].Refused; r == nil || r.Layer != "builtin-file" {
		t.Errorf("write sub/notes.txt refused by %+v, want the builtin-file layer", r)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(got) != "a\nb\n" {
		t.Errorf("notes.txt = %q, want the sorted lines", got)
	}
	for _, p := range []string{"other.txt", "sub"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "secret.txt")); string(got) != "password: hunter2\n" {
		t.Errorf("secret.txt = %q, want it untouched", got)
	}

	// A malformed single-file contract is refused with a typed error.
	bad := contract(ws)
	bad.Workspace = protocol.Workspace{File: filepath.Join(ws, "*.txt")}
	bad.Verification = protocol.Verification{FileEquals: &protocol.EqualsCheck{Content: "x"}}
	if _, err := cl.Submit(t.Context(), bad); !errors.Is(err, protocol.ErrInvalidField) || protocol.AsError(err).Field != "workspace.file" {
		t.Errorf("Submit(file %s) = %v, want invalid_field workspace.file", bad.Workspace.File, err)
	}
}

// TestSkillAsked checks that a skill whose path the policy asks about is
// put to the approver as the read of that path, and read once approved.
func TestSkillAsked(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"skills/deploy.md": "---\nname: deploy\ndescription: Deploy it.\n---\nRun make deploy.\n"})
	var mu sync.Mutex
	var asked []*protocol.Pending
	approver := coordinator.ApproverFunc(func(_ context.Context, p *protocol.Pending) (*protocol.Decision, error) {
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		return &protocol.Decision{Approve: true, By: "test"}, nil
	})
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{call("a", "read_skill", `{"name":"deploy"}`)}}, &protocol.Turn{Text: "done"})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, Approver: approver})
	c := contract(ws)
	c.Skills = &protocol.SkillsSpec{Dir: "skills"}
	c.Policy.Layers = []protocol.Layer{{Name: "careful", Rules: []protocol.Rule{{Act: "read", Effect: "ask", Pattern: "skills/*"}}}}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("skill-asked"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil || res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("Wait = %+v, %v; want finished", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Act != "read" || asked[0].Target != "skills/deploy.md" || asked[0].Rule != "skills/*" {
		t.Fatalf("asked %+v, want one read of skills/deploy.md under the rule skills/*", asked)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Kind == protocol.RecordStep && r.Step == 1 {
			if o := r.Observations[0]; o.State() != protocol.CallOK || !strings.Contains(o.Content, "make deploy") {
				t.Errorf("the approved read_skill = %+v, want the skill's body", o)
			}
		}
	}
}

// TestSkillsSnapshot runs a contract whose skills come as a snapshot of
// their own, uploaded with the Go client, on the embedded default: the
// catalogue reaches the system prompt; a skill is read, from the
// sandboxer's copy (read_file of its path finds nothing in the
// workspace); one whose path (skills/ and its path in the snapshot) the
// policy denies is refused with the rule; one it asks about is put to
// the approver as the read of that path, and read once approved; an
// unknown name fails. The copy is gone once the run has ended.
func TestSkillsSnapshot(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"main.go": "package main\n"})
	sk := t.TempDir()
	writeFiles(t, sk, map[string]string{
		"deploy.md":         "---\nname: deploy\ndescription: How to deploy the service to staging.\n---\nRun make deploy-staging, then check /healthz.\n",
		"secret.md":         "---\nname: secret\ndescription: The on-call runbook.\n---\nThe pager password is hunter2.\n",
		"careful/SKILL.md":  "---\nname: careful\ndescription: Read with a person's leave.\n---\nTake a backup first.\n",
		"careful/notes.txt": "not a skill",
	})
	var mu sync.Mutex
	var reqs []*protocol.CompletionRequest
	var asked []*protocol.Pending
	data := t.TempDir()
	copyDir := filepath.Join(data, "snapshots", "skills-snap.skills")
	var unpacked error // whether the sandboxer's copy was there for the first step
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		mu.Lock()
		reqs = append(reqs, req)
		if n == 1 {
			_, unpacked = os.Stat(filepath.Join(copyDir, "skills", "deploy.md"))
		}
		mu.Unlock()
		switch n {
		case 1:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("a", "read_skill", `{"name":"deploy"}`), call("w", "read_file", `{"path":"skills/deploy.md"}`)}}, nil
		case 2:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("b", "read_skill", `{"name":"secret"}`), call("c", "read_skill", `{"name":"careful"}`),
				call("d", "read_skill", `{"name":"nosuch"}`)}}, nil
		}
		return &protocol.Turn{Text: "done"}, nil
	})
	approver := coordinator.ApproverFunc(func(_ context.Context, p *protocol.Pending) (*protocol.Decision, error) {
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		return &protocol.Decision{Approve: true, By: "test"}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, DataDir: data, Provider: agent, NoTakeover: true, Approver: approver})
	ref, err := cl.UploadWorkspace(t.Context(), sk, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := contract(ws)
	c.Skills = &protocol.SkillsSpec{Snapshot: ref}
	c.Policy.Layers = []protocol.Layer{{Name: "private", Rules: []protocol.Rule{
		{Act: "read", Effect: "deny", Pattern: "skills/secret.md"}, {Act: "read", Effect: "ask", Pattern: "skills/careful/*"}}}}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("skills-snap"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 3 {
		t.Fatalf("outcome = %s after %d steps (%s), want finished after 3", res.Outcome, res.Steps, res.Reason)
	}
	// The sandboxer's copy goes when the run's workspace closes.
	mu.Lock()
	if unpacked != nil {
		t.Errorf("the sandboxer's copy of the skills was not in %s during the run: %v", copyDir, unpacked)
	}
	mu.Unlock()
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if _, err := os.Stat(copyDir); !os.IsNotExist(err) {
			return fmt.Errorf("the skills snapshot is still at %s (%v)", copyDir, err)
		}
		return nil
	})

	mu.Lock()
	defer mu.Unlock()
	first := reqs[0]
	for _, want := range []string{"- careful: Read with a person's leave.", "- deploy: How to deploy the service to staging.", "- secret: The on-call runbook.", "read_skill"} {
		if !strings.Contains(first.System, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, first.System)
		}
	}
	for _, r := range reqs {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "hunter2") {
				t.Errorf("the denied skill's body reached the model: %q", m.Content)
			}
		}
	}
	if len(asked) != 1 || asked[0].Act != "read" || asked[0].Target != "skills/careful/SKILL.md" || asked[0].Rule != "skills/careful/*" || asked[0].Tool != "read_skill" {
		t.Errorf("asked %+v, want one read_skill, the read of skills/careful/SKILL.md under the rule skills/careful/*", asked)
	}

	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var steps []protocol.Record
	for _, r := range recs {
		if r.Kind == protocol.RecordStep {
			steps = append(steps, r)
		}
	}
	if len(steps[0].Skills) != 3 || steps[0].Skills[0].Path != "skills/careful/SKILL.md" || steps[0].Skills[1].Path != "skills/deploy.md" {
		t.Errorf("step 1 recorded the catalogue %+v, want the three skills under skills/", steps[0].Skills)
	}
	if o := steps[0].Observations[0]; o.Tool != "read_skill" || o.State() != protocol.CallOK || !strings.Contains(o.Content, "make deploy-staging") {
		t.Errorf("read_skill deploy = %+v, want its body", o)
	}
	if o := steps[0].Observations[1]; strings.Contains(o.Content, "make deploy-staging") || !strings.Contains(o.Content, "does not exist") {
		t.Errorf("read_file skills/deploy.md = %+v, want nothing: the skills are not in the workspace", o)
	}
	denied := steps[1].Observations[0]
	if denied.State() != protocol.CallRefused || denied.Refused == nil || denied.Refused.Rule != "skills/secret.md" ||
		denied.Refused.Target != "skills/secret.md" || denied.Refused.Layer != "private" || strings.Contains(denied.Content, "hunter2") {
		t.Errorf("read_skill secret = %+v, want refused by the rule skills/secret.md of layer private", denied)
	}
	if o := steps[1].Observations[1]; o.Tool != "read_skill" || o.State() != protocol.CallOK || !strings.Contains(o.Content, "Take a backup first.") {
		t.Errorf("the approved read_skill careful = %+v, want its body", o)
	}
	if o := steps[1].Observations[2]; o.State() != protocol.CallFailed || !strings.Contains(o.Content, "careful, deploy, secret") {
		t.Errorf("read_skill nosuch = %+v, want a failure listing the skills", o)
	}
}

// TestSkillsSnapshotRefused checks that a skills snapshot whose front
// matter is malformed refuses the run before its first step, naming the
// file and the field skills.snapshot, and that a ref the object store
// does not hold does too, with not_found; neither calls the provider nor
// leaves the sandboxer's copy behind. A contract naming both a directory
// and a snapshot is refused on submission.
func TestSkillsSnapshotRefused(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"main.go": "package main\n"})
	bad := t.TempDir()
	writeFiles(t, bad, map[string]string{"ok.md": "---\nname: ok\ndescription: Fine.\n---\n", "broken/SKILL.md": "---\nname: broken\n---\n"})
	agent := provider.NewScripted(&protocol.Turn{Text: "done"})
	data := t.TempDir()
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, DataDir: data, Provider: agent, NoTakeover: true})
	ref, err := cl.UploadWorkspace(t.Context(), bad, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, ref, want string }{
		{"malformed", ref, `invalid_field skills.snapshot: the skill skills/broken/SKILL.md: its front matter has no "description:" line`},
		{"unknown", "sha256-" + strings.Repeat("0", 64), "not_found skills.snapshot: no snapshot sha256-" + strings.Repeat("0", 64)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := contract(ws)
			c.Skills = &protocol.SkillsSpec{Snapshot: tt.ref}
			h, err := cl.Submit(t.Context(), c, harness.WithRunID("bad-"+tt.name))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFailed || res.Steps != 0 || !strings.Contains(res.Reason, tt.want) {
				t.Errorf("outcome = %s after %d steps (%s), want failed before step 1 saying %q", res.Outcome, res.Steps, res.Reason, tt.want)
			}
			if _, err := os.Stat(filepath.Join(data, "snapshots", "bad-"+tt.name+".skills")); !os.IsNotExist(err) {
				t.Errorf("the refused skills snapshot is left behind: %v", err)
			}
		})
	}
	if n := agent.Calls(); n != 0 {
		t.Errorf("the provider was called %d times, want none", n)
	}
	c := contract(ws)
	c.Skills = &protocol.SkillsSpec{Dir: "skills", Snapshot: ref}
	if _, err := cl.Submit(t.Context(), c); !errors.Is(err, protocol.ErrInvalidField) || protocol.AsError(err).Field != "skills" {
		t.Errorf("Submit(skills dir and snapshot) = %v, want invalid_field skills", err)
	}
}

// TestSkillsSnapshotApprovedLater pauses a run at the read of a skill of
// its skills snapshot that the policy asks about, and has a person
// approve it: the pending action is read_skill of the skill's path, and
// the read carried out on the decision gives the skill's body.
func TestSkillsSnapshotApprovedLater(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"main.go": "package main\n"})
	sk := t.TempDir()
	writeFiles(t, sk, map[string]string{"deploy.md": "---\nname: deploy\ndescription: Deploy it.\n---\nRun make deploy.\n"})
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{call("a", "read_skill", `{"name":"deploy"}`)}}, &protocol.Turn{Text: "done"})
	// Taking runs over: a decided run is taken up again by a coordinator.
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent})
	ref, err := cl.UploadWorkspace(t.Context(), sk, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := contract(ws)
	c.Skills = &protocol.SkillsSpec{Snapshot: ref}
	c.Policy.Layers = []protocol.Layer{{Name: "careful", Rules: []protocol.Rule{{Act: "read", Effect: "ask", Pattern: "skills/*"}}}}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("skill-later"))
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitPaused(t, cl.Client, "skill-later")
	id := protocol.ApprovalID("skill-later", 1, 0)
	ap, err := cl.Decide(t.Context(), id, &protocol.Decision{Approve: true, By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if p := ap.Pending; p == nil || p.Tool != "read_skill" || p.Target != "skills/deploy.md" || p.Act != "read" {
		t.Errorf("pending %+v, want read_skill, the read of skills/deploy.md", ap.Pending)
	}
	if st := clustertest.WaitSettled(t, cl.Client, "skill-later"); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("run = %s (%s), want finished", st.Outcome, st.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	read := false
	for _, r := range recs {
		if r.Kind == protocol.RecordDecision {
			read = len(r.Observations) == 1 && r.Observations[0].State() == protocol.CallOK && strings.Contains(r.Observations[0].Content, "Run make deploy.")
		}
	}
	if !read {
		t.Errorf("the approved read_skill did not read the skill: %+v", recs)
	}
}

// TestSkillsSnapshotOfSnapshotWorkspace carries both the workspace and
// the skills as snapshots: the skill is read, and the run's changes (its
// patch) hold nothing of the skills, which were never in the workspace.
func TestSkillsSnapshotOfSnapshotWorkspace(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"main.go": "package main\n"})
	sk := t.TempDir()
	writeFiles(t, sk, map[string]string{"deploy.md": "---\nname: deploy\ndescription: Deploy it.\n---\nRun make deploy.\n"})
	agent := provider.NewScripted(
		&protocol.Turn{ToolCalls: []protocol.ToolCall{call("a", "read_skill", `{"name":"deploy"}`), call("w", "write_file", `{"path":"NOTES.md","content":"deployed\n"}`)}},
		&protocol.Turn{Text: "done"})
	cl := clustertest.Start(t, harness.Config{Provider: agent, NoTakeover: true})
	wsRef, err := cl.UploadWorkspace(t.Context(), src, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	skRef, err := cl.UploadWorkspace(t.Context(), sk, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := contract("")
	c.Workspace = protocol.Workspace{Snapshot: wsRef}
	c.Skills = &protocol.SkillsSpec{Snapshot: skRef}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("both-snap"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil || res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("Wait = %+v, %v; want finished", res, err)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Kind == protocol.RecordStep && r.Step == 1 {
			if o := r.Observations[0]; o.State() != protocol.CallOK || !strings.Contains(o.Content, "Run make deploy.") {
				t.Errorf("read_skill deploy = %+v, want its body", o)
			}
		}
	}
	if res.Patch == nil || len(res.Patch.Files) != 1 || res.Patch.Files[0].Path != "NOTES.md" {
		t.Errorf("patch = %+v, want NOTES.md alone", res.Patch)
	}
}
