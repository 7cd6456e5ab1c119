package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// operate is an operator's day on the compose cluster: the shipped
// example, carried as a snapshot, runs to success on a worker with no key
// (the example's cassette is its fallback, as compose.yaml ships it) and
// a sandboxer whose image has the Go toolchain its verification needs; a
// run no worker serves is found with harness ls, cancelled with the nats
// CLI, and shown cancelled by harness status and harness ls.
func operate(t *testing.T, c *Cluster, work string) {
	raw, err := os.ReadFile(filepath.Join("..", "examples", "fix-a-test", "contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, pool string) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m["provider"] = map[string]any{"model": "gpt-4.1", "pool": pool}
		b, _ := json.Marshal(m)
		path := filepath.Join(work, name+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ws := filepath.Join("..", "examples", "fix-a-test", "workspace")

	out, err := c.Harness("submit", "--workspace", ws, "--wait", "--id", "example-1", write("example", "example"))
	if err != nil || !strings.Contains(out, "outcome success") {
		t.Errorf("the shipped example on the cluster: %v\n%s", err, out)
	}

	if out, err := c.Harness("submit", "--workspace", ws, "--id", "stuck-1", write("stuck", "nobody")); err != nil {
		t.Fatalf("submit to a pool no worker serves: %v\n%s", err, out)
	}
	out, err = c.Harness("ls", "--state", "running", "--json")
	if err != nil || !strings.Contains(out, `"run": "stuck-1"`) {
		t.Fatalf("harness ls --state running: %v\n%s", err, out)
	}
	if out, err := c.NATS("admin", "kv", "ls", "harness-runs"); err != nil || !strings.Contains(out, "stuck-1") || !strings.Contains(out, "example-1") {
		t.Errorf("nats kv ls harness-runs: %v\n%s", err, out)
	}
	if out, _ := c.Harness("status", "stuck-1"); !strings.Contains(out, "no worker serves pool nobody") {
		t.Errorf("harness status of a run no worker serves:\n%s", out)
	}
	out, err = c.NATS("admin", "req", "harness.cancel.stuck-1", `{"reason":"no worker for its pool"}`)
	if err != nil || !strings.Contains(out, `"cancel"`) {
		t.Fatalf("nats req harness.cancel.stuck-1: %v\n%s", err, out)
	}
	out, err = c.Harness("status", "--json", "stuck-1")
	var st protocol.RunState
	if i := strings.Index(out, "{"); err != nil || i < 0 || json.Unmarshal([]byte(out[i:]), &st) != nil || st.Outcome != protocol.OutcomeCancelled ||
		!strings.Contains(st.Reason, "no worker for its pool") {
		t.Errorf("harness status after the cancel: %v\n%s", err, out)
	}
	if out, err := c.Harness("ls", "--state", "cancelled"); err != nil || !strings.Contains(out, "stuck-1") {
		t.Errorf("harness ls --state cancelled: %v\n%s", err, out)
	}
	if out, err := c.NATS("admin", "kv", "get", "harness-cancels", "stuck-1", "--raw"); err != nil || !strings.Contains(out, "no worker for its pool") {
		t.Errorf("nats kv get harness-cancels stuck-1: %v\n%s", err, out)
	}
}
