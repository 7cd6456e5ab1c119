package process

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// slowContract is the example with a verification that takes a moment, so
// a test can kill a process in the middle of a run.
func slowContract(t *testing.T, root string) []byte {
	t.Helper()
	c := map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "The test suite of this Go module fails. Find out why and fix the code, not the test.",
		"workspace":    map[string]string{"root": root},
		"verification": map[string]any{"command": map[string]any{"argv": []string{"sh", "-c", "sleep 0.7; grep -q 'a + b' calc.go"}}},
		"policy": map[string]any{"layers": []any{map[string]any{"name": "t", "rules": []any{
			map[string]string{"act": "write", "effect": "allow", "pattern": "*.go"},
			map[string]string{"act": "exec", "effect": "allow", "pattern": "sh"},
			map[string]string{"act": "exec", "effect": "allow", "pattern": "sh -c*"},
		}}}},
		"budget": map[string]any{"max_steps": 6},
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordSlow records the scripted example agent against the slow contract
// (whose requests do not depend on the workspace's path) and returns the
// cassette's path.
func recordSlow(t *testing.T) string {
	t.Helper()
	ws := clustertest.ExampleWorkspace(t)
	var c protocol.Contract
	if err := json.Unmarshal(slowContract(t, ws), &c); err != nil {
		t.Fatal(err)
	}
	rec := provider.NewRecord(provider.NewScripted(clustertest.ExampleTurns()...))
	res, err := harness.Run(t.Context(), &c, harness.WithProvider(rec), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir()))
	if err != nil || res.Outcome != protocol.OutcomeSuccess {
		t.Fatalf("recording the slow example: %v %+v", err, res)
	}
	return saveCassette(t, rec)
}

// TestResumeAfterSIGKILL kills a real `harness run` process after its first
// committed step and resumes the run from the same data directory: it
// reaches success, every step is in the trace once, and the edit landed
// once.
//
// The kill lands in step 2, once its reads are answered and its
// verification runs (0.7 s): a read is run again when asked again, so the
// resumed run replays step 2 as recorded. A kill in step 3 could fall
// between the edit's journal records, and the edit would be reported
// indeterminate, as it should; but a recorded model has no answer for
// that.
func TestResumeAfterSIGKILL(t *testing.T) {
	bin := roleBinaries(t)
	cassette := recordSlow(t)
	ws := clustertest.ExampleWorkspace(t)
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, slowContract(t, ws), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "harness"), "run", "--data", data, "--replay", cassette, "--id", "killed", "--root", ws, contract)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("harness run:\n%s", out.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var c *harness.Client
	testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() (err error) {
		c, err = clientVia(t, data)
		return err
	})
	defer c.Close()
	inStep2, late := make(chan struct{}), make(chan int, 1)
	var once sync.Once
	stop, err := c.Run("killed").Watch(func(ev *protocol.Event) {
		switch {
		case ev.Kind == protocol.EventObserved && ev.Step == 2:
			once.Do(func() { close(inStep2) })
		case ev.Step > 2:
			select {
			case late <- ev.Step:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-inStep2:
	case step := <-late:
		t.Fatalf("heard step %d before step 2's reads: the watch began too late to kill the run in step 2", step)
	case <-time.After(time.Minute):
		t.Fatal("step 2's reads were never answered")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	replay, err := provider.LoadReplay(cassette)
	if err != nil {
		t.Fatal(err)
	}
	res, err := harness.Resume(t.Context(), "killed", harness.WithProvider(replay), harness.WithAllowFloor(), harness.WithDataDir(data))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 {
		for _, r := range clustertest.ReadTrace(t, data, "killed") {
			b, _ := json.Marshal(r)
			t.Logf("%s", b)
		}
		t.Fatalf("resumed run = %s after %d (%s), want success after 3", res.Outcome, res.Steps, res.Reason)
	}
	recs := clustertest.ReadTrace(t, data, "killed")
	clustertest.CheckTrace(t, recs, res)
	code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
	if err != nil || strings.Count(string(code), "return a + b") != 1 {
		t.Errorf("calc.go = %q, want the fix applied once", code)
	}
	// Resuming a finished run reports it without calling the provider.
	again, err := harness.Resume(t.Context(), "killed", harness.WithProvider(provider.NewScripted()), harness.WithAllowFloor(), harness.WithDataDir(data))
	if err != nil || again.Outcome != protocol.OutcomeSuccess {
		t.Errorf("resume of a finished run = %+v, %v", again, err)
	}
}

// TestTakeoverAfterCoordinatorDies kills the coordinator process driving a
// run; another coordinator notices its lease ran out and carries the run to
// its outcome with no one asking.
func TestTakeoverAfterCoordinatorDies(t *testing.T) {
	bin := roleBinaries(t)
	cassette := recordSlow(t)
	url, c := serverAndClient(t)
	ws := clustertest.ExampleWorkspace(t)
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	first := startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "first")
	if _, err := clustertest.SubmitJSON(t.Context(), c, slowContract(t, ws), "taken-over"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitStep(t, c, "taken-over", 1)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	startProcess(t, filepath.Join(bin, "coordinator"), env, "--id", "second")
	res, err := c.Run("taken-over").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coordinator killed to run finished: %v", time.Since(killed).Round(time.Millisecond))
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 {
		t.Fatalf("taken-over run = %s after %d (%s), want success after 3", res.Outcome, res.Steps, res.Reason)
	}
	recs, err := c.Run("taken-over").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckTrace(t, recs, res)
	st, err := c.Run("taken-over").Status(t.Context())
	if err != nil || st.Coordinator != "second" {
		t.Errorf("the run finished under %q (%v), want the second coordinator", st.Coordinator, err)
	}
}

// clientVia connects to the harness process serving data.
func clientVia(t *testing.T, data string) (*harness.Client, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "server.json"))
	if err != nil {
		return nil, err
	}
	var s struct{ URL, Socket, User, Password string }
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.Socket != "" { // harness run: no port, a socket
		return harness.DialSocket(t.Context(), s.Socket, s.User, s.Password, nats.MaxReconnects(0))
	}
	return harness.Connect(t.Context(), s.URL, nats.MaxReconnects(0), nats.UserInfo(s.User, s.Password))
}

// TestNATSRestartMidRun restarts the NATS server, on the same store, under
// a run driven by separate coordinator, worker and sandboxer processes:
// they reconnect on their own and the run reaches its outcome with every
// step once.
func TestNATSRestartMidRun(t *testing.T) {
	bin := roleBinaries(t)
	cassette := recordSlow(t)
	store := t.TempDir()
	inStore := func(o *server.Options) { o.StoreDir = store }
	srv := testkit.NATS(t, testkit.Listen, durable, inStore)
	addr := srv.Addr().(*net.TCPAddr)
	url := srv.ClientURL()
	c, err := harness.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := clustertest.ExampleWorkspace(t)
	env := []string{"NATS_URL=" + url}
	startProcess(t, filepath.Join(bin, "sandboxer"), env, "--root", ws)
	startProcess(t, filepath.Join(bin, "worker"), env, "--replay", cassette)
	startProcess(t, filepath.Join(bin, "coordinator"), env)
	if _, err := clustertest.SubmitJSON(t.Context(), c, slowContract(t, ws), "through-restart"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitStep(t, c, "through-restart", 1)
	srv.Shutdown()
	srv.WaitForShutdown()
	testkit.NATS(t, durable, inStore, func(o *server.Options) { o.DontListen, o.Host, o.Port = false, addr.IP.String(), addr.Port })
	res, err := c.Run("through-restart").Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeSuccess || res.Steps != 3 {
		t.Fatalf("run through a NATS restart = %s after %d (%s), want success after 3", res.Outcome, res.Steps, res.Reason)
	}
	recs, err := c.Run("through-restart").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.CheckTrace(t, recs, res)
}
