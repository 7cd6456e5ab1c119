package process

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestProviderKeyNeverReachesAFloorCommand is the fifth attack of issue
// 12 through a real `harness run` process: with the floor allowed, a
// command reads its parent's /proc/PID/environ, where the provider key
// was. The harness process scrubbed it at start: the command, and so the
// trace, see the variable's name and never its value.
func TestProviderKeyNeverReachesAFloorCommand(t *testing.T) {
	bin := roleBinaries(t)
	const secret = "sk-test-do-not-leak-0123456789"
	contract := func(root string) []byte {
		b, _ := json.Marshal(map[string]any{
			"schema": protocol.ContractSchema, "task": "say done", "workspace": map[string]string{"root": root},
			"verification": map[string]any{"command": map[string]any{"argv": []string{"sh", "-c", `tr '\000' '\n' < /proc/$PPID/environ | grep API_KEY`}}},
			"policy": map[string]any{"layers": []any{map[string]any{"name": "t", "rules": []any{
				map[string]string{"act": "exec", "effect": "allow", "pattern": "sh"},
				map[string]string{"act": "exec", "effect": "allow", "pattern": "sh -c*"}}}},
				"defaults": map[string]string{"read": "allow", "write": "deny", "exec": "deny", "net": "deny"}},
			"sandbox": map[string]any{"backend": "floor"},
		})
		return b
	}
	// A cassette of the one turn, recorded on this contract.
	rec := provider.NewRecord(provider.NewScripted(&protocol.Turn{Text: "Done."}))
	var c protocol.Contract
	if err := json.Unmarshal(contract(t.TempDir()), &c); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.Run(t.Context(), &c, harness.WithProvider(rec), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	cassette := saveCassette(t, rec)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "contract.json")
	if err := os.WriteFile(path, contract(ws), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "harness"), "run", "--allow-floor", "--data", data, "--replay", cassette, "--id", "leak", path)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+secret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("harness run: %v\n%s", err, out)
	}
	recs := clustertest.ReadTrace(t, data, "leak")
	checked := false
	for _, r := range recs {
		if r.Check != nil && r.Check.Exec != nil {
			checked = true
			if !strings.Contains(r.Check.Output, "OPENAI_API_KEY=") {
				t.Errorf("the command did not read its parent's environment: %q", r.Check.Output)
			}
		}
	}
	if !checked {
		t.Fatal("the verification never ran")
	}
	b, _ := json.Marshal(recs)
	if strings.Contains(string(b)+string(out), secret) {
		t.Errorf("the provider key reached the trace or the output")
	}
	err = filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("the provider key is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceBesideTheInitIsRefusedBeforeItStarts: a data directory in
// the directory of harness-sandbox-init puts a --copy workspace there too,
// where no workspace may be (an agent could rewrite the init every sandbox
// runs). `harness run` refuses it, exit 2, before it copies or starts
// anything; the sandboxer refused it only at the open, the run failed.
func TestWorkspaceBesideTheInitIsRefusedBeforeItStarts(t *testing.T) {
	bin := roleBinaries(t)
	data := filepath.Join(bin, "data")
	out, err := exec.Command(filepath.Join(bin, "harness"), "run", "--copy", "--data", data, clustertest.Repo("examples/fix-a-test")).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		if strings.Contains(string(out), "no sandbox that isolates commands") && os.Getenv("HARNESS_REQUIRE_NATIVE") != "1" {
			t.Skipf("no native sandbox here, so no init to keep workspaces from (HARNESS_REQUIRE_NATIVE=1 makes this a failure):\n%s", out)
		}
		t.Fatalf("harness run --copy with its data in the init's directory = %v, want exit 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "path_escape") || !strings.Contains(string(out), bin) {
		t.Errorf("the refusal does not say what the workspace overlaps:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, "workspaces")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a workspace was copied before the refusal: %v", err)
	}
}
