package harness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/snapshot"
)

// scrape fetches a metrics page and returns every sample by its printed
// name and labels.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsMoveWithARun runs a real contract on an embedded cluster
// serving /metrics and checks every role's numbers moved as the run did:
// runs by outcome and steps (coordinator), turns and provider latency
// (worker), operations, commands, a cap hit and a snapshot (sandboxer). A
// second cluster in the same process keeps numbers of its own, and
// nothing lands on Prometheus's global registry.
func TestMetricsMoveWithARun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	turns := []*protocol.Turn{
		{Text: "Say hello.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5},
			ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "exec", Arguments: json.RawMessage(`{"argv":["echo","hello"]}`)}}},
		{Text: "This one takes too long.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5},
			ToolCalls: []protocol.ToolCall{{ID: "c2", Name: "exec", Arguments: json.RawMessage(`{"argv":["sleep","30"]}`)}}},
		{Text: "Write it down.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5},
			ToolCalls: []protocol.ToolCall{{ID: "c3", Name: "write_file", Arguments: json.RawMessage(`{"path":"note.txt","content":"hello\n"}`)}}},
		{Text: "Done.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5}},
	}
	cl, err := harness.Start(ctx, harness.Config{AllowFloor: true, AllowPermissive: true, DataDir: t.TempDir(), Provider: provider.NewScripted(turns...), MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	other, err := harness.Start(ctx, harness.Config{AllowFloor: true, AllowPermissive: true, DataDir: t.TempDir(), Provider: provider.NewScripted(), MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if cl.MetricsURL() == "" || cl.MetricsURL() == other.MetricsURL() {
		t.Fatalf("metrics URLs %q and %q", cl.MetricsURL(), other.MetricsURL())
	}

	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("a workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := cl.UploadWorkspace(ctx, src, snapshot.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "say hello", Workspace: protocol.Workspace{Snapshot: ref},
		Verification: protocol.Verification{None: &struct{}{}},
		Policy:       &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "deny"}},
		Sandbox:      protocol.SandboxSpec{Backend: "floor", Limits: protocol.Limits{WallSecs: 1}}}
	data, _ := json.Marshal(c)
	res, err := clustertest.RunJSON(ctx, cl, data, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
	}

	want := map[string]float64{
		`harness_coordinator_runs_started_total`:                             1,
		`harness_coordinator_runs_finished_total{outcome="finished"}`:        1,
		`harness_coordinator_runs_finished_total{outcome="success"}`:         0,
		`harness_coordinator_steps_total`:                                    float64(res.Steps),
		`harness_coordinator_step_duration_seconds_count`:                    float64(res.Steps),
		`harness_worker_turns_total{result="ok"}`:                            4,
		`harness_worker_provider_latency_seconds_count{provider="scripted"}`: 4,
		// Every task after the first extends the one before, which the
		// embedded worker, the only one, served and kept.
		`harness_worker_task_bases_total{found="kept"}`:                     3,
		`harness_worker_task_bases_total{found="asked"}`:                    0,
		`harness_sandboxer_ops_total{kind="open",result="ok"}`:              1,
		`harness_sandboxer_ops_total{kind="tool",result="ok"}`:              3,
		`harness_sandboxer_ops_total{kind="collect",result="ok"}`:           1,
		`harness_sandboxer_execs_total{backend="floor",result="exit_zero"}`: 1,
		`harness_sandboxer_execs_total{backend="floor",result="cap_hit"}`:   1,
		`harness_sandboxer_cap_hits_total{backend="floor",cap="wall"}`:      1,
		`harness_sandboxer_exec_duration_seconds_count{backend="floor"}`:    2,
		`harness_sandboxer_snapshots_total{result="materialised"}`:          1,
		`harness_sandboxer_snapshots_total{result="refused"}`:               0,
	}
	// A role counts once it has done its part, which may be a moment
	// after the result is out (a worker counts its turn once it is
	// published): scrape until the numbers settle.
	var m map[string]float64
	var wrong []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		m, wrong = scrape(t, cl.MetricsURL()), nil
		for name, v := range want {
			if got, ok := m[name]; !ok || got != v {
				wrong = append(wrong, fmt.Sprintf("%s = %v (present %v), want %v", name, got, ok, v))
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range wrong {
		t.Error(w)
	}
	if res.Steps < 3 {
		t.Errorf("steps = %d, want at least 3", res.Steps)
	}
	if _, ok := m["process_cpu_seconds_total"]; !ok {
		t.Error("the process's metrics are not served")
	}
	for name := range m {
		if strings.Contains(name, res.Run) || strings.Contains(name, ref) {
			t.Errorf("a run id or ref became a label: %s", name)
		}
	}
	// The other cluster in this process counted nothing of it.
	if o := scrape(t, other.MetricsURL()); o[`harness_coordinator_runs_finished_total{outcome="finished"}`] != 0 || o[`harness_worker_turns_total{result="ok"}`] != 0 {
		t.Errorf("another cluster's metrics moved with this run: %v", o[`harness_worker_turns_total{result="ok"}`])
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "harness_") {
			t.Errorf("%s is on Prometheus's global registry", mf.GetName())
		}
	}
}
