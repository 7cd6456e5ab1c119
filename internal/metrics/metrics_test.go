package metrics_test

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/pkg/protocol"
)

// scrape fetches url and returns every sample by its printed name and
// labels, such as `harness_worker_turns_total{result="ok"}`.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
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

func TestRolesOnOwnRegistriesServedTogether(t *testing.T) {
	co, wk, sb := prometheus.NewRegistry(), prometheus.NewRegistry(), prometheus.NewRegistry()
	c := metrics.NewCoordinator(co)
	w := metrics.NewWorker(wk, func() float64 { return 2 })
	s := metrics.NewSandboxer(sb, func() float64 { return 1 })
	srv, err := metrics.Listen("127.0.0.1:0", prometheus.Gatherers{co, wk, sb, metrics.NewProcessRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	before := scrape(t, srv.URL())
	for name, want := range map[string]float64{
		`harness_coordinator_runs_finished_total{outcome="success"}`: 0,
		`harness_coordinator_ledger_draws_total{result="refused"}`:   0,
		`harness_worker_turns_total{result="ok"}`:                    0,
		`harness_worker_turns_inflight`:                              2,
		`harness_sandboxer_ops_total{kind="tool",result="ok"}`:       0,
		`harness_sandboxer_workspaces_open`:                          1,
	} {
		if got, ok := before[name]; !ok || got != want {
			t.Errorf("before: %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if _, ok := before["go_goroutines"]; !ok {
		t.Error("the process's metrics are not served")
	}

	c.RunStarted()
	c.RunFinished(protocol.OutcomeSuccess)
	c.RunFinished("made-up")
	c.Step(1500 * time.Millisecond)
	c.LedgerDraw(metrics.DrawSettled)
	c.LedgerDraw(metrics.DrawRefused)
	c.LedgerRefusal(metrics.BudgetCost)
	c.LedgerDraw("run-20261129-abc") // never a label of its own
	w.Turn(nil)
	w.Provider("openai", 200*time.Millisecond, nil)
	slow := protocol.Errorf(protocol.CodeRateLimited, "slow down")
	w.Turn(slow)
	w.Provider("openai", 100*time.Millisecond, slow)
	odd := protocol.Errorf(protocol.Code(9999), "x")
	w.Turn(odd)
	w.Provider("sk-secret key with spaces", time.Millisecond, odd)
	s.Op(protocol.OpTool, false)
	s.Op("rm -rf /", true)
	s.Exec("floor", &protocol.ExecReport{Backend: "floor", Exited: true, ExitCode: 0, DurationMS: 12})
	s.Exec("floor", &protocol.ExecReport{Backend: "floor", Exited: false, ExitCode: -1, CapHit: "wall", DurationMS: 1000})
	s.Exec("native", nil)
	s.Snapshot(false)

	after := scrape(t, srv.URL())
	for name, want := range map[string]float64{
		`harness_coordinator_runs_started_total`:                                        0 + 1,
		`harness_coordinator_runs_finished_total{outcome="success"}`:                    1,
		`harness_coordinator_runs_finished_total{outcome="other"}`:                      1,
		`harness_coordinator_steps_total`:                                               1,
		`harness_coordinator_step_duration_seconds_count`:                               1,
		`harness_coordinator_step_duration_seconds_sum`:                                 1.5,
		`harness_coordinator_ledger_draws_total{result="settled"}`:                      1,
		`harness_coordinator_ledger_draws_total{result="refused"}`:                      1,
		`harness_coordinator_ledger_draws_total{result="other"}`:                        1,
		`harness_coordinator_ledger_refusals_total{budget="cost"}`:                      1,
		`harness_worker_turns_total{result="ok"}`:                                       1,
		`harness_worker_turns_total{result="rate_limited"}`:                             1,
		`harness_worker_turns_total{result="other"}`:                                    1,
		`harness_worker_provider_failures_total{code="rate_limited",provider="openai"}`: 1,
		`harness_worker_provider_failures_total{code="other",provider="other"}`:         1,
		`harness_worker_provider_latency_seconds_count{provider="openai"}`:              2,
		`harness_sandboxer_ops_total{kind="tool",result="ok"}`:                          1,
		`harness_sandboxer_ops_total{kind="other",result="error"}`:                      1,
		`harness_sandboxer_execs_total{backend="floor",result="exit_zero"}`:             1,
		`harness_sandboxer_execs_total{backend="floor",result="cap_hit"}`:               1,
		`harness_sandboxer_execs_total{backend="native",result="not_started"}`:          1,
		`harness_sandboxer_cap_hits_total{backend="floor",cap="wall"}`:                  1,
		`harness_sandboxer_exec_duration_seconds_count{backend="floor"}`:                2,
		`harness_sandboxer_snapshots_total{result="materialised"}`:                      1,
	} {
		if got := after[name]; got != want {
			t.Errorf("after: %s = %v, want %v", name, got, want)
		}
	}
	for name := range after {
		if strings.Contains(name, "sk-secret") || strings.Contains(name, "run-2026") || strings.Contains(name, "rm -rf") {
			t.Errorf("a value from outside the label's set became a label: %s", name)
		}
	}
}

func TestNilIsANoOp(t *testing.T) {
	var c *metrics.Coordinator
	var w *metrics.Worker
	var s *metrics.Sandboxer
	c.RunStarted()
	c.RunFinished(protocol.OutcomeSuccess)
	c.Step(time.Second)
	c.LedgerDraw(metrics.DrawSettled)
	c.LedgerRefusal(metrics.BudgetTokens)
	w.Turn(nil)
	w.Provider("x", time.Second, nil)
	s.Op("tool", false)
	s.Exec("floor", nil)
	s.Snapshot(true)
}

// TestSameRoleTwiceOnOneRegistry shares the counters instead of failing.
func TestSameRoleTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := metrics.NewCoordinator(reg), metrics.NewCoordinator(reg)
	a.RunStarted()
	b.RunStarted()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "harness_coordinator_runs_started_total" {
			if got := mf.GetMetric()[0].GetCounter().GetValue(); got != 2 {
				t.Errorf("runs started = %v, want 2", got)
			}
			return
		}
	}
	t.Error("runs_started_total not gathered")
}

func TestServeRole(t *testing.T) {
	srv, err := metrics.ServeRole("", prometheus.NewRegistry())
	if srv != nil || err != nil {
		t.Fatalf("ServeRole(\"\") = %v, %v; want nothing served", srv, err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close of no server = %v", err)
	}
	reg := prometheus.NewRegistry()
	metrics.NewWorker(reg, nil).Turn(nil)
	if srv, err = metrics.ServeRole("127.0.0.1:0", reg); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m := scrape(t, srv.URL())
	if m[`harness_worker_turns_total{result="ok"}`] != 1 {
		t.Errorf("role metric not served: %v", m[`harness_worker_turns_total{result="ok"}`])
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Error("process metrics not served beside the role's")
	}
	if _, err := metrics.ServeRole(strings.TrimPrefix(srv.URL(), "http://")[:len(srv.Addr())], reg); err == nil {
		t.Error("a second server on a taken address started")
	}
}
