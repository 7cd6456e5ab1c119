package harness_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// buildRoles builds the real role binaries once per test binary.
func buildRoles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/coordinator", "./cmd/worker", "./cmd/sandboxer", "./cmd/harness")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("build the role binaries: %v\n%s", err, out.String())
	}
	return dir
}

// serverAndClient starts a NATS server with JetStream in this process, on
// a loopback port the role processes can dial, and a client of it; both
// end with the test. It returns the server's URL and the client.
func serverAndClient(t *testing.T) (string, *harness.Client) {
	t.Helper()
	srv, err := startServer(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c, err := harness.Connect(t.Context(), srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv.ClientURL(), c
}

// startProcess starts a role binary and kills it at the end of the test.
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
	if testing.Short() {
		t.Skip("builds and starts the role binaries; run without -short")
	}
	bin := buildRoles(t)
	srv, err := startServer(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	ws := copyDir(t, "examples/fix-a-test/workspace")
	cassette, err := filepath.Abs("examples/fix-a-test/cassette.json")
	if err != nil {
		t.Fatal(err)
	}
	// The client creates the streams, so the raw publish below is stored
	// even if no role has connected yet.
	c, err := harness.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws, "--backends", "floor", "--allow-floor") // as the one-process run above
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	startProcess(t, filepath.Join(bin, "coordinator"), env)

	raw, err := os.ReadFile("examples/fix-a-test/contract.json")
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
	waitFor(t, 30*time.Second, func() error {
		runs, err := c.Runs(t.Context())
		if err != nil {
			return err
		}
		if len(runs) != 1 {
			return errorf("%d runs in the index", len(runs))
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
	replay, err := provider.LoadReplay(cassette)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if _, err := harness.Run(t.Context(), exampleContract(t), harness.WithProvider(replay), harness.WithAllowFloor(), harness.WithDataDir(data),
		harness.WithRunID("single")); err != nil {
		t.Fatal(err)
	}
	single := readTrace(t, data, "single")
	if diff := cmp.Diff(canonical(single), canonical(distributed)); diff != "" {
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

// canonical strips what legitimately differs between two runs of the same
// cassette: times, ids, paths, durations and the verification's raw output.
func canonical(recs []protocol.Record) []protocol.Record {
	out := make([]protocol.Record, len(recs))
	for i, r := range recs {
		if r.Tree == r.Run {
			r.Tree = "" // a root's tree is its own id
		}
		if len(r.Draws) > 0 {
			draws := make([]protocol.Draw, len(r.Draws))
			for j, d := range r.Draws {
				d.Key = strings.TrimPrefix(d.Key, r.Run) // run.step.attempt
				draws[j] = d
			}
			r.Draws = draws
		}
		r.Time, r.Run, r.Coordinator = time.Time{}, "", ""
		if r.Turn != nil {
			turn := *r.Turn
			turn.Served = "" // who served differs between a recording and its replay
			r.Turn = &turn
		}
		if r.Contract != nil {
			c := *r.Contract
			c.Workspace.Root = ""
			r.Contract = &c
		}
		if r.Check != nil {
			ch := *r.Check
			ch.Output = ""
			if ch.Exec != nil {
				e := *ch.Exec
				e.DurationMS = 0
				ch.Exec = &e
			}
			r.Check = &ch
		}
		obs := make([]protocol.Observation, len(r.Observations))
		for j, o := range r.Observations {
			if o.Exec != nil {
				e := *o.Exec
				e.DurationMS = 0
				o.Exec = &e
			}
			obs[j] = o
		}
		r.Observations = obs
		out[i] = r
	}
	return out
}

// waitFor polls f until it returns nil or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// startServer starts a NATS server with JetStream on dir, syncing every
// write, listening on listen (host:port, port 0 for a free one) with no
// authentication, as a cluster's server for role processes.
func startServer(dir, listen string) (*server.Server, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{JetStream: true, StoreDir: filepath.Join(dir, "jetstream"), SyncAlways: true,
		Host: host, Port: p, NoLog: true, NoSigs: true, MaxPayload: 8 << 20})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server did not become ready in 10s")
	}
	return srv, nil
}
