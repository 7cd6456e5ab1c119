package harness_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

func TestServing(t *testing.T) {
	w := func(pools string) harness.Instance {
		return harness.Instance{Service: "harness-worker", Metadata: map[string]string{"pools": pools}}
	}
	s := func(backends string) harness.Instance {
		return harness.Instance{Service: "harness-sandboxer", Metadata: map[string]string{"backends": backends}}
	}
	for _, tt := range []struct {
		name          string
		fleet         []harness.Instance
		pool, backend string
		want          string // "" when the fleet serves the run
	}{
		{"served", []harness.Instance{w("default"), s("native,floor")}, "", "auto", ""},
		{"served by name", []harness.Instance{w("gpu,default"), s("docker")}, "gpu", "docker", ""},
		{"no worker", []harness.Instance{s("native")}, "", "", "no worker is running"},
		{"other pools", []harness.Instance{w("a"), w("b"), s("native")}, "c", "", "no worker serves pool c (the workers serve a, b)"},
		{"no sandboxer", []harness.Instance{w("default")}, "", "", "no sandboxer is running"},
		{"no such backend", []harness.Instance{w("default"), s("native")}, "", "docker", "no sandboxer has the docker backend (they have native)"},
	} {
		got := harness.Serving(tt.fleet, tt.pool, tt.backend)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: Serving = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestClusterSizes starts an embedded cluster with MaxRuns and
// Concurrency set (harness up's --max-runs and --concurrency): the
// coordinator's and the worker's status endpoints report them.
func TestClusterSizes(t *testing.T) {
	cl := clustertest.Start(t, harness.Config{Roots: []string{t.TempDir()}, Provider: provider.NewScripted(), MaxRuns: 3, Concurrency: 2})
	fleet, err := cl.Fleet(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, in := range fleet {
		var subj, key string
		switch in.Service {
		case "harness-coordinator":
			subj, key = wire.CoordinatorStatus(in.ID), "max_runs"
		case "harness-worker":
			subj, key = wire.WorkerStatus(in.ID), "concurrency"
		default:
			continue
		}
		m, err := cl.Conn().Request(subj, nil, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal(m.Data, &st); err != nil {
			t.Fatal(err)
		}
		got[key], _ = st[key].(float64)
	}
	if got["max_runs"] != 3 || got["concurrency"] != 2 {
		t.Errorf("status = %v, want max_runs 3 and concurrency 2", got)
	}
}
