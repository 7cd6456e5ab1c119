package coordinator

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

func TestPrunable(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	states := []protocol.RunState{
		{Run: "recent", Status: protocol.StatusCompleted, Updated: now.Add(-day)},
		{Run: "old", Status: protocol.StatusCompleted, Updated: now.Add(-40 * day)},
		{Run: "older-failed", Status: protocol.StatusFailed, Updated: now.Add(-50 * day)},
		{Run: "old-paused", Status: protocol.StatusPaused, Updated: now.Add(-90 * day)},
		{Run: "old-running", Status: protocol.StatusRunning, Updated: now.Add(-90 * day)},
		{Run: "just", Status: protocol.StatusCompleted, Updated: now.Add(-30 * day)},
	}
	got := prunable(states, now, 30*day)
	if want := []string{"older-failed", "old", "just"}; !slices.Equal(got, want) {
		t.Errorf("prunable = %v, want %v (finished at least 30 days ago, oldest first; never running or paused)", got, want)
	}
}

// TestForgetFinishedRuns puts what a finished run and a paused run leave
// behind in the real buckets and trace stream, sweeps a month and a day
// later: the finished run's trace, index entry, approvals and cancel are
// gone, the paused run's are all there.
func TestForgetFinishedRuns(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	c, err := New(nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ended := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		run    string
		status protocol.Status
	}{{"done", protocol.StatusCompleted}, {"waiting", protocol.StatusPaused}} {
		rec, _ := json.Marshal(&protocol.Record{Format: 1, Kind: protocol.RecordStarted, Run: r.run, Time: ended})
		if _, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: wire.Trace(r.run), Data: rec}); err != nil {
			t.Fatal(err)
		}
		st, _ := json.Marshal(&protocol.RunState{Run: r.run, Status: r.status, Updated: ended})
		if _, err := c.assets.Runs.Put(ctx, r.run, st); err != nil {
			t.Fatal(err)
		}
		if _, err := c.assets.Approvals.Put(ctx, r.run+".1.0", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.assets.Cancels.Put(ctx, r.run, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.pruneOnce(ctx, ended.Add(DefaultRetention+24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruneOnce = %d, %v; want 1 run forgotten", n, err)
	}
	kept := func(run string) []string {
		var have []string
		if _, err := c.assets.Trace.GetLastMsgForSubject(ctx, wire.Trace(run)); err == nil {
			have = append(have, "trace")
		}
		for name, kv := range map[string]jetstream.KeyValue{"index": c.assets.Runs, "cancel": c.assets.Cancels} {
			if _, err := kv.Get(ctx, run); err == nil {
				have = append(have, name)
			} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatal(err)
			}
		}
		if _, err := c.assets.Approvals.Get(ctx, run+".1.0"); err == nil {
			have = append(have, "approval")
		}
		slices.Sort(have)
		return have
	}
	if got := kept("done"); len(got) != 0 {
		t.Errorf("the finished run still has %v", got)
	}
	if got, want := kept("waiting"), []string{"approval", "cancel", "index", "trace"}; !slices.Equal(got, want) {
		t.Errorf("the paused run kept %v, want %v", got, want)
	}
}

// TestForgetUnusedObjects puts two blobs and two workspace objects in the
// real stores: one of each is referred to by a run that started long ago
// and still runs, the others by nothing. A sweep past the retention keeps
// the long run's, touched, and deletes the rest.
func TestForgetUnusedObjects(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	c, err := New(nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, name := range []string{"sha256-kept", "sha256-unused"} {
		if _, err := c.assets.Blobs.PutBytes(ctx, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.assets.Workspaces.PutBytes(ctx, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Add(DefaultRetention + time.Hour) // every object is older than the retention
	started := now.Add(-20 * 24 * time.Hour)
	for _, rec := range []protocol.Record{
		{Format: 1, Kind: protocol.RecordStarted, Run: "long", Time: started,
			Contract: &protocol.Contract{Workspace: protocol.Workspace{Snapshot: "sha256-kept"}}},
		{Format: 1, Kind: protocol.RecordStep, Run: "long", Step: 1, Time: started, TurnRef: "sha256-kept"},
	} {
		data, _ := json.Marshal(&rec)
		if _, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: wire.Trace("long"), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := json.Marshal(&protocol.RunState{Run: "long", Status: protocol.StatusRunning, Started: started, Updated: started})
	if _, err := c.assets.Runs.Put(ctx, "long", st); err != nil {
		t.Fatal(err)
	}
	if _, err := c.pruneOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	for store, os := range map[string]jetstream.ObjectStore{"blobs": c.assets.Blobs, "workspaces": c.assets.Workspaces} {
		if _, err := os.GetInfo(ctx, "sha256-kept"); err != nil {
			t.Errorf("%s: the long run's object is gone: %v", store, err)
		}
		if _, err := os.GetInfo(ctx, "sha256-unused"); !errors.Is(err, jetstream.ErrObjectNotFound) {
			t.Errorf("%s: the unused object is still there (%v)", store, err)
		}
	}
}
