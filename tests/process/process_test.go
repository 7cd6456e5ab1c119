package process

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// roleBinaries skips t under -short, since it builds and runs the role
// binaries, and builds them.
func roleBinaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts the role binaries; run without -short")
	}
	return clustertest.BuildRoles(t)
}

// saveCassette saves what rec recorded to a fresh file of the test and
// returns its path, for a worker or harness process to replay.
func saveCassette(t *testing.T, rec *provider.Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cassette.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// durable makes an embedded NATS server a cluster's server for role
// processes: every write synced, messages up to 8 MiB.
func durable(o *server.Options) { o.SyncAlways, o.MaxPayload = true, 8<<20 }

// serverAndClient starts a NATS server with JetStream in this process, on
// a loopback port the role processes can dial, and a client of it; both
// end with the test. It returns the server's URL and the client.
func serverAndClient(t *testing.T) (string, *harness.Client) {
	t.Helper()
	srv := testkit.NATS(t, testkit.Listen, durable)
	c, err := harness.Connect(t.Context(), srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv.ClientURL(), c
}

// startProcess starts a role binary and kills it at the end of the test,
// logging its output if the test failed.
func startProcess(t *testing.T, bin string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// A sandboxer's native sandboxes reuse this user's Go build cache,
	// read-only, as harness run's do.
	cmd.Env = append(append(os.Environ(), "HARNESS_GO_CACHE="+backends.UserGoCache(os.Getenv)), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	return cmd
}

// TestAcrossProcesses runs the example on real coordinator, worker and
// sandboxer processes against a NATS server, submitted with a raw publish
// as `nats pub harness.submit` would, and checks it reaches the same
// outcome and the same trace as the single-process run.
func TestAcrossProcesses(t *testing.T) {
	bin := roleBinaries(t)
	// The client creates the streams, so the raw publish below is stored
	// even if no role has connected yet.
	url, c := serverAndClient(t)
	ws := clustertest.ExampleWorkspace(t)
	cassette := clustertest.ExampleCassette()
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws, "--backends", "floor", "--allow-floor") // as the one-process run below
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	startProcess(t, filepath.Join(bin, "coordinator"), env)

	raw, err := os.ReadFile(clustertest.Repo("examples/fix-a-test/contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"root": "workspace"`), []byte(`"root": "`+ws+`"`), 1)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish("harness.submit", raw); err != nil { // as `nats pub` does
		t.Fatal(err)
	}
	var run string
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		runs, err := c.Runs(t.Context())
		if err != nil {
			return err
		}
		if len(runs) != 1 {
			return fmt.Errorf("%d runs in the index", len(runs))
		}
		run = runs[0].Run
		return nil
	})
	res, err := c.Run(run).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 {
		t.Fatalf("across processes: %s after %d steps (%s), want success after 3", res.Outcome, res.Steps, res.Reason)
	}
	distributed, err := c.Run(run).Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// Every role registered its micro service, as `nats micro ls` shows.
	if got := services(t, nc); !cmp.Equal(got, []string{"harness-coordinator", "harness-sandboxer", "harness-worker"}) {
		t.Errorf("micro services answering $SRV.PING = %v, want the three roles", got)
	}

	// The same cassette in one process.
	data := t.TempDir()
	if _, err := harness.Run(t.Context(), clustertest.ExampleContract(t), harness.WithProvider(clustertest.ExampleReplay(t)), harness.WithAllowFloor(),
		harness.WithDataDir(data), harness.WithRunID("single")); err != nil {
		t.Fatal(err)
	}
	single := clustertest.ReadTrace(t, data, "single")
	if diff := cmp.Diff(clustertest.Canonical(single), clustertest.Canonical(distributed)); diff != "" {
		t.Errorf("traces differ (-one process +across processes):\n%s", diff)
	}
}

// services returns the sorted names of the micro services that answer a
// ping, as `nats micro ls` lists them.
func services(t *testing.T, nc *nats.Conn) []string {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		var ping struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(m.Data, &ping) == nil {
			names = append(names, ping.Name)
		}
	}
	slices.Sort(names)
	return names
}
