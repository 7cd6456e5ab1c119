package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// TestTakeoverWhoseTraceReadFailsIsTakenAgain has a coordinator take over
// a dead coordinator's run whose trace it then cannot read. The lease is
// its own by then and lives with its heartbeat, so no other coordinator
// would take the run: it takes it again itself, at every later look, and
// once the trace reads drives the run to its end.
func TestTakeoverWhoseTraceReadFailsIsTakenAgain(t *testing.T) {
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: agent})
	ctx := t.Context()
	js, assets := streamsOf(t, cl)

	// A run a coordinator now gone started, with a record after its first
	// that does not read (a trace the server cannot serve whole looks the
	// same to the reader).
	const run = "unreadable"
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Finish.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 3},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = protocol.DecodeContract(raw); err != nil {
		t.Fatal(err)
	}
	if err := trace.New(js, assets.Trace).Writer(run, 0).Append(ctx, &protocol.Record{Kind: protocol.RecordStarted, Contract: c, Coordinator: "ghost"}); err != nil {
		t.Fatal(err)
	}
	bad, err := js.Publish(ctx, trace.Subject(run), []byte(`{"format":1,"kind":`))
	if err != nil {
		t.Fatal(err)
	}
	ghost, _ := json.Marshal(map[string]any{"owner": "ghost", "generation": 1, "epoch": 1}) // no heartbeat: dead
	if _, err := assets.Leases.Put(ctx, run, ghost); err != nil {
		t.Fatal(err)
	}

	// The cluster's coordinator takes the lease, fails to read the trace,
	// and takes the lease again (generation 3) at a later look.
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		e, err := assets.Leases.Get(ctx, run)
		if err != nil {
			return err
		}
		var v struct {
			Owner      string
			Generation int
		}
		if err := json.Unmarshal(e.Value(), &v); err != nil || v.Owner == "ghost" || v.Generation < 3 {
			return fmt.Errorf("the lease has not been taken twice: %s", e.Value())
		}
		return nil
	})
	if err := assets.Trace.DeleteMsg(ctx, bad.Sequence); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := cl.Run(run).Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 1 {
		t.Errorf("run = %s after %d steps (%s), want finished after 1", res.Outcome, res.Steps, res.Reason)
	}
}

// streamsOf connects to cl as its operator and returns JetStream and the
// cluster's streams and buckets, for a test that reads or bends them.
func streamsOf(t *testing.T, cl *harness.Cluster) (jetstream.JetStream, *wire.Assets) {
	t.Helper()
	js, err := jetstream.New(testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials())))
	if err != nil {
		t.Fatal(err)
	}
	assets, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return js, assets
}

// watchAsOperator subscribes to subject on cl as its operator, the
// subscription in place on the server when it returns.
func watchAsOperator(t *testing.T, cl *harness.Cluster, subject string) *nats.Subscription {
	t.Helper()
	admin := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	sub, err := admin.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}
