package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/e2e/script"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// kind is one sort of contract the suite submits.
type kind struct {
	name     string // script kind
	n        int    // its count
	maxSteps int
	refused  bool // the policy refuses the verification: no step runs
	outcome  protocol.Outcome
	steps    int
}

func (k kind) key() string { return fmt.Sprintf("%s-%d-%d-%v", k.name, k.n, k.maxSteps, k.refused) }

var (
	fix     = kind{name: "fix", maxSteps: 6, outcome: protocol.OutcomeSuccess, steps: 3}
	secret  = kind{name: "secret", maxSteps: 6, outcome: protocol.OutcomeSuccess, steps: 2}
	write3  = kind{name: "write", n: 3, maxSteps: 8, outcome: protocol.OutcomeSuccess, steps: 4}
	append3 = kind{name: "append", n: 3, maxSteps: 8, outcome: protocol.OutcomeSuccess, steps: 4}
	capped  = kind{name: "write", n: 5, maxSteps: 2, outcome: protocol.OutcomeStepCapReached, steps: 2}
	refused = kind{name: "fix", maxSteps: 6, refused: true, outcome: protocol.OutcomeRefused, steps: 0}
)

// contract is the JSON of a contract of kind k on workspace root, for pool.
func contract(k kind, root, pool string) []byte {
	verify := `{"file_contains": {"path": "result.txt", "needle": "done"}}`
	execDefault := "allow"
	if k.refused {
		verify, execDefault = `{"command": {"argv": ["rm", "-rf", "."], "expect_exit": 0}}`, "deny"
	}
	return fmt.Appendf(nil, `{"schema": "harness.contract/v1", "task": %q, "workspace": {"root": %q},
 "verification": %s,
 "policy": {"layers": [], "defaults": {"read": "allow", "write": "allow", "exec": %q, "net": "deny"}},
 "budget": {"max_steps": %d, "max_wall": "15m"}, "stall": {"window": 0},
 "provider": {"model": "e2e-model", "pool": %q}, "sandbox": {"backend": "floor", "limits": {"wall_secs": 30}}}`,
		script.Task(k.name, k.n), root, verify, execDefault, k.maxSteps, pool)
}

// newWorkspace makes a workspace under dir owned by the sandboxers' user.
func newWorkspace(t *testing.T, dir, name string) string {
	t.Helper()
	ws := filepath.Join(dir, name)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "input.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "input.txt")} {
		if err := os.Lchown(p, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// embedded records every kind's cassette on the embedded default (the
// script answering), then replays it there, and returns the cassette and
// each kind's replayed trace: what the cluster must reproduce.
func embedded(t *testing.T, dir string, kinds []kind) (*provider.Cassette, map[string][]protocol.Record) {
	t.Helper()
	rec := provider.NewRecord(provider.NewScriptedFunc(func(req *protocol.CompletionRequest, _ int) (*protocol.Turn, error) {
		return script.Turn(req), nil
	}))
	seen := map[string]bool{}
	for _, k := range kinds {
		if seen[k.key()] {
			continue
		}
		seen[k.key()] = true
		runEmbedded(t, filepath.Join(dir, "record-"+k.key()), k, rec)
	}
	cas := &provider.Cassette{Format: provider.CassetteFormat, Exchanges: rec.Exchanges()}
	replay, err := provider.NewReplay(cas)
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string][]protocol.Record{}
	for key := range seen {
		for _, k := range kinds {
			if k.key() == key {
				traces[key] = runEmbedded(t, filepath.Join(dir, "replay-"+key), k, replay)
				break
			}
		}
	}
	return cas, traces
}

func runEmbedded(t *testing.T, dir string, k kind, p provider.Provider) []protocol.Record {
	t.Helper()
	ws := newWorkspace(t, dir, "ws")
	c, err := protocol.DecodeContract(contract(k, ws, "default"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	res, err := harness.Run(t.Context(), c, harness.WithProvider(p), harness.WithDataDir(data), harness.WithRunID("embedded"))
	if err != nil {
		t.Fatalf("embedded %s: %v", k.key(), err)
	}
	if res.Outcome != k.outcome || res.Steps != k.steps {
		t.Fatalf("embedded %s: %s after %d steps (%s), want %s after %d", k.key(), res.Outcome, res.Steps, res.Reason, k.outcome, k.steps)
	}
	srv, err := harness.StartServer(data, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := harness.NewClient(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := cl.Trace(t.Context(), "embedded")
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// canonical strips what legitimately differs between two runs of the same
// cassette (as process_test.go does): times, ids and what is named after
// the run id (its tree, its ledger keys), paths, the pool, durations, the
// verification's raw output, and who served a turn.
func canonical(recs []protocol.Record) []protocol.Record {
	out := make([]protocol.Record, len(recs))
	for i, r := range recs {
		r.Time, r.Run, r.Coordinator, r.Tree = time.Time{}, "", "", ""
		draws := make([]protocol.Draw, len(r.Draws))
		for j, d := range r.Draws {
			_, d.Key, _ = strings.Cut(d.Key, ".")
			draws[j] = d
		}
		r.Draws = draws
		if r.Turn != nil {
			turn := *r.Turn
			turn.Served = ""
			r.Turn = &turn
		}
		if r.Contract != nil {
			c := *r.Contract
			c.Workspace.Root, c.Provider.Pool = "", ""
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

// events records the events the suite watches: every step and turn, with
// when the watcher heard it.
type events struct {
	mu        sync.Mutex
	turns     []time.Time
	firstStep map[string]time.Time
	steps     map[string]map[int]bool // run -> steps whose commit was announced
}

func watch(t *testing.T, c *Cluster) *events {
	t.Helper()
	ev := &events{firstStep: map[string]time.Time{}, steps: map[string]map[int]bool{}}
	nc := c.Client().Conn()
	sub, err := nc.Subscribe("harness.events.*.*", func(m *nats.Msg) {
		now := time.Now()
		var e protocol.Event
		if json.Unmarshal(m.Data, &e) != nil {
			return
		}
		ev.mu.Lock()
		defer ev.mu.Unlock()
		switch e.Kind {
		case protocol.EventTurn:
			ev.turns = append(ev.turns, now)
		case protocol.EventStep:
			if _, ok := ev.firstStep[e.Run]; !ok {
				ev.firstStep[e.Run] = now
			}
			if ev.steps[e.Run] == nil {
				ev.steps[e.Run] = map[int]bool{}
			}
			ev.steps[e.Run][e.Step] = true
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ev
}

func (ev *events) turnCount() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return len(ev.turns)
}

// rate is the turns per second heard in the window.
func (ev *events) rate(from, to time.Time) float64 {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	n := 0
	for _, at := range ev.turns {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// submit publishes contracts with the nats command line, all at once, and
// returns when each publish began.
func submit(t *testing.T, c *Cluster, user, subject string, bodies map[string][]byte) map[string]time.Time {
	t.Helper()
	var mu sync.Mutex
	at := map[string]time.Time{}
	var wg sync.WaitGroup
	for id, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			at[id] = time.Now()
			mu.Unlock()
			if out, err := c.NATS(user, "pub", subject, string(body), "-H", "Nats-Msg-Id:"+id); err != nil {
				t.Errorf("nats pub %s: %v\n%s", id, err, out)
			}
		}()
	}
	wg.Wait()
	return at
}

// traceOf reads a run's trace with `harness trace --json`.
func traceOf(t *testing.T, c *Cluster, run string) []protocol.Record {
	t.Helper()
	out, err := c.Harness("trace", "--json", run)
	if err != nil {
		t.Fatalf("harness trace %s: %v\n%s", run, err, out)
	}
	var recs []protocol.Record
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r protocol.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("harness trace %s: %v in %q", run, err, sc.Text())
		}
		recs = append(recs, r)
	}
	return recs
}

func waitRuns(t *testing.T, c *Cluster, runs []string, d time.Duration) map[string]*protocol.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	out := map[string]*protocol.Result{}
	for _, r := range runs {
		WaitFor(t, d, func() error {
			if _, err := c.Client().Status(ctx, r); err != nil {
				return fmt.Errorf("run %s: %w", r, err)
			}
			return nil
		})
		res, err := c.Client().Wait(ctx, r)
		if err != nil {
			st, _ := c.Client().Status(context.Background(), r)
			t.Fatalf("run %s did not finish: %v (status %+v)", r, err, st)
		}
		out[r] = res
	}
	return out
}

// TestCluster is the whole story on one cluster: a burst of contracts
// whose traces match the embedded default, workers scaled under load,
// containers killed and cut off and the NATS cluster restarted under
// runs, credentials refused by the server, and a teardown that leaves
// nothing behind.
func TestCluster(t *testing.T) {
	if os.Getenv("HARNESS_E2E") != "1" {
		t.Skip("builds images and runs a cluster of containers: run scripts/e2e (HARNESS_E2E=1)")
	}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatal("docker-compose is required")
	}
	start := time.Now()
	work := t.TempDir()
	wsDir, casDir := filepath.Join(work, "ws"), filepath.Join(work, "cassettes")
	for _, d := range []string{wsDir, casDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(wsDir, 65532, 65532); err != nil {
		t.Fatal(err)
	}

	// The burst: twenty contracts of six kinds.
	var burst []kind
	for _, k := range []struct {
		k kind
		n int
	}{{fix, 6}, {secret, 4}, {write3, 4}, {append3, 3}, {capped, 2}, {refused, 1}} {
		for range k.n {
			burst = append(burst, k.k)
		}
	}
	cas, want := embedded(t, filepath.Join(work, "embedded"), burst)
	if err := cas.Save(filepath.Join(casDir, "e2e.json")); err != nil {
		t.Fatal(err)
	}
	t.Logf("cassette: %d exchanges, recorded and replayed on the embedded default in %s", len(cas.Exchanges), time.Since(start).Round(time.Second))

	// TODO(workspace upload): when `harness submit --workspace DIR` lands,
	// submit the burst's workspaces through the object store instead of
	// the directory bind-mounted into both sandboxers (newWorkspace).
	c := Start(t, Options{Workers: 1, Cassettes: casDir, Workspaces: wsDir})
	t.Logf("cluster %s up in %s", c.Project, time.Since(start).Round(time.Second))
	ev := watch(t, c)
	// One run on each pool first: right after a cluster forms, a worker's
	// first pull can stall until its consumer's leader settles (see
	// docs/benchmarks.md), and the figures below are of a cluster at work.
	newWorkspace(t, wsDir, "warm-replay")
	newWorkspace(t, wsDir, "warm-default")
	submit(t, c, "admin", "harness.submit", map[string][]byte{
		"warm-replay":  contract(fix, "warm-replay", "replay"),
		"warm-default": contract(kind{name: "write", n: 1, maxSteps: 4}, "warm-default", "default")})
	waitRuns(t, c, []string{"warm-replay", "warm-default"}, 2*time.Minute)
	t.Logf("cluster serving both pools after %s", time.Since(start).Round(time.Second))

	t.Run("burst", func(t *testing.T) {
		bodies := map[string][]byte{}
		kindOf := map[string]kind{}
		for i, k := range burst {
			id := fmt.Sprintf("burst-%02d", i)
			newWorkspace(t, wsDir, id)
			bodies[id], kindOf[id] = contract(k, id, "replay"), k
		}
		at := submit(t, c, "admin", "harness.submit", bodies)
		runs := slices.Sorted(func(yield func(string) bool) {
			for id := range bodies {
				if !yield(id) {
					return
				}
			}
		})
		results := waitRuns(t, c, runs, 3*time.Minute)
		var lat []time.Duration
		for _, run := range runs {
			k, res := kindOf[run], results[run]
			if res.Outcome != k.outcome || res.Steps != k.steps {
				t.Errorf("run %s (%s): %s after %d steps (%s), want %s after %d", run, k.key(), res.Outcome, res.Steps, res.Reason, k.outcome, k.steps)
			}
			if diff := cmp.Diff(canonical(want[k.key()]), canonical(traceOf(t, c, run))); diff != "" {
				t.Errorf("run %s (%s): trace differs from the embedded default's (-embedded +cluster):\n%s", run, k.key(), diff)
			}
			ev.mu.Lock()
			if first, ok := ev.firstStep[run]; ok {
				lat = append(lat, first.Sub(at[run]))
			}
			ev.mu.Unlock()
		}
		t.Logf("REPORT burst of %d: submit-to-first-step p50 %s p99 %s", len(lat), percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond))
		// One at a time, on an idle cluster.
		lat = nil
		for i := range 10 {
			id := fmt.Sprintf("single-%02d", i)
			newWorkspace(t, wsDir, id)
			at := submit(t, c, "admin", "harness.submit", map[string][]byte{id: contract(fix, id, "replay")})
			waitRuns(t, c, []string{id}, time.Minute)
			ev.mu.Lock()
			lat = append(lat, ev.firstStep[id].Sub(at[id]))
			ev.mu.Unlock()
		}
		t.Logf("REPORT one at a time: submit-to-first-step p50 %s p99 %s", percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond))
	})

	t.Run("scale", func(t *testing.T) {
		long := kind{name: "write", n: 40, maxSteps: 45, outcome: protocol.OutcomeSuccess, steps: 41}
		bodies := map[string][]byte{}
		for i := range 16 {
			id := fmt.Sprintf("scale-%02d", i)
			newWorkspace(t, wsDir, id)
			bodies[id] = contract(long, id, "default")
		}
		submit(t, c, "admin", "harness.submit", bodies)
		measure := func(workers int) float64 {
			c.Scale("worker", workers)
			c.WaitServices(map[string]int{"harness-worker": workers + 1})
			n := ev.turnCount()
			WaitFor(t, time.Minute, func() error {
				if ev.turnCount() < n+workers*3 {
					return fmt.Errorf("turns not flowing with %d workers", workers)
				}
				return nil
			})
			from := time.Now()
			time.Sleep(8 * time.Second) // the measuring window
			r := ev.rate(from, time.Now())
			t.Logf("REPORT %d worker(s): %.1f turns/s", workers, r)
			return r
		}
		r1, r2, r4 := measure(1), measure(2), measure(4)
		if r4 < 3*r1 {
			t.Errorf("4 workers: %.1f turns/s, 1 worker: %.1f: want at least 3 times as many", r4, r1)
		}
		_ = r2
		var runs []string
		for id := range bodies {
			runs = append(runs, id)
		}
		for run, res := range waitRuns(t, c, runs, 3*time.Minute) {
			if res.Outcome != long.outcome || res.Steps != long.steps {
				t.Errorf("run %s: %s after %d steps (%s)", run, res.Outcome, res.Steps, res.Reason)
			}
		}
	})

	t.Run("faults", func(t *testing.T) {
		c.Scale("worker", 2)
		kinds := map[string]kind{}
		bodies := map[string][]byte{}
		for i := range 12 {
			k := kind{name: "append", n: 90, maxSteps: 100, outcome: protocol.OutcomeSuccess}
			if i%2 == 1 {
				k.name = "write"
			}
			id := fmt.Sprintf("fault-%02d", i)
			newWorkspace(t, wsDir, id)
			bodies[id], kinds[id] = contract(k, id, "default"), k
		}
		submit(t, c, "admin", "harness.submit", bodies)
		var runs []string
		for id := range bodies {
			runs = append(runs, id)
		}
		slices.Sort(runs)
		// Progress is read from the run index, which outlives the NATS
		// restarts that lose live events.
		steps := func() int {
			n := 0
			for _, r := range runs {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				if st, err := c.Client().Status(ctx, r); err == nil {
					n += st.Step
				}
				cancel()
			}
			return n
		}
		// after waits for more steps before the next fault; should every
		// run be done already, the fault still happens, and says so.
		after := func(more int, what string) {
			t.Helper()
			target := min(steps()+more, len(runs)*91)
			WaitFor(t, 3*time.Minute, func() error {
				if n := steps(); n < target {
					return fmt.Errorf("before %s: %d steps, waiting for %d", what, n, target)
				}
				return nil
			})
			t.Logf("%s (%s in, %d of %d steps done)", what, time.Since(start).Round(time.Second), steps(), len(runs)*91)
		}
		after(24, "SIGKILL worker 1")
		c.Kill("worker", 1)
		after(24, "SIGKILL coordinator-1")
		c.Docker("start", c.Container("worker", 1))
		c.Kill("coordinator-1", 1)
		after(24, "SIGKILL sandboxer-1")
		c.Docker("start", c.Container("coordinator-1", 1))
		c.Kill("sandboxer-1", 1)
		after(24, "sandboxer-2 off the network for 30s")
		c.Docker("start", c.Container("sandboxer-1", 1))
		sb2 := c.Container("sandboxer-2", 1)
		c.Docker("network", "disconnect", c.Network(), sb2)
		cut := time.Now()
		time.Sleep(time.Until(cut.Add(30 * time.Second)))
		c.Docker("network", "connect", c.Network(), sb2)
		after(24, "SIGKILL nats-2")
		c.Kill("nats-2", 1)
		after(24, "nats-2 back")
		c.Docker("start", c.Container("nats-2", 1))
		after(24, "the whole NATS cluster restarted")
		ids := []string{c.Container("nats-1", 1), c.Container("nats-2", 1), c.Container("nats-3", 1)}
		c.Docker(append([]string{"stop", "-t", "5"}, ids...)...)
		c.Docker(append([]string{"start"}, ids...)...)

		results := waitRuns(t, c, runs, 5*time.Minute)
		for _, run := range runs {
			res := results[run]
			k := kinds[run]
			if res.Outcome != protocol.OutcomeSuccess {
				t.Errorf("run %s: %s after %d steps (%s), want success", run, res.Outcome, res.Steps, res.Reason)
				continue
			}
			checkFaultRun(t, c, wsDir, run, k, res, ev)
		}
	})

	t.Run("credentials", func(t *testing.T) {
		// A worker's credentials may not append to the trace: the server
		// drops the publish and tells the connection, and the trace does
		// not grow.
		before := len(traceOf(t, c, "burst-00"))
		out, _ := c.NATS("worker", "pub", "harness.trace.burst-00", `{"kind":"finished"}`)
		t.Logf("nats pub harness.trace.burst-00 as the worker: %s", strings.TrimSpace(out))
		refused := make(chan error, 4)
		opts, err := streams.Auth{User: "worker", Password: c.Password("worker")}.Options()
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(c.NATSURL(), append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))...)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		_, perr := js.Publish(ctx, "harness.trace.burst-00", []byte(`{"kind":"finished"}`))
		cancel()
		select {
		case err := <-refused:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "harness.trace.burst-00") {
				t.Errorf("a worker's append to the trace: the server said %v, want a permissions violation", err)
			}
			t.Logf("a worker's append to the trace: %v (the publish: %v)", err, perr)
		case <-time.After(5 * time.Second):
			t.Errorf("a worker's append to the trace was not refused by the server (the publish: %v)", perr)
		}
		if after := len(traceOf(t, c, "burst-00")); after != before {
			t.Errorf("the trace grew from %d to %d records after a worker's append", before, after)
		}
		// A tenant may not read another tenant's events or answers.
		for _, subject := range []string{"harness.tenant.bravo.events.>", "_INBOX.bravo.>"} {
			out, _ := c.NATS("tenant-acme", "sub", subject, "--count", "1", "--wait", "3s")
			if !strings.Contains(strings.ToLower(out), "permissions violation") {
				t.Errorf("tenant acme subscribing to %s was not refused: %s", subject, out)
			}
		}
		// A tenant submits on its own subject and hears its run's events.
		newWorkspace(t, wsDir, "tenant-1")
		done := make(chan string, 1)
		go func() {
			out, _ := c.NATS("tenant-acme", "sub", "harness.tenant.acme.events.*.finished", "--count", "1", "--wait", "90s", "--raw")
			done <- out
		}()
		time.Sleep(time.Second) // the subscription is up before the publish
		out, err = c.NATS("tenant-acme", "pub", "harness.submit.acme", string(contract(fix, "tenant-1", "replay")), "-H", "Nats-Msg-Id:job-1")
		if err != nil {
			t.Fatalf("tenant submit: %v: %s", err, out)
		}
		got := <-done
		if !strings.Contains(got, `"run":"t-acme-job-1"`) || !strings.Contains(got, `"outcome":"success"`) {
			t.Errorf("tenant acme's finished event = %q", got)
		}
	})

	if dir := os.Getenv("HARNESS_E2E_CAPTURE"); dir != "" {
		capture(t, c, dir)
	}
	t.Logf("REPORT e2e took %s before teardown", time.Since(start).Round(time.Second))
}

// checkFaultRun checks a run that went through the faults: its steps
// committed once each, in order, every announced step is in the trace,
// and no command or write took effect twice.
func checkFaultRun(t *testing.T, c *Cluster, wsDir, run string, k kind, res *protocol.Result, ev *events) {
	t.Helper()
	recs := traceOf(t, c, run)
	var steps []int
	indeterminate := 0
	for _, r := range recs {
		if r.Kind != protocol.RecordStep {
			continue
		}
		steps = append(steps, r.Step)
		for _, o := range r.Observations {
			if strings.HasPrefix(o.Content, "[indeterminate]") || strings.HasPrefix(o.Content, "[tool failed]") {
				indeterminate++
			}
		}
	}
	for i, s := range steps {
		if s != i+1 {
			t.Errorf("run %s: step records %v, want 1..%d each once", run, steps, len(steps))
			break
		}
	}
	if len(steps) != res.Steps {
		t.Errorf("run %s: %d step records, result says %d steps", run, len(steps), res.Steps)
	}
	ev.mu.Lock()
	for s := range ev.steps[run] {
		if s > len(steps) {
			t.Errorf("run %s: step %d was announced committed but is not in the trace", run, s)
		}
	}
	ev.mu.Unlock()
	if k.name != "append" {
		return
	}
	data, err := os.ReadFile(filepath.Join(wsDir, run, "log.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("run %s: %s appended twice", run, l)
		}
		seen[l] = true
	}
	if len(lines) < k.n-indeterminate || len(lines) > k.n {
		t.Errorf("run %s: %d lines appended by %d commands (%d cut off)", run, len(lines), k.n, indeterminate)
	}
	if indeterminate > 0 {
		t.Logf("run %s: %d tool calls cut off by the faults and reported so", run, indeterminate)
	}
}

// capture writes what the operator's commands print on this cluster, for
// docs/operations.md.
func capture(t *testing.T, c *Cluster, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{
		{"micro", "ls"}, {"micro", "info", "harness-coordinator"}, {"micro", "stats", "harness-worker"},
		{"stream", "report"}, {"consumer", "report", "HARNESS_STEPS"}, {"consumer", "report", "HARNESS_SUBMIT"},
		{"kv", "ls", "harness-runs"}, {"kv", "get", "harness-runs", "burst-00", "--raw"}, {"kv", "ls", "harness-approvals"},
		{"kv", "status", "harness-runs"},
	}
	var b strings.Builder
	for _, cmd := range cmds {
		out, err := c.NATS("admin", cmd...)
		fmt.Fprintf(&b, "$ nats %s\n%s", strings.Join(cmd, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(exit: %v)\n", err)
		}
		b.WriteString("\n")
	}
	// A submit while the events are watched.
	newWorkspace(t, c.Workspaces, "capture")
	done := make(chan string, 1)
	go func() {
		out, _ := c.NATS("admin", "sub", "harness.events.>", "--count", "14", "--wait", "60s")
		done <- out
	}()
	time.Sleep(time.Second)
	out, _ := c.NATS("admin", "pub", "harness.submit", string(contract(fix, "capture", "replay")), "-H", "Nats-Msg-Id:capture-1")
	fmt.Fprintf(&b, "$ nats pub harness.submit \"$(cat contract.json)\" -H Nats-Msg-Id:capture-1\n%s\n", out)
	fmt.Fprintf(&b, "$ nats sub 'harness.events.>'\n%s\n", <-done)
	if err := os.WriteFile(filepath.Join(dir, "operations.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
