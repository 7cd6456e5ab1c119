package harness_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
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
	sm, err := nc.Request(subj, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(sm.Data, &stats); err != nil {
		t.Fatal(err)
	}
	for _, e := range stats.Endpoints {
		if e.Name == "decide" {
			if e.NumErrors != 1 || e.NumRequests != 1 {
				t.Errorf("decide endpoint: %d requests, %d errors; want 1 and 1", e.NumRequests, e.NumErrors)
			}
			return
		}
	}
	t.Fatalf("no decide endpoint in the stats: %s", sm.Data)
}
