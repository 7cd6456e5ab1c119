package process

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/snapshot"
)

// startServing starts a role binary with --metrics on a free port and
// returns the URL it serves its metrics on, read from its log.
func startServing(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--metrics", "127.0.0.1:0")...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	var logged strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			logged.WriteString(line + "\n")
			if _, u, ok := strings.Cut(line, `msg="serving metrics" url=`); ok {
				urls <- u
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pw.Close()
		<-done
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), logged.String())
		}
	})
	select {
	case u := <-urls:
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not say where it serves its metrics", filepath.Base(bin))
		return ""
	}
}

// TestAcrossProcessesWithSnapshotAndMetrics carries the example's
// workspace as a snapshot to real coordinator, worker and sandboxer
// processes, each serving its metrics, brings the fix back as a patch,
// and reads the run in each role's own /metrics.
func TestAcrossProcessesWithSnapshotAndMetrics(t *testing.T) {
	bin := roleBinaries(t)
	url, c := serverAndClient(t)
	cassette := clustertest.ExampleCassette()
	env := []string{"NATS_URL=" + url}
	sandboxerURL := startServing(t, filepath.Join(bin, "sandboxer"), env, "--id", "sbp", "--snapshots", t.TempDir(), "--root", t.TempDir(), "--backends", "floor", "--allow-floor")
	workerURL := startServing(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	coordinatorURL := startServing(t, filepath.Join(bin, "coordinator"), env)

	ws := clustertest.ExampleWorkspace(t)
	ref, err := c.UploadWorkspace(t.Context(), ws, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	contract := clustertest.ExampleContract(t)
	contract.Workspace = protocol.Workspace{Snapshot: ref}
	data, err := json.Marshal(contract)
	if err != nil {
		t.Fatal(err)
	}
	run, err := clustertest.SubmitJSON(t.Context(), c, data, "across-snapshot")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(run).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Patch == nil || res.Patch.Node != "sbp" {
		t.Fatalf("run = %s (%s), patch %+v; want success with sbp's patch", res.Outcome, res.Reason, res.Patch)
	}
	_, diff, err := c.Run(run).Patch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Apply(diff, ws); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "calc.go")); !strings.Contains(string(b), "return a + b") {
		t.Errorf("calc.go after the patch:\n%s", b)
	}

	for _, tt := range []struct {
		url  string
		want []string
	}{
		{coordinatorURL, []string{`harness_coordinator_runs_finished_total{outcome="success"} 1`, `harness_coordinator_steps_total 3`}},
		{workerURL, []string{`harness_worker_turns_total{result="ok"} 3`}},
		{sandboxerURL, []string{`harness_sandboxer_snapshots_total{result="materialised"} 1`, `harness_sandboxer_ops_total{kind="collect",result="ok"} 1`,
			`harness_sandboxer_execs_total{backend="floor",result="exit_zero"} 1`}},
	} {
		var missing []string
		testkit.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			resp, err := http.Get(tt.url)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			missing = nil
			for _, w := range tt.want {
				if !strings.Contains(string(body), w+"\n") {
					missing = append(missing, w)
				}
			}
			if strings.Contains(string(body), "harness_coordinator_") != strings.HasPrefix(tt.want[0], "harness_coordinator_") {
				return fmt.Errorf("%s serves another role's metrics", tt.url)
			}
			if len(missing) > 0 {
				return fmt.Errorf("%s lacks %v", tt.url, missing)
			}
			return nil
		})
	}
}
