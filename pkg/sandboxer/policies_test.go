package sandboxer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestEachOpIsJudgedByItsOwnPolicy sends one sandboxer, in turn, ops of
// three runs under three policies, each twice (the second time from the
// sandboxer's cache of decoded policies), and one whose policy does not
// compile: every op is judged by the policy it carries and no other.
func TestEachOpIsJudgedByItsOwnPolicy(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("SENTINEL-NOTES\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nc, _ := start(t, root)
	allowAll := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}
	denyNotes := &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"},
		Layers: []protocol.Layer{{Name: "t", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "notes.txt"}}}}}
	denyAll := &protocol.Policy{Defaults: &protocol.Defaults{Read: "deny", Write: "deny", Exec: "deny", Net: "deny"}}
	broken := &protocol.Policy{Layers: []protocol.Layer{{Name: "t", Rules: []protocol.Rule{{Act: "teleport", Effect: "allow", Pattern: "*"}}}}}
	n := 0
	read := func(run string, pol *protocol.Policy) *protocol.Observation {
		t.Helper()
		n++
		r, err := do(t, nc, "harness.sandbox.sb1.op", &protocol.SandboxOp{OpID: run + "." + string(rune('0'+n)) + ".0.1", Run: run, Kind: protocol.OpTool,
			Workspace: root, Call: call("read_file", `{"path":"notes.txt"}`), Policy: pol}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Observation == nil {
			t.Fatalf("read under %s: %+v, want an observation", run, r)
		}
		return r.Observation
	}
	for range 2 {
		for _, tt := range []struct {
			run     string
			pol     *protocol.Policy
			allowed bool
		}{
			{"allows", allowAll, true},
			{"denies-notes", denyNotes, false},
			{"denies-all", denyAll, false},
			{"broken", broken, false},
			{"allows-again", allowAll, true},
		} {
			obs := read(tt.run, tt.pol)
			if got := strings.Contains(obs.Content, "SENTINEL-NOTES"); got != tt.allowed {
				t.Errorf("read_file under %s = %q, want read %v", tt.run, obs.Content, tt.allowed)
			}
			if !tt.allowed && !strings.Contains(obs.Content, "refused") {
				t.Errorf("read_file under %s = %q, want a refusal", tt.run, obs.Content)
			}
		}
	}
}
