package harness_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// TestMicroStatsCountErrors decides an approval of a run that does not
// exist over plain NATS: the answer is the coded error, and the
// coordinator's micro stats count it among the decide endpoint's errors,
// as `nats micro stats` shows.
func TestMicroStatsCountErrors(t *testing.T) {
	cl := clustertest.Start(t, harness.Config{Roots: []string{t.TempDir()}, Provider: provider.NewScripted(), NoTakeover: true})
	nc := cl.Conn()
	m, err := nc.Request(wire.DecidePrefix+"typo-run.3.0", []byte(`{"approve": true}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Error *struct{ Name string } `json:"error"`
	}
	if json.Unmarshal(m.Data, &ans) != nil || ans.Error == nil || ans.Error.Name != "unknown_run" {
		t.Fatalf("deciding typo-run.3.0 = %s, want unknown_run", m.Data)
	}
	if m.Header.Get(micro.ErrorCodeHeader) == "" {
		t.Errorf("the error answer has no %s header", micro.ErrorCodeHeader)
	}
	subj, err := micro.ControlSubject(micro.StatsVerb, "harness-coordinator", "")
	if err != nil {
		t.Fatal(err)
	}
	// The micro service counts a request once its handler has returned,
	// after the answer is sent: the stats are asked until they count it,
	// and what they say then is the answer.
	var decide *micro.EndpointStats
	testkit.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		sm, err := nc.Request(subj, nil, 10*time.Second)
		if err != nil {
			return err
		}
		var stats micro.Stats
		if err := json.Unmarshal(sm.Data, &stats); err != nil {
			return err
		}
		i := slices.IndexFunc(stats.Endpoints, func(e *micro.EndpointStats) bool { return e.Name == "decide" })
		if i < 0 {
			return fmt.Errorf("no decide endpoint in the stats: %s", sm.Data)
		}
		if stats.Endpoints[i].NumRequests == 0 {
			return errors.New("the decide endpoint has not counted the request yet")
		}
		decide = stats.Endpoints[i]
		return nil
	})
	if decide.NumErrors != 1 || decide.NumRequests != 1 {
		t.Errorf("decide endpoint: %d requests, %d errors; want 1 and 1", decide.NumRequests, decide.NumErrors)
	}
}

// TestClusterGauges pauses a run for a person and reads the cluster-wide
// gauges a scrape reports: one run paused, one action pending, the default
// pool's queue seen.
func TestClusterGauges(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "1", Name: "write_file",
		Arguments: json.RawMessage(`{"path":"a.txt","content":"a"}`)}}})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, AllowFloor: true})
	h, err := cl.Submit(t.Context(), cancelContract(ws, &protocol.Defaults{Write: "ask"}), harness.WithRunID("gauged"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("wait = %+v, %v; want awaiting_approval", res, err)
	}
	for _, g := range []struct {
		name, label, value string
		want               float64
	}{
		{"harness_runs", "status", "paused", 1},
		{"harness_runs", "status", "running", 0},
		{"harness_approvals_pending", "", "", 1},
		{"harness_pool_queued", "pool", "default", 0},
	} {
		if got := gauge(t, cl, g.name, g.label, g.value); got != g.want {
			t.Errorf("%s{%s=%q} = %v, want %v", g.name, g.label, g.value, got, g.want)
		}
	}
}

// gauge reads one gauge of the cluster's metrics, by one label (none when
// label is "").
func gauge(t *testing.T, cl *harness.Cluster, name, label, value string) float64 {
	t.Helper()
	mfs, err := cl.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m, label, value) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}
