package sandboxer_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// TestSkillsOnOpen checks the catalogue a snapshot workspace's open
// answers with, and that a malformed skill refuses the open naming the
// file, leaving nothing of the run behind; and that a skill that is a
// symbolic link (here, to a file outside the workspace) refuses a root's
// open without its content read.
func TestSkillsOnOpen(t *testing.T) {
	c := startJS(t)
	snapDir := t.TempDir()
	root := t.TempDir()
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true, SnapshotDir: snapDir, Roots: []string{root}})
	skill := "---\nname: deploy\ndescription: How to deploy.\n---\nbody\n"

	good := t.TempDir()
	writeFile(t, filepath.Join(good, "skills", "deploy.md"), skill)
	r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: c.put(good),
		Skills: &protocol.SkillsSpec{Dir: "skills"}}, 20*time.Second)
	if err != nil || r.Error != nil || len(r.Skills) != 1 || r.Skills[0] != (protocol.Skill{Name: "deploy", Description: "How to deploy.", Path: "skills/deploy.md"}) {
		t.Fatalf("open snapshot with skills = %+v, %v; want the catalogue of deploy", r, err)
	}

	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, "skills", "deploy.md"), skill)
	writeFile(t, filepath.Join(bad, "skills", "broken.md"), "---\nname: broken\n---\n")
	r, err = do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r2.open", Run: "r2", Kind: protocol.OpOpen, Snapshot: c.put(bad),
		Skills: &protocol.SkillsSpec{Dir: "skills"}}, 20*time.Second)
	if err != nil || r.Error == nil || !errors.Is(r.Error, protocol.ErrInvalidField) || r.Error.Field != "skills.dir" ||
		!strings.Contains(r.Error.Message, `the skill skills/broken.md: its front matter has no "description:" line`) {
		t.Fatalf("open snapshot with a broken skill = %+v, %v; want invalid_field skills.dir naming skills/broken.md", r, err)
	}
	if _, err := os.Stat(filepath.Join(snapDir, "r2")); !os.IsNotExist(err) {
		t.Errorf("the refused run's workspace is left behind: %v", err)
	}

	outside := filepath.Join(t.TempDir(), "secret.md")
	writeFile(t, outside, "---\nname: secret\ndescription: the key is hunter2\n---\n")
	ws := filepath.Join(root, "ws")
	writeFile(t, filepath.Join(ws, "skills", "deploy.md"), skill)
	if err := os.Symlink(outside, filepath.Join(ws, "skills", "secret.md")); err != nil {
		t.Fatal(err)
	}
	r, err = do(t, c.nc, wire.SandboxOpenSubject, &protocol.SandboxOp{OpID: "r3.open", Run: "r3", Kind: protocol.OpOpen, Workspace: ws,
		Skills: &protocol.SkillsSpec{Dir: "skills"}}, 20*time.Second)
	if err != nil || r.Error == nil || r.Error.Field != "skills.dir" || !strings.Contains(r.Error.Message, "skills/secret.md is a symbolic link") ||
		strings.Contains(r.Error.Error(), "hunter2") {
		t.Fatalf("open with a linked skill = %+v, %v; want invalid_field skills.dir naming the link", r, err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSkillsSnapshot opens a root workspace whose skills come as a
// snapshot of their own: the catalogue is answered with the paths the
// policy judges (skills/...), read_skill reads a skill from the node's
// own copy, and the run's file tools do not reach it; the policy's deny
// of a skill's path refuses it, with the rule; a file of the snapshot
// that is no skill is not read; a node that does not hold the copy (a
// restart) unpacks it again for the read; closing the run removes the
// copy. A malformed catalogue and an unknown ref refuse the open, naming
// skills.snapshot, and leave nothing behind.
func TestSkillsSnapshot(t *testing.T) {
	c := startJS(t)
	snapDir := t.TempDir()
	root := t.TempDir()
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true, SnapshotDir: snapDir, Roots: []string{root}})
	ws := filepath.Join(root, "ws")
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n")

	sk := t.TempDir()
	writeFile(t, filepath.Join(sk, "deploy.md"), "---\nname: deploy\ndescription: How to deploy.\n---\nRun make deploy.\n")
	writeFile(t, filepath.Join(sk, "oncall", "SKILL.md"), "---\nname: oncall\ndescription: The runbook.\n---\nThe pager password is hunter2.\n")
	writeFile(t, filepath.Join(sk, "notes.txt"), "not a skill\n")
	ref := c.put(sk)
	spec := &protocol.SkillsSpec{Snapshot: ref}
	read := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}

	r, err := do(t, c.nc, wire.SandboxOpenSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Workspace: ws, Policy: read, Skills: spec}, 20*time.Second)
	want := []protocol.Skill{{Name: "deploy", Description: "How to deploy.", Path: "skills/deploy.md"}, {Name: "oncall", Description: "The runbook.", Path: "skills/oncall/SKILL.md"}}
	if err != nil || r.Error != nil || fmt.Sprint(r.Skills) != fmt.Sprint(want) {
		t.Fatalf("open with a skills snapshot = %+v, %v; want the catalogue %v", r, err, want)
	}
	copyDir := filepath.Join(snapDir, "r1.skills")
	if _, err := os.Stat(filepath.Join(copyDir, "skills", "deploy.md")); err != nil {
		t.Fatalf("the skills snapshot is not unpacked apart from the workspace: %v", err)
	}
	tool := func(id string, pol *protocol.Policy, name, args string, skills *protocol.SkillsSpec) *protocol.Observation {
		t.Helper()
		r, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: id, Run: "r1", Kind: protocol.OpTool, Workspace: ws, Policy: pol,
			Call: call(name, args), Skills: skills}, 20*time.Second)
		if err != nil || r.Error != nil || r.Observation == nil {
			t.Fatalf("%s %s = %+v, %v", name, args, r, err)
		}
		return r.Observation
	}
	if o := tool("r1.1", read, "read_skill", `{"path":"skills/deploy.md"}`, spec); o.IsError || !strings.Contains(o.Content, "Run make deploy.") {
		t.Errorf("read_skill deploy = %+v, want its body", o)
	}
	// The file tools see the workspace alone.
	if o := tool("r1.2", read, "read_file", `{"path":"skills/deploy.md"}`, nil); strings.Contains(o.Content, "make deploy") || !strings.Contains(o.Content, "does not exist") {
		t.Errorf("read_file skills/deploy.md = %+v, want nothing: the skills are not in the workspace", o)
	}
	if o := tool("r1.3", read, "find", `{"name_glob":"*.md"}`, nil); strings.Contains(o.Content, "deploy") {
		t.Errorf("find *.md = %q, want no skill", o.Content)
	}
	deny := &protocol.Policy{Layers: []protocol.Layer{{Name: "private", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "skills/oncall/*"}}}},
		Defaults: read.Defaults}
	o := tool("r1.4", deny, "read_skill", `{"path":"skills/oncall/SKILL.md"}`, spec)
	if o.State() != protocol.CallRefused || !strings.Contains(o.Content, `denied by rule "skills/oncall/*"`) || strings.Contains(o.Content, "hunter2") {
		t.Errorf("read_skill oncall under a deny = %+v, want refused by skills/oncall/*", o)
	}
	if o := tool("r1.5", read, "read_skill", `{"path":"skills/notes.txt"}`, spec); o.State() != protocol.CallFailed || strings.Contains(o.Content, "not a skill\n") {
		t.Errorf("read_skill of a file that is no skill = %+v, want it failed unread", o)
	}
	if o := tool("r1.6", read, "read_skill", `{"path":"skills/deploy.md"}`, nil); o.State() != protocol.CallFailed {
		t.Errorf("read_skill without the run's skills = %+v, want it failed", o)
	}

	// A node that does not hold the copy unpacks it again for a read.
	r, err = do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.close", Run: "r1", Kind: protocol.OpClose}, 20*time.Second)
	if err != nil || r.Error != nil {
		t.Fatalf("close = %+v, %v", r, err)
	}
	if _, err := os.Stat(copyDir); !os.IsNotExist(err) {
		t.Fatalf("the skills snapshot is left after the close: %v", err)
	}
	if o := tool("r1.7", read, "read_skill", `{"path":"skills/deploy.md"}`, spec); o.IsError || !strings.Contains(o.Content, "Run make deploy.") {
		t.Errorf("read_skill deploy on a node that lost the copy = %+v, want its body", o)
	}
	if _, err := do(t, c.nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: "r1.close2", Run: "r1", Kind: protocol.OpClose}, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyDir); !os.IsNotExist(err) {
		t.Fatalf("the skills snapshot is left after the second close: %v", err)
	}

	// A snapshot workspace's skills come as a snapshot of their own too,
	// unpacked beside it, not in it.
	r, err = do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r5.open", Run: "r5", Kind: protocol.OpOpen, Snapshot: c.put(ws), Policy: read,
		Skills: spec}, 20*time.Second)
	if err != nil || r.Error != nil || fmt.Sprint(r.Skills) != fmt.Sprint(want) {
		t.Fatalf("open a snapshot workspace with a skills snapshot = %+v, %v; want the catalogue %v", r, err, want)
	}
	if _, err := os.Stat(filepath.Join(snapDir, "r5.skills", "skills", "deploy.md")); err != nil {
		t.Errorf("the skills snapshot of a snapshot workspace is not unpacked beside it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(snapDir, "r5", "work", "skills")); !os.IsNotExist(err) {
		t.Errorf("the skills snapshot is in the snapshot workspace: %v", err)
	}

	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, "deploy.md"), "---\nname: deploy\ndescription: How to deploy.\n---\n")
	writeFile(t, filepath.Join(bad, "broken.md"), "# no front matter\n")
	for _, tt := range []struct {
		name, ref string
		code      error
		why       string
	}{
		{"malformed", c.put(bad), protocol.ErrInvalidField, "the skill skills/broken.md: it has no front matter"},
		{"unknown", "sha256-" + strings.Repeat("0", 64), protocol.ErrNotFound, "no snapshot sha256-000"},
	} {
		r, err := do(t, c.nc, wire.SandboxOpenSubject, &protocol.SandboxOp{OpID: "r2.open", Run: "r2", Kind: protocol.OpOpen, Workspace: ws, Policy: read,
			Skills: &protocol.SkillsSpec{Snapshot: tt.ref}}, 20*time.Second)
		if err != nil || r.Error == nil || !errors.Is(r.Error, tt.code) || r.Error.Field != "skills.snapshot" || !strings.Contains(r.Error.Message, tt.why) {
			t.Errorf("%s: open = %+v, %v; want %v skills.snapshot saying %q", tt.name, r, err, tt.code, tt.why)
		}
		if _, err := os.Stat(filepath.Join(snapDir, "r2.skills")); !os.IsNotExist(err) {
			t.Errorf("%s: the refused skills snapshot is left behind: %v", tt.name, err)
		}
	}
}
