package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestOperatorLooksAndCancels is an operator's look at a data directory
// through the CLI: a run `harness run` left paused is listed by `harness
// ls` and its action by `harness approvals`; `harness cancel` ends it
// cancelled with the reason, again changes nothing, and a typo'd id is a
// usage error; the action is then no longer pending, and a decision on it
// is refused.
func TestOperatorLooksAndCancels(t *testing.T) {
	body := `{"schema":"harness.contract/v1","task":"Fix Add in calc.go.","workspace":{"root":"ws"},"verification":{"none":{}},
		"policy":{"defaults":{"read":"allow","write":"ask","exec":"deny","net":"deny"}}}`
	contract, ws := exampleContract(t, body)
	cassette := recordPausing(t, body, ws)
	data := t.TempDir()
	if code, out, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--replay", cassette, "--id", "op", contract); code != exitPaused {
		t.Fatalf("run = %d, want %d\nstdout: %s\nstderr: %s", code, exitPaused, out, errOut)
	}

	code, out, errOut := cli(t, t.Context(), nil, "ls", "--data", data, "--state", "paused", "--json")
	var runs []protocol.RunState
	if code != exitOK || json.Unmarshal([]byte(out), &runs) != nil || len(runs) != 1 || runs[0].Run != "op" || runs[0].Pool == "" {
		t.Fatalf("ls --state paused = %d %+v\nstdout: %s\nstderr: %s", code, runs, out, errOut)
	}
	if code, out, _ := cli(t, t.Context(), nil, "ls", "--data", data, "--state", "running", "--json"); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls --state running = %d %s, want an empty list", code, out)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "ls", "--data", data, "--state", "sleeping"); code != exitUsage || !strings.Contains(errOut, "running, paused") {
		t.Errorf("ls --state sleeping = %d %q, want a usage error naming the states", code, errOut)
	}
	code, out, _ = cli(t, t.Context(), nil, "approvals", "--data", data, "--json")
	var pending []protocol.Approval
	if code != exitOK || json.Unmarshal([]byte(out), &pending) != nil || len(pending) != 1 || pending[0].ID != "op.1.0" || pending[0].Pending.Target != "calc.go" {
		t.Fatalf("approvals = %d %+v\n%s", code, pending, out)
	}
	if code, out, _ := cli(t, t.Context(), nil, "approvals", "--data", data); code != exitOK || !strings.Contains(out, "op.1.0  write \"calc.go\"") {
		t.Errorf("approvals as text = %d\n%s", code, out)
	}

	code, out, errOut = cli(t, t.Context(), nil, "cancel", "--data", data, "--reason", "wrong ticket", "--by", "ops:alice", "op")
	if code != exitOK || !strings.Contains(out, "cancelled") || !strings.Contains(out, "ops:alice: wrong ticket") {
		t.Fatalf("cancel = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = cli(t, t.Context(), nil, "cancel", "--data", data, "--json", "op")
	var again struct {
		Cancel protocol.Cancel  `json:"cancel"`
		Result *protocol.Result `json:"result"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &again) != nil || again.Cancel.By != "ops:alice" || again.Result == nil || again.Result.Outcome != protocol.OutcomeCancelled {
		t.Errorf("cancel again = %d %+v\n%s", code, again, out)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "cancel", "--data", data, "typo-run"); code != exitUsage || !strings.Contains(errOut, "unknown_run") {
		t.Errorf("cancel typo-run = %d %q, want a usage error saying unknown_run", code, errOut)
	}
	// Reading a typo'd run says how to find the right id.
	for _, args := range [][]string{{"status"}, {"trace"}, {"trace", "-f"}, {"trace", "--turn", "1"}, {"fetch"}} {
		args = append(append(args, "--data", data), "typo-run")
		if code, _, errOut := cli(t, t.Context(), nil, args...); code != exitError || !strings.Contains(errOut, "unknown_run") || !strings.Contains(errOut, "harness ls lists the runs") {
			t.Errorf("%v = %d %q, want unknown_run and where the ids are listed", args, code, errOut)
		}
	}
	if code, out, _ := cli(t, t.Context(), nil, "approvals", "--data", data, "--json"); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("approvals after the cancel = %d %s, want none", code, out)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "approve", "--data", data, "--json", "typo-run.3.0"); code != exitUsage || !strings.Contains(errOut, "unknown_run") {
		t.Errorf("approve typo-run.3.0 = %d %q, want a usage error saying unknown_run", code, errOut)
	}
	if code, _, _ := cli(t, t.Context(), nil, "approve", "--data", data, "op.1.0"); code == exitOK {
		t.Error("an approval of a cancelled run's action was accepted")
	}
	if code, out, _ := cli(t, t.Context(), nil, "status", "--data", data, "--json", "op"); code != exitOK || !strings.Contains(out, `"outcome": "cancelled"`) {
		t.Errorf("status after the cancel = %d\n%s", code, out)
	}
}
