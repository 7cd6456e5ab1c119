package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/protocol"
)

// cli runs the harness command in process with the given environment and
// returns its exit code, stdout and stderr.
func cli(t *testing.T, ctx context.Context, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &environ{stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	code := dispatch(ctx, env, args)
	return code, out.String(), errOut.String()
}

const example = "../../examples/fix-a-test"

// TestRunExample is the README's first command: it reaches success, prints
// the run id first, runs twice with the same result, and leaves the
// example as it was.
func TestRunExample(t *testing.T) {
	data := t.TempDir()
	before, err := os.ReadFile(filepath.Join(example, "workspace", "calc.go"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for i := range 2 {
		code, out, errOut := cli(t, t.Context(), nil, "run", "--copy", "--data", data, example, "--json")
		if code != exitOK {
			t.Fatalf("run %d: exit %d\nstdout: %s\nstderr: %s", i, code, out, errOut)
		}
		if !strings.HasPrefix(errOut, "run ") {
			t.Errorf("run %d: stderr does not begin with the run id: %q", i, firstLine(errOut))
		}
		for _, want := range []string{"step 1  find *.go", "step 3  edit_file calc.go", "verification passed"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("run %d: progress lacks %q:\n%s", i, want, errOut)
			}
		}
		var res protocol.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("run %d: stdout is not the result as JSON: %v\n%s", i, err, out)
		}
		if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 {
			t.Fatalf("run %d: %s after %d steps, want success after 3", i, res.Outcome, res.Steps)
		}
		runs = append(runs, res.Run)
	}
	after, err := os.ReadFile(filepath.Join(example, "workspace", "calc.go"))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the example's workspace changed: %q", after)
	}

	code, out, _ := cli(t, t.Context(), nil, "status", "--data", data, runs[0])
	if code != exitOK || !strings.Contains(out, "outcome  success") {
		t.Errorf("status = %d %q, want the success", code, out)
	}
	// Spend against the ceilings: the cassette's three calls used 1,729
	// of the contract's 200,000 tokens, which are also its tree's.
	for _, want := range []string{"spent    1729 tokens (1612 in, 117 out), 3 steps", "left     198271 tokens",
		"tree     " + runs[0] + " (root)", "  left   198271 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	code, out, _ = cli(t, t.Context(), nil, "trace", "--data", data, runs[1])
	if code != exitOK || !strings.Contains(out, "step 3") || !strings.Contains(out, "finished: success") {
		t.Errorf("trace = %d %q, want the steps and the outcome", code, out)
	}
	code, out, _ = cli(t, t.Context(), nil, "trace", "--json", "--data", data, runs[1])
	if n := strings.Count(out, "\n"); code != exitOK || n != 5 {
		t.Errorf("trace --json = %d with %d lines, want 5 records", code, n)
	}
	// What the model was sent at step 2, rebuilt from the trace: the task,
	// the first turn, its result and the failed check, as text and as JSON.
	code, out, _ = cli(t, t.Context(), nil, "trace", "--turn", "2", "--data", data, runs[1])
	if code != exitOK || !strings.Contains(out, "step 2 of "+runs[1]) || !strings.Contains(out, "[tool result ") || !strings.Contains(out, "Task: ") {
		t.Errorf("trace --turn 2 = %d %q, want the request of step 2", code, out)
	}
	code, out, _ = cli(t, t.Context(), nil, "trace", "--turn", "2", "--json", "--data", data, runs[1])
	var sent struct {
		Request  protocol.CompletionRequest `json:"request"`
		Assembly protocol.Assembly          `json:"assembly"`
	}
	if err := json.Unmarshal([]byte(out), &sent); code != exitOK || err != nil || len(sent.Request.Messages) != 4 || sent.Assembly.Reported == 0 {
		t.Errorf("trace --turn 2 --json = %d %v %q, want the task, a turn, its result and the check's note, with the provider's count", code, err, out)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "trace", "--turn", "9", "--data", data, runs[1]); code != exitError || !strings.Contains(errOut, "no step 9") {
		t.Errorf("trace --turn 9 = %d %q, want an error saying there is no step 9", code, errOut)
	}
	for _, step := range []string{"0", "-1"} {
		if code, out, errOut := cli(t, t.Context(), nil, "trace", "--turn", step, "--data", data, runs[1]); code != exitUsage || out != "" || !strings.Contains(errOut, "1 or more") {
			t.Errorf("trace --turn %s = %d %q %q, want a usage error and no trace", step, code, out, errOut)
		}
	}
	if code, out, _ := cli(t, t.Context(), nil, "status", "--data", data, runs[0]); code != exitOK || !strings.Contains(out, "input    1612 (0 cached, 0 written to the cache)") {
		t.Errorf("status = %d %q, want the input with its cache reads and writes", code, out)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "status", "--data", data, "no-such-run"); code != exitError || !strings.Contains(errOut, "unknown_run") {
		t.Errorf("status of an unknown run = %d %q, want an unknown_run error", code, errOut)
	}
	// With --id, running again reports that run, --copy or not: the
	// second finds the copy the first made, and makes none.
	var again []protocol.Result
	for i := range 2 {
		code, out, errOut := cli(t, t.Context(), nil, "run", "--copy", "--id", "copied-once", "--data", data, example, "--json")
		var res protocol.Result
		if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Run != "copied-once" || res.Outcome != protocol.OutcomeSuccess {
			t.Fatalf("run %d with --copy --id copied-once = %d\nstdout: %s\nstderr: %s", i, code, out, errOut)
		}
		again = append(again, res)
	}
	if again[1].Steps != again[0].Steps || !again[1].Finished.Equal(again[0].Finished) {
		t.Errorf("the second run with the same id = %+v, want the first's %+v reported", again[1], again[0])
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(example, "workspace"))); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	capped := write("capped.json", `{"schema":"harness.contract/v1","task":"never done","workspace":{"root":"ws"},
		"verification":{"file_contains":{"path":"calc.go","needle":"never"}},"budget":{"max_steps":2}}`)
	cassette := filepath.Join(example, "cassette.json")
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want int
	}{
		{"help", []string{"--help"}, nil, exitOK},
		{"command help", []string{"run", "--help"}, nil, exitOK},
		{"unknown command", []string{"fly"}, nil, exitUsage},
		{"no contract", []string{"run"}, nil, exitUsage},
		{"unknown flag", []string{"run", "--frobnicate", capped}, nil, exitUsage},
		{"refused contract", []string{"run", write("bad.json", `{"schema":"harness.contract/v1","tusk":"x"}`)}, nil, exitUsage},
		{"no provider", []string{"run", capped}, nil, exitUsage},
		// The cassette answers the first request only; the second is not
		// recorded, so the run escalates rather than guessing.
		{"unrecorded request escalates", []string{"run", "--replay", cassette, capped}, nil, exitEscalated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{}, tt.args...)
			if len(args) > 0 && args[0] == "run" && len(args) > 1 && args[1] != "--help" {
				args = append(args, "--data", filepath.Join(dir, "data"))
			}
			code, out, errOut := cli(t, t.Context(), tt.vars, args...)
			if code != tt.want {
				t.Errorf("harness %v = %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.want, out, errOut)
			}
		})
	}
}

// TestUpAndSubmit brings a cluster up with `harness up`, then submits the
// example with `harness submit --wait` from another client.
func TestUpAndSubmit(t *testing.T) {
	data := t.TempDir()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(example, "workspace"))); err != nil {
		t.Fatal(err)
	}
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		env := &environ{stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
		done <- dispatch(ctx, env, []string{"up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette, "--root", ws})
		pw.Close()
	}()
	url := ""
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "NATS URL: "); ok {
			url = u
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" {
		t.Fatal("harness up printed no NATS URL")
	}
	raw, err := os.ReadFile(filepath.Join(example, "contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, bytes.Replace(raw, []byte(`"root": "workspace"`), []byte(`"root": "`+ws+`"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, t.Context(), map[string]string{"NATS_URL": url, "HARNESS_DATA": data}, "submit", contract, "--wait", "--id", "submitted-1")
	if code != exitOK || !strings.Contains(out, "outcome success") {
		t.Fatalf("submit --wait = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// Submitting again with the same id is the same run.
	code, out, _ = cli(t, t.Context(), map[string]string{"NATS_URL": url, "HARNESS_DATA": data}, "submit", contract, "--id", "submitted-1")
	if code != exitOK || strings.TrimSpace(out) != "submitted-1" {
		t.Errorf("resubmit = %d %q, want the same run id", code, out)
	}
	detachAndCancel(t, url, data, bytes.Replace(raw, []byte(`"model": "gpt-4.1"`), []byte(`"model": "gpt-4.1", "pool": "nobody"`), 1), ws)
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("up exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("harness up did not stop")
	}
}

// TestUpRefusesARootItCannotServe: harness up refuses, before it starts
// anything, a root that lies where no workspace may be (here its own
// store), which would serve no run.
func TestUpRefusesARootItCannotServe(t *testing.T) {
	data := t.TempDir()
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	code, out, errOut := cli(t, t.Context(), nil, "up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette,
		"--root", filepath.Join(data, "jetstream", "projects"))
	if code != exitUsage || out != "" || !strings.Contains(errOut, "lies in "+filepath.Join(data, "jetstream")) {
		t.Errorf("up with a root in its store = %d\nstdout: %s\nstderr: %s\nwant a usage error naming the store, before anything starts", code, out, errOut)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// detachAndCancel submits, to the harness up at url, a contract whose
// pool no worker serves, so its run waits: Ctrl-C on submit --wait (its
// context ending once the run has started) detaches with exit 130 and
// leaves the run running; harness cancel over NATS then ends it
// cancelled, as harness ls shows.
func detachAndCancel(t *testing.T, url, data string, raw []byte, ws string) {
	t.Helper()
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, bytes.Replace(raw, []byte(`"root": "workspace"`), []byte(`"root": "`+ws+`"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	sf, ok := readServerFile(data)
	if !ok {
		t.Fatal("harness up wrote no server.json")
	}
	nc, err := nats.Connect(url, nats.UserInfo(sf.User, sf.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	vars := map[string]string{"NATS_URL": url, "HARNESS_DATA": data}
	wctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	// submit --wait names the run on stderr once it is accepted, and then
	// waits: that line is when Ctrl-C comes.
	accepted := &lineSignal{line: "run stuck-1", seen: make(chan struct{})}
	waited := make(chan int, 1)
	go func() {
		env := &environ{stdout: io.Discard, stderr: accepted, getenv: func(k string) string { return vars[k] }}
		waited <- dispatch(wctx, env, []string{"submit", contract, "--wait", "--id", "stuck-1"})
	}()
	select {
	case <-accepted.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("submit --wait never said the run was accepted: %s", accepted.text())
	}
	interrupt() // Ctrl-C
	if code := <-waited; code != exitInterrupted || !strings.Contains(accepted.text(), "detached from run stuck-1; it goes on") {
		t.Fatalf("Ctrl-C on submit --wait = %d\nstderr: %s", code, accepted.text())
	}
	if code, out, _ := cli(t, t.Context(), vars, "status", "stuck-1"); code != exitOK || !strings.Contains(out, "no worker serves pool nobody (the workers serve default)") {
		t.Errorf("status of a run no worker serves = %d\n%s", code, out)
	}
	code, out, errOut := cli(t, t.Context(), vars, "ls", "--state", "running", "--json")
	if code != exitOK || !strings.Contains(out, `"run": "stuck-1"`) || !strings.Contains(out, `"pool": "nobody"`) {
		t.Fatalf("ls --state running after the detach = %d\n%s\n%s", code, out, errOut)
	}
	// A follower of its trace sees the run's end as it comes.
	followed := &lineSignal{prefix: "    task: ", seen: make(chan struct{})}
	following := make(chan int, 1)
	go func() {
		env := &environ{stdout: followed, stderr: io.Discard, getenv: func(k string) string { return vars[k] }}
		following <- dispatch(t.Context(), env, []string{"trace", "--follow", "stuck-1"})
	}()
	select {
	case <-followed.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("trace --follow printed no started record: %s", followed.text())
	}
	code, out, errOut = cli(t, t.Context(), vars, "cancel", "--reason", "no worker for its pool", "stuck-1")
	if code != exitOK || !strings.Contains(out, "stuck-1 cancelled") || !strings.Contains(out, "no worker for its pool") {
		t.Fatalf("cancel over NATS = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	select {
	case code := <-following:
		if code != exitOK || !strings.Contains(followed.text(), "cancelled") {
			t.Errorf("trace --follow = %d\n%s", code, followed.text())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("trace --follow did not end with the run: %s", followed.text())
	}
	code, out, _ = cli(t, t.Context(), vars, "ls", "--state", "cancelled")
	if code != exitOK || !strings.Contains(out, "stuck-1") {
		t.Errorf("ls --state cancelled = %d\n%s", code, out)
	}
}

// lineSignal is a writer that closes seen once a line it is written
// equals line, or begins with prefix.
type lineSignal struct {
	line   string
	prefix string
	seen   chan struct{}
	mu     sync.Mutex
	b      strings.Builder
	once   sync.Once
}

func (w *lineSignal) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for _, l := range strings.Split(w.b.String(), "\n") {
		if w.line != "" && l == w.line || w.prefix != "" && strings.HasPrefix(l, w.prefix) {
			w.once.Do(func() { close(w.seen) })
		}
	}
	return len(p), nil
}

func (w *lineSignal) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
