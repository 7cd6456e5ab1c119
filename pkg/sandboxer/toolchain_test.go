package sandboxer_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

var goToolchain = &protocol.Toolchain{
	Ecosystem: "go", Marker: "go.mod", Manager: "go",
	Install: []string{"go", "mod", "download"},
	Build:   []string{"go", "build", "./..."},
	Test:    []string{"go", "test", "./..."},
	Lint:    []string{"go", "vet", "./..."},
	Format:  []string{"gofmt", "-l", "."},
}

func writeGoMod(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRepliesWithToolchain: the open of a directory workspace says what
// its root looks like, and that of a workspace with no marker says nothing.
func TestOpenRepliesWithToolchain(t *testing.T) {
	root := t.TempDir()
	writeGoMod(t, filepath.Join(root, "gomod"))
	if err := os.Mkdir(filepath.Join(root, "plain"), 0o755); err != nil {
		t.Fatal(err)
	}
	nc, _ := start(t, root)
	tests := []struct {
		ws   string
		want *protocol.Toolchain
	}{
		{ws: "gomod", want: goToolchain},
		{ws: "plain", want: nil},
	}
	for i, tt := range tests {
		run := "r" + string(rune('1'+i))
		r, err := do(t, nc, "harness.sandbox.open", &protocol.SandboxOp{OpID: run + ".open", Run: run, Kind: protocol.OpOpen, Workspace: tt.ws}, 5*time.Second)
		if err != nil || r.Error != nil {
			t.Fatalf("open %s = %+v, %v", tt.ws, r, err)
		}
		if d := cmp.Diff(tt.want, r.Toolchain); d != "" {
			t.Errorf("open %s: reply's toolchain differs (-want +got):\n%s", tt.ws, d)
		}
	}
}

// TestOpenSnapshotRepliesWithToolchain: so does the open of a snapshot
// workspace, from the snapshot as materialised.
func TestOpenSnapshotRepliesWithToolchain(t *testing.T) {
	c := startJS(t)
	c.sandboxer("sb1", sandboxer.Config{AllowFloor: true})
	src := t.TempDir()
	writeGoMod(t, src)
	ref := c.put(src)
	r, err := do(t, c.nc, wire.SandboxSnapshotSubject, &protocol.SandboxOp{OpID: "r1.open", Run: "r1", Kind: protocol.OpOpen, Snapshot: ref}, 20*time.Second)
	if err != nil || r.Error != nil {
		t.Fatalf("open snapshot = %+v, %v", r, err)
	}
	if d := cmp.Diff(goToolchain, r.Toolchain); d != "" {
		t.Errorf("open snapshot: reply's toolchain differs (-want +got):\n%s", d)
	}
}
