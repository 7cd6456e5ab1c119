package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSubmitCarriesSkills brings a cluster up and submits the example
// with --skills: the directory is uploaded as a snapshot of its own and
// becomes the contract's skills.snapshot, which the sandboxer unpacks and
// reads, so a malformed skill in it ends the run before its first step,
// naming the file. --skills naming no directory is a usage error.
func TestSubmitCarriesSkills(t *testing.T) {
	data := t.TempDir()
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		env := &environ{stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
		done <- dispatch(ctx, env, []string{"up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette})
		pw.Close()
	}()
	var natsURL string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && natsURL == "" {
		natsURL, _ = strings.CutPrefix(sc.Text(), "NATS URL: ")
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if natsURL == "" {
		t.Fatal("harness up printed no NATS URL")
	}
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("harness up did not stop")
		}
	}()
	vars := map[string]string{"NATS_URL": natsURL, "HARNESS_DATA": data}
	skills := t.TempDir()
	for p, content := range map[string]string{
		"deploy.md":       "---\nname: deploy\ndescription: How to deploy.\n---\nRun make deploy.\n",
		"broken/SKILL.md": "no front matter\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(skills, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(skills, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(example, "workspace")
	code, out, errOut := cli(t, t.Context(), vars, "submit", "--workspace", ws, "--skills", skills, example, "--wait", "--id", "skilled-1")
	if code != exitFailed || !strings.Contains(errOut, "skills      snapshot of "+skills) ||
		!strings.Contains(out+errOut, "invalid_field skills.snapshot") || !strings.Contains(out+errOut, "the skill skills/broken/SKILL.md: it has no front matter") {
		t.Errorf("submit --skills with a malformed skill = %d, want failed naming skills/broken/SKILL.md\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, _, errOut = cli(t, t.Context(), vars, "submit", "--skills", filepath.Join(skills, "deploy.md"), example)
	if code != exitUsage || !strings.Contains(errOut, "--skills names a directory") {
		t.Errorf("submit --skills FILE = %d %q, want a usage error", code, errOut)
	}
}
