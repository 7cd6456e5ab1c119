package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestRunPausesAndApproveCarriesOn is the embedded default with nobody at
// a terminal: `harness run` pauses on a write the policy asks about,
// prints the approval id and the command (and where its metrics are
// served, given --metrics), and exits 7; `harness approve` then records
// the decision and carries the run on in its own process.
func TestRunPausesAndApproveCarriesOn(t *testing.T) {
	body := `{"schema":"harness.contract/v1","task":"Fix Add in calc.go.","workspace":{"root":"ws"},"verification":{"none":{}},
		"policy":{"defaults":{"read":"allow","write":"ask","exec":"deny","net":"deny"}}}`
	contract, ws := exampleContract(t, body)
	cassette := recordPausing(t, body, ws)

	data := t.TempDir()
	code, out, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--replay", cassette, "--id", "cli-paused", "--metrics", "127.0.0.1:0", contract)
	if code != exitPaused {
		t.Fatalf("run = %d, want %d (paused)\nstdout: %s\nstderr: %s", code, exitPaused, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^  metrics   http://127\.0\.0\.1:\d+/metrics$`).MatchString(errOut) {
		t.Errorf("run --metrics did not say where its metrics are served:\n%s", errOut)
	}
	id := regexp.MustCompile(`harness approve (\S+)`).FindStringSubmatch(out)
	if id == nil || id[1] != "cli-paused.1.0" {
		t.Fatalf("run output names no approval command: %s", out)
	}
	code, out, errOut = cli(t, t.Context(), nil, "approve", "--data", data, "--replay", cassette, id[1])
	if code != exitOK || !strings.Contains(out, "outcome finished") {
		t.Fatalf("approve = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(b), "return a + b") {
		t.Errorf("calc.go after the approval = %q", b)
	}
	if code, _, _ := cli(t, t.Context(), nil, "approve", "--data", data, id[1]); code == exitOK {
		t.Error("a second approval of the same action was accepted")
	}
	if code, _, errOut := cli(t, t.Context(), nil, "deny", "--data", data, "not-an-id"); code != exitUsage || !strings.Contains(errOut, "approval id") {
		t.Errorf("deny not-an-id = %d %q, want a usage error", code, errOut)
	}
}

// TestCarriedOnRunChecksItsCommand: a run whose verification is a
// command, paused on the embedded default, is carried on to success by
// `harness approve --replay`, and by `harness resume --replay` after a
// decision recorded alone, each in the sandboxes `harness run` has: the
// check runs in one and passes, where a carried-on run had only the
// floor, not allowed, and failed, lost.
func TestCarriedOnRunChecksItsCommand(t *testing.T) {
	body := `{"schema":"harness.contract/v1","task":"Fix Add in calc.go.","workspace":{"root":"ws"},"verification":{"command":{"argv":["go","test","./..."]}},
		"policy":{"layers":[{"name":"check","rules":[{"act":"exec","effect":"allow","pattern":"go"},{"act":"exec","effect":"allow","pattern":"go test*"}]}],
		"defaults":{"read":"allow","write":"ask","exec":"deny","net":"deny"}}}`
	for _, how := range []string{"approve", "resume"} {
		t.Run(how, func(t *testing.T) {
			contract, ws := exampleContract(t, body)
			cassette := recordPausing(t, body, ws)
			data := t.TempDir()
			if code, out, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--replay", cassette, "--id", "checked", contract); code != exitPaused {
				t.Fatalf("run = %d, want %d (paused)\nstdout: %s\nstderr: %s", code, exitPaused, out, errOut)
			}
			var code int
			var out, errOut string
			if how == "approve" {
				code, out, errOut = cli(t, t.Context(), nil, "approve", "--data", data, "--replay", cassette, "checked.1.0")
			} else {
				if code, out, errOut := cli(t, t.Context(), nil, "approve", "--data", data, "checked.1.0"); code != exitOK || !strings.Contains(errOut, "harness resume checked") {
					t.Fatalf("approve with no provider = %d, want the decision recorded and resume named\nstdout: %s\nstderr: %s", code, out, errOut)
				}
				code, out, errOut = cli(t, t.Context(), nil, "resume", "--data", data, "--replay", cassette, "checked")
			}
			if code != exitOK || !strings.Contains(out, "outcome success") {
				t.Fatalf("%s = %d, want the run carried on to success\nstdout: %s\nstderr: %s", how, code, out, errOut)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(b), "return a + b") {
				t.Errorf("calc.go after the approval = %q", b)
			}
			// Finished, the run is reported without a provider; a run
			// that is not there is said to be missing, not a provider.
			if code, out, errOut := cli(t, t.Context(), nil, "resume", "--data", data, "checked"); code != exitOK || !strings.Contains(out, "outcome success") {
				t.Errorf("resume of the finished run with no provider = %d, want its outcome\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			if code, _, errOut := cli(t, t.Context(), nil, "resume", "--data", data, "chekced"); code != exitError || !strings.Contains(errOut, "unknown_run") {
				t.Errorf("resume of a typo'd run with no provider = %d %q, want exit 1 and unknown_run", code, errOut)
			}
		})
	}
}

// exampleContract writes body as contract.json in a directory of the
// test's own, beside a copy of the example's workspace in ws, its
// workspace root.
func exampleContract(t *testing.T, body string) (contract, ws string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(example, "workspace"))); err != nil {
		t.Fatal(err)
	}
	contract = filepath.Join(dir, "contract.json")
	if err := os.WriteFile(contract, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return contract, ws
}

// recordPausing records an agent that fixes Add through a pause and an
// approval, for the CLI to replay.
func recordPausing(t *testing.T, contract, root string) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(ws, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	rec := provider.NewRecord(provider.NewScripted(
		&protocol.Turn{Text: "Fixing Add.", ToolCalls: []protocol.ToolCall{{ID: "fix", Name: "edit_file",
			Arguments: json.RawMessage(`{"path":"calc.go","search":"return a - b","replace":"return a + b"}`)}}},
		&protocol.Turn{Text: "Done."}))
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: rec, NoTakeover: true, AllowFloor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	raw := strings.Replace(contract, `"root":"ws"`, `"root":"`+ws+`"`, 1)
	c, err := protocol.DecodeContract([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Submit(t.Context(), c, harness.WithRunID("rec")); err != nil {
		t.Fatal(err)
	}
	if res, err := cl.Run("rec").Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("recording: %+v, %v; want it paused for the edit", res, err)
	}
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("rec", 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if res, err := cl.Run("rec").Resume(t.Context()); err != nil || res.Outcome != protocol.OutcomeFinished && res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("recording: %+v, %v", res, err)
	}
	path := filepath.Join(t.TempDir(), "cassette.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResumePolicyFileIsReadAsAContracts: the policy file resume carries a
// run on under is read as a contract's "policy" object is, its faults the
// same typed errors naming the field, before anything starts.
func TestResumePolicyFileIsReadAsAContracts(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"bogus":1}`:                      "unknown_field policy.bogus",
		`{"defaults":{"exec":"maybe"}}`:    "invalid_field policy.defaults.exec",
		`{"layers":[{"name":"x","rules":[`: "malformed policy",
	} {
		path := filepath.Join(dir, "policy.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := cli(t, t.Context(), nil, "resume", "--data", dir, "--replay", filepath.Join(example, "cassette.json"), "--policy", path, "some-run")
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("resume --policy %s = %d %q, want exit %d saying %s", body, code, errOut, exitUsage, want)
		}
	}
}
