package sandboxer_test

import (
	"errors"
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
