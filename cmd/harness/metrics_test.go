package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/testkit"
)

// TestUpServesMetricsAndSubmitCarriesAWorkspace brings a cluster up with
// `harness up --metrics`, submits the example with its workspace carried
// as a snapshot from another client, fetches the fix back over NATS, and
// reads the run in the cluster's metrics.
func TestUpServesMetricsAndSubmitCarriesAWorkspace(t *testing.T) {
	data := t.TempDir()
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int, 1) // up need not wait for a test that failed early
	go func() {
		env := &environ{stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
		done <- dispatch(ctx, env, []string{"up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette, "--metrics", "127.0.0.1:0"})
		pw.Close()
	}()
	var natsURL, metricsURL string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && (natsURL == "" || metricsURL == "") {
		if u, ok := strings.CutPrefix(sc.Text(), "NATS URL: "); ok {
			natsURL = u
		}
		if u, ok := strings.CutPrefix(sc.Text(), "metrics:  "); ok {
			metricsURL = u
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if natsURL == "" || metricsURL == "" {
		t.Fatalf("harness up printed NATS URL %q, metrics %q", natsURL, metricsURL)
	}
	vars := map[string]string{"NATS_URL": natsURL, "HARNESS_DATA": data}
	ws := filepath.Join(example, "workspace")
	code, out, errOut := cli(t, t.Context(), vars, "submit", "--workspace", ws, example, "--wait", "--id", "carried-1")
	if code != exitOK || !strings.Contains(out, "outcome success") || !strings.Contains(out, "harness fetch carried-1") {
		t.Fatalf("submit --workspace --wait = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = cli(t, t.Context(), vars, "fetch", "carried-1")
	if code != exitOK || !strings.Contains(out, "+\treturn a + b") {
		t.Errorf("fetch over NATS = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// Roles count once they have done their part, which may be a moment
	// after the result is out: scrape until the numbers settle.
	testkit.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get(metricsURL)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var missing []string
		for _, want := range []string{
			`harness_coordinator_runs_finished_total{outcome="success"} 1`,
			`harness_coordinator_steps_total 3`,
			`harness_worker_turns_total{result="ok"} 3`,
			`harness_sandboxer_snapshots_total{result="materialised"} 1`,
			`harness_sandboxer_ops_total{kind="collect",result="ok"} 1`,
		} {
			if !strings.Contains(string(body), want+"\n") {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("metrics lack %q", missing)
		}
		return nil
	})
	if b, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(b), "a - b") {
		t.Error("the example's workspace changed")
	}
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
