package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWithWorkspaceAndFetch carries the example's workspace as a
// snapshot, and brings the fix back with fetch: as a diff on stdout, and
// applied to a copy of the workspace. The example itself stays broken.
func TestRunWithWorkspaceAndFetch(t *testing.T) {
	data := t.TempDir()
	ws := filepath.Join(example, "workspace")
	before, err := os.ReadFile(filepath.Join(ws, "calc.go"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--workspace", ws, "--commit", "fix Add", example)
	if code != exitOK {
		t.Fatalf("run --workspace: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if _, err := exec.LookPath("git"); err == nil && !strings.Contains(out, "commits: 1 made in the run") {
		t.Errorf("run --workspace --commit does not say it brought a commit back:\n%s", out)
	}
	if !strings.Contains(errOut, "snapshot of "+ws) || !strings.Contains(out, "changes: 1 file(s)") {
		t.Errorf("run --workspace does not say what it carried and brought back:\nstdout: %s\nstderr: %s", out, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(ws, "calc.go")); string(after) != string(before) {
		t.Fatalf("the uploaded workspace changed: %q", after)
	}
	run := strings.TrimSpace(strings.TrimPrefix(firstLine(errOut), "run "))
	if code, out, _ := cli(t, t.Context(), nil, "trace", "--data", data, run); code != exitOK || !strings.Contains(out, "changes: 1 file(s)") {
		t.Errorf("trace does not show the changes:\n%s", out)
	}

	code, out, errOut = cli(t, t.Context(), nil, "fetch", "--data", data, run)
	if code != exitOK || !strings.Contains(out, "+\treturn a + b") || !strings.Contains(errOut, "modified calc.go") {
		t.Errorf("fetch = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if _, err := exec.LookPath("git"); err == nil {
		if !strings.Contains(errOut, "committed as ") || !strings.Contains(errOut, "1 commit(s) made in the run") || !strings.Contains(errOut, "fix Add (harness <harness@localhost>)") {
			t.Errorf("fetch does not name the commit:\n%s", errOut)
		}
		// The commit comes back beside the diff, as a series git am takes.
		series := filepath.Join(t.TempDir(), "run.mbox")
		code, out, errOut = cli(t, t.Context(), nil, "fetch", "--data", data, "--series", series, run)
		if code != exitOK || !strings.Contains(out, "+\treturn a + b") || !strings.Contains(errOut, "1 commit(s) written to "+series) {
			t.Errorf("fetch --series = %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		if b, err := os.ReadFile(series); err != nil || !strings.Contains(string(b), "Subject: [PATCH] fix Add") || !strings.Contains(string(b), "+\treturn a + b") {
			t.Errorf("--series wrote %q, %v", b, err)
		}
		if code, out, _ := cli(t, t.Context(), nil, "fetch", "--data", data, "--series", "-", run); code != exitOK || !strings.HasPrefix(out, "From ") || !strings.Contains(out, "Subject: [PATCH] fix Add") {
			t.Errorf("fetch --series - = %d %q, want the series on stdout", code, out)
		}
	}
	dst := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(dst, os.DirFS(ws)); err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(t.TempDir(), "run.patch")
	code, out, errOut = cli(t, t.Context(), nil, "fetch", "--data", data, "--out", dst, "--patch", patch, run)
	if code != exitOK || out != "" {
		t.Fatalf("fetch --out = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "calc.go")); !strings.Contains(string(got), "return a + b") {
		t.Errorf("fetch --out left calc.go as\n%s", got)
	}
	if p, err := os.ReadFile(patch); err != nil || !strings.Contains(string(p), "calc.go") {
		t.Errorf("--patch wrote %q, %v", p, err)
	}
	// Applying twice is refused, and changes nothing.
	code, _, errOut = cli(t, t.Context(), nil, "fetch", "--data", data, "--out", dst, run)
	if code != exitError || !strings.Contains(errOut, "does not apply") {
		t.Errorf("fetch --out again = %d %q, want a refusal", code, errOut)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "fetch", "--data", data, "no-such-run"); code != exitError || !strings.Contains(errOut, "unknown_run") {
		t.Errorf("fetch of an unknown run = %d %q", code, errOut)
	}
}

func TestWorkspaceRefusals(t *testing.T) {
	data := t.TempDir()
	evil := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(evil, "passwd")); err != nil {
		t.Fatal(err)
	}
	// A link leading out is left out of the snapshot, and said so: the
	// file tools would refuse it where it lies.
	_, _, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--workspace", evil, example)
	if !strings.Contains(errOut, "left out passwd") || !strings.Contains(errOut, "outside the workspace") {
		t.Errorf("run --workspace with a link out: %q, want the link left out and named", errOut)
	}
	code, _, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--copy", "--workspace", filepath.Join(example, "workspace"), example)
	if code != exitUsage {
		t.Errorf("run --copy --workspace = %d %q, want a usage error", code, errOut)
	}
	code, _, errOut = cli(t, t.Context(), nil, "run", "--data", data, "--commit", "x", example)
	if code != exitUsage || !strings.Contains(errOut, "--workspace") {
		t.Errorf("run --commit without --workspace = %d %q, want a usage error", code, errOut)
	}
}
