package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/e2e/script"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
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

// contract is the JSON of a contract of kind k for pool, on ws: a
// snapshot's ref, or else a workspace root.
func contract(k kind, ws, pool string) []byte {
	verify := `{"file_contains": {"path": "result.txt", "needle": "done"}}`
	if k.refused {
		verify = `{"command": {"argv": ["rm", "-rf", "."], "expect_exit": 0}}`
	}
	workspace := fmt.Sprintf(`{"root": %q}`, ws)
	if protocol.ValidSnapshotRef(ws) {
		workspace = fmt.Sprintf(`{"snapshot": %q}`, ws)
	}
	return fmt.Appendf(nil, `{"schema": "harness.contract/v1", "task": %q, "workspace": %s,
 "verification": %s,
 "policy": {"layers": [{"name": "e2e", "rules": [
   {"act": "exec", "effect": "allow", "pattern": "sh"}, {"act": "exec", "effect": "allow", "pattern": "sh -c*"},
   {"act": "exec", "effect": "allow", "pattern": "wc"}, {"act": "exec", "effect": "allow", "pattern": "wc -l*"}]}],
  "defaults": {"read": "allow", "write": "allow", "exec": "deny", "net": "deny"}},
 "budget": {"max_steps": %d, "max_wall": "15m"}, "stall": {"window": 0},
 "provider": {"model": "e2e-model", "pool": %q}, "sandbox": {"backend": "floor", "limits": {"wall_secs": 30}}}`,
		script.Task(k.name, k.n), workspace, verify, k.maxSteps, pool)
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

// upload is the workspace the snapshot runs start from: the directory,
// and the archive an operator uploads of it, packed with tar and named by
// the SHA-256 of its bytes as docs/operations.md shows.
type upload struct {
	src     string // the workspace
	archive string // its gzip-compressed tar
	ref     string // "sha256-" and the archive's SHA-256: the contracts' workspace.snapshot
}

// packWorkspace makes the workspace under dir and packs it with tar.
func packWorkspace(t *testing.T, dir string) *upload {
	t.Helper()
	up := &upload{src: filepath.Join(dir, "src"), archive: filepath.Join(dir, "workspace.tgz")}
	if err := os.MkdirAll(up.src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(up.src, "input.txt"), []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "tar", "-C", up.src, "-czf", up.archive, ".")
	b, err := os.ReadFile(up.archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	up.ref = "sha256-" + hex.EncodeToString(sum[:])
	return up
}

// input is the workspace's one file.
const input = "one\ntwo\nthree\n"

// files is what a run of kind k leaves in the workspace, by the plan
// script.Turn follows: every file and its content.
func files(k kind) map[string]string {
	out := map[string]string{"input.txt": input}
	if k.refused {
		return out
	}
	switch k.name {
	case "write":
		for i := 1; i <= min(k.n, k.steps); i++ {
			out[fmt.Sprintf("notes/%03d.txt", i)] = fmt.Sprintf("note %d\n", i)
		}
	case "append":
		var b strings.Builder
		for i := 1; i <= min(k.n, k.steps); i++ {
			fmt.Fprintf(&b, "line-%03d\n", i)
		}
		out["log.txt"] = b.String()
	}
	if k.outcome == protocol.OutcomeSuccess {
		out["result.txt"] = "done\n"
	}
	return out
}

// fetch applies a run's patch, read back from the cluster with `harness
// fetch --out`, to a fresh copy of the uploaded workspace, and returns
// every file of the copy with its content.
func fetch(t *testing.T, c *Cluster, up *upload, dir, run string) map[string]string {
	t.Helper()
	to := filepath.Join(dir, run)
	if err := os.CopyFS(to, os.DirFS(up.src)); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Harness("fetch", "--out", to, run); err != nil {
		t.Errorf("harness fetch --out %s %s: %v\n%s", to, run, err, out)
	}
	got := map[string]string{}
	err := filepath.WalkDir(to, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(to, path)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// embedded records every kind's cassette on the embedded default (the
// script answering), then replays it there, each run on the uploaded
// snapshot, and returns the cassette and each kind's replayed trace: what
// the cluster must reproduce.
func embedded(t *testing.T, dir string, kinds []kind, up *upload) (*provider.Cassette, map[string][]protocol.Record) {
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
		runEmbedded(t, filepath.Join(dir, "record-"+k.key()), k, rec, up)
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
				traces[key] = runEmbedded(t, filepath.Join(dir, "replay-"+key), k, replay, up)
				break
			}
		}
	}
	return cas, traces
}

// runEmbedded runs a contract of kind k on the embedded default, on the
// snapshot up stored in its object store, and returns the run's trace.
func runEmbedded(t *testing.T, dir string, k kind, p provider.Provider, up *upload) []protocol.Record {
	t.Helper()
	roots := filepath.Join(dir, "roots") // serves no run: every run here is on the snapshot
	if err := os.MkdirAll(roots, 0o755); err != nil {
		t.Fatal(err)
	}
	// The floor is allowed, as the compose sandboxers' operator allows it
	// (compose.yaml), so the traces compare.
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: filepath.Join(dir, "data"), Provider: p, Roots: []string{roots}, NoTakeover: true,
		AllowFloor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	archive, err := os.ReadFile(up.archive)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(t.Context(), wire.BucketWorkspaces)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(t.Context(), up.ref, archive); err != nil {
		t.Fatal(err)
	}
	c, err := protocol.DecodeContract(contract(k, up.ref, "default"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("embedded"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatalf("embedded %s: %v", k.key(), err)
	}
	if res.Outcome != k.outcome || res.Steps != k.steps {
		t.Fatalf("embedded %s: %s after %d steps (%s), want %s after %d", k.key(), res.Outcome, res.Steps, res.Reason, k.outcome, k.steps)
	}
	recs, err := cl.Run("embedded").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// canonical strips what legitimately differs between two runs of the same
// cassette (as process_test.go does): times, ids and what is named after
// the run id (its tree, its ledger keys), paths, the pool, durations, the
// verification's raw output, who served a turn and which sandboxer held
// the workspace.
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
		if r.Patch != nil {
			p := *r.Patch
			p.Node = ""
			r.Patch = &p
		}
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
	// firstAsk is when each run's first request was assembled and sent
	// to the workers: its first step started.
	firstAsk map[string]time.Time
	// admitted is when each run was admitted: its lease taken, its first
	// record and its index entry written (its started event).
	admitted map[string]time.Time
	steps    map[string]map[int]bool // run -> steps whose commit was announced
}

// split returns, for the runs ids submitted at sent, the time from each
// submission to its first request, and for those whose admission was
// heard, to its admission and from there to its first request.
func (ev *events) split(ids []string, sent map[string]time.Time) (ask, admit, open []time.Duration) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, id := range ids {
		first, ok := ev.firstAsk[id]
		if ok {
			ask = append(ask, first.Sub(sent[id]))
		}
		if in, ok2 := ev.admitted[id]; ok && ok2 {
			admit, open = append(admit, in.Sub(sent[id])), append(open, first.Sub(in))
		}
	}
	return ask, admit, open
}

// phases renders what split returns for a REPORT line.
func phases(ask, admit, open []time.Duration) string {
	ms := func(xs []time.Duration, p float64) time.Duration { return percentile(xs, p).Round(time.Millisecond) }
	return fmt.Sprintf("p50 %s p99 %s (submit to admitted p50 %s p99 %s, admitted to first request p50 %s p99 %s)",
		ms(ask, 0.5), ms(ask, 0.99), ms(admit, 0.5), ms(admit, 0.99), ms(open, 0.5), ms(open, 0.99))
}

func watch(t *testing.T, c *Cluster) *events {
	t.Helper()
	ev := &events{firstStep: map[string]time.Time{}, firstAsk: map[string]time.Time{}, admitted: map[string]time.Time{}, steps: map[string]map[int]bool{}}
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
		case protocol.EventStarted:
			if _, ok := ev.admitted[e.Run]; !ok {
				ev.admitted[e.Run] = now
			}
		case protocol.EventAssembled:
			if _, ok := ev.firstAsk[e.Run]; !ok {
				ev.firstAsk[e.Run] = now
			}
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
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			pub := c.NATSCommand(ctx, user, "pub", subject, string(body), "-H", "Nats-Msg-Id:"+id)
			mu.Lock()
			at[id] = time.Now() // the nats process alone: not the docker calls finding the nodes
			mu.Unlock()
			if out, err := pub(); err != nil {
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

// waitRuns waits until each run is no longer running, reading the run
// index, and returns its result with its patch (Client.Wait). Each
// Client.Wait is bounded and begun again if it does not answer: a watch
// of the run index begun while a restarted NATS cluster elects its
// leaders can go unanswered until its context ends, and the suite says
// when that happens.
func waitRuns(t *testing.T, c *Cluster, runs []string, d time.Duration) map[string]*protocol.Result {
	t.Helper()
	deadline := time.Now().Add(d)
	out := map[string]*protocol.Result{}
	for _, r := range runs {
		testkit.CheckFor(t, time.Until(deadline), 250*time.Millisecond, func() error {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			st, err := c.Client().Run(r).Status(ctx)
			switch {
			case err != nil:
				return fmt.Errorf("run %s: %w", r, err)
			case st.Status == protocol.StatusRunning:
				return fmt.Errorf("run %s did not finish: %+v", r, st)
			}
			return nil
		})
		testkit.CheckFor(t, time.Minute, 250*time.Millisecond, func() error {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res, err := c.Client().Run(r).Wait(ctx)
			if err != nil {
				t.Logf("run %s is over, and Client.Wait did not answer within 10s: %v; waiting again", r, err)
				return err
			}
			out[r] = res
			return nil
		})
	}
	return out
}

// TestCluster is the whole story on one cluster: a workspace uploaded to
// the object store by a tenant with the nats command line, a burst of
// contracts on it whose traces match the embedded default's and whose
// patches come back, workers scaled under load, containers killed and
// cut off and the NATS cluster restarted under runs, credentials refused
// by the server, and a teardown that leaves nothing behind.
func TestCluster(t *testing.T) {
	if os.Getenv("HARNESS_E2E") != "1" {
		t.Skip("builds images and runs a cluster of containers: run scripts/e2e (HARNESS_E2E=1)")
	}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatal("docker-compose is required")
	}
	start := time.Now()
	work := t.TempDir()
	wsDir, casDir, fetched := filepath.Join(work, "ws"), filepath.Join(work, "cassettes"), filepath.Join(work, "fetched")
	for _, d := range []string{wsDir, casDir, fetched} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(wsDir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	// The runs but warm-default's and the faults phase's (on roots the
	// sandboxers serve) are on this workspace, carried as a snapshot.
	up := packWorkspace(t, filepath.Join(work, "upload"))

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
	cas, want := embedded(t, filepath.Join(work, "embedded"), burst, up)
	if err := cas.Save(filepath.Join(casDir, "e2e.json")); err != nil {
		t.Fatal(err)
	}
	// The shipped example's cassette, which the worker serving pool
	// "example" falls back to, having no key (as compose.yaml's does).
	example, err := os.ReadFile(filepath.Join("..", "examples", "fix-a-test", "cassette.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(casDir, "fix-a-test.json"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("cassette: %d exchanges, recorded and replayed on the embedded default in %s", len(cas.Exchanges), time.Since(start).Round(time.Second))

	c := Start(t, Options{Workers: 1, Cassettes: casDir, Workspaces: wsDir})
	t.Logf("cluster %s up in %s", c.Project, time.Since(start).Round(time.Second))
	ev := watch(t, c)
	// One run on each pool first: right after a cluster forms, a worker's
	// first pull can be lost while its consumer's leader is elected, and
	// is asked again only once two heartbeats are missed (4 s; see
	// docs/benchmarks.md), and the figures below are of a cluster at work.
	// One carries its workspace with `harness submit --workspace`, the
	// other works on a root the sandboxers serve.
	warm := filepath.Join(work, "warm-replay.json")
	if err := os.WriteFile(warm, contract(fix, "unused", "replay"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Harness("submit", "--workspace", up.src, "--id", "warm-replay", warm); err != nil {
		t.Fatalf("harness submit --workspace: %v\n%s", err, out)
	}
	newWorkspace(t, wsDir, "warm-default")
	submit(t, c, "admin", "harness.submit", map[string][]byte{
		"warm-default": contract(kind{name: "write", n: 1, maxSteps: 4}, "warm-default", "default")})
	waitRuns(t, c, []string{"warm-replay", "warm-default"}, 2*time.Minute)
	if diff := cmp.Diff(files(fix), fetch(t, c, up, fetched, "warm-replay")); diff != "" {
		t.Errorf("warm-replay's patch applied to the workspace (-want +got):\n%s", diff)
	}
	t.Logf("cluster serving both pools after %s", time.Since(start).Round(time.Second))

	t.Run("burst", func(t *testing.T) {
		// A tenant uploads the workspace with its own credentials, then
		// submits twenty contracts naming it, all at once.
		out, err := c.NATS("tenant-acme", "object", "put", wire.BucketWorkspaces, up.archive, "--name", up.ref, "--force")
		if err != nil {
			t.Fatalf("nats object put as tenant acme: %v\n%s", err, out)
		}
		t.Logf("nats object put harness-workspaces as tenant acme:\n%s", out)
		bodies := map[string][]byte{}
		kindOf := map[string]kind{}
		for i, k := range burst {
			id := fmt.Sprintf("burst-%02d", i)
			bodies[id], kindOf[wire.TenantRun("acme", id)] = contract(k, up.ref, "replay"), k
		}
		at := submit(t, c, "tenant-acme", "harness.submit.acme", bodies)
		runs := slices.Sorted(maps.Keys(kindOf))
		results := waitRuns(t, c, runs, 3*time.Minute)
		var lat, ask []time.Duration
		for _, run := range runs {
			k, res := kindOf[run], results[run]
			if res.Outcome != k.outcome || res.Steps != k.steps {
				t.Errorf("run %s (%s): %s after %d steps (%s), want %s after %d", run, k.key(), res.Outcome, res.Steps, res.Reason, k.outcome, k.steps)
			}
			if diff := cmp.Diff(canonical(want[k.key()]), canonical(traceOf(t, c, run))); diff != "" {
				t.Errorf("run %s (%s): trace differs from the embedded default's (-embedded +cluster):\n%s", run, k.key(), diff)
			}
			switch {
			case k.refused: // refused before its workspace was opened: nothing to collect
				if res.Patch != nil {
					t.Errorf("run %s (%s): a patch %+v from a workspace never opened", run, k.key(), res.Patch)
				}
			default:
				if diff := cmp.Diff(files(k), fetch(t, c, up, fetched, run)); diff != "" {
					t.Errorf("run %s (%s): its patch applied to the workspace (-want +got):\n%s", run, k.key(), diff)
				}
			}
			ev.mu.Lock()
			_, id, _ := strings.Cut(strings.TrimPrefix(run, "t-"), "-")
			if first, ok := ev.firstStep[run]; ok {
				lat = append(lat, first.Sub(at[id]))
			}
			if first, ok := ev.firstAsk[run]; ok {
				ask = append(ask, first.Sub(at[id]))
			}
			ev.mu.Unlock()
		}
		t.Logf("REPORT burst of %d: submit-to-first-step p50 %s p99 %s (the replayed model thinks %s a turn)", len(lat), percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond), replayDelay())
		t.Logf("REPORT burst of %d: submit-to-first-request p50 %s p99 %s", len(ask), percentile(ask, 0.5).Round(time.Millisecond), percentile(ask, 0.99).Round(time.Millisecond))
		// One at a time, on an idle cluster.
		// One at a time, from this process's own connection, so that the
		// figure starts at the publish rather than at a nats process's
		// start (the burst above goes through the command line).
		lat = nil
		var singles []string
		sent := map[string]time.Time{}
		for i := range 10 {
			id := fmt.Sprintf("single-%02d", i)
			singles, sent[id] = append(singles, id), time.Now()
			m := nats.NewMsg(wire.SubjectSubmit)
			m.Data, m.Header = contract(fix, up.ref, "replay"), nats.Header{"Nats-Msg-Id": []string{id}}
			if err := c.Client().Conn().PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			waitRuns(t, c, []string{id}, time.Minute)
			ev.mu.Lock()
			lat = append(lat, ev.firstStep[id].Sub(sent[id]))
			ev.mu.Unlock()
		}
		t.Logf("REPORT one at a time: submit-to-first-step p50 %s p99 %s (the replayed model thinks %s a turn)", percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond), replayDelay())
		ask, admit, open := ev.split(singles, sent)
		if len(ask) != len(singles) {
			t.Errorf("heard the first request of %d of the %d runs", len(ask), len(singles))
		}
		t.Logf("REPORT one at a time: submit-to-first-request %s", phases(ask, admit, open))

		// A hundred at once, from this process's own connection, each on
		// a root of its own that the sandboxers serve, each timed from its
		// own publish to its first request.
		write1 := kind{name: "write", n: 1, maxSteps: 4, outcome: protocol.OutcomeSuccess, steps: 2}
		var ids []string
		msgs := map[string]*nats.Msg{}
		for i := range 100 {
			id := fmt.Sprintf("hundred-%03d", i)
			newWorkspace(t, wsDir, id)
			m := nats.NewMsg(wire.SubjectSubmit)
			m.Data, m.Header = contract(write1, id, "default"), nats.Header{"Nats-Msg-Id": []string{id}}
			ids, msgs[id] = append(ids, id), m
		}
		sent = map[string]time.Time{}
		for _, id := range ids {
			sent[id] = time.Now()
			if err := c.Client().Conn().PublishMsg(msgs[id]); err != nil {
				t.Fatal(err)
			}
		}
		for id, res := range waitRuns(t, c, ids, 3*time.Minute) {
			if res.Outcome != write1.outcome || res.Steps != write1.steps {
				t.Errorf("run %s: %s after %d steps (%s), want %s after %d", id, res.Outcome, res.Steps, res.Reason, write1.outcome, write1.steps)
			}
		}
		ask, admit, open = ev.split(ids, sent)
		if len(ask) != len(ids) {
			t.Errorf("heard the first request of %d of the %d runs", len(ask), len(ids))
		}
		t.Logf("REPORT burst of %d from one connection: submit-to-first-request %s", len(ask), phases(ask, admit, open))

		// Every run so far has finished: each sandboxer has given back the
		// workspace of every run it served, as its micro stats say.
		testkit.CheckFor(t, time.Minute, 250*time.Millisecond, func() error {
			held := workspacesHeld(t, c)
			if len(held) != 2 {
				return fmt.Errorf("heard %d sandboxers' stats (%v), want both", len(held), held)
			}
			for id, n := range held {
				if n != 0 {
					return fmt.Errorf("sandboxer %s holds %d workspaces open with every run finished (%v)", id, n, held)
				}
			}
			return nil
		})
	})

	t.Run("scale", func(t *testing.T) {
		long := kind{name: "write", n: 40, maxSteps: 45, outcome: protocol.OutcomeSuccess, steps: 41}
		bodies := map[string][]byte{}
		for i := range 16 {
			bodies[fmt.Sprintf("scale-%02d", i)] = contract(long, up.ref, "default")
		}
		submit(t, c, "admin", "harness.submit", bodies)
		measure := func(workers int) float64 {
			c.Scale("worker", workers)
			c.WaitServices(map[string]int{"harness-worker": workers + 2})
			n := ev.turnCount()
			testkit.CheckFor(t, time.Minute, 250*time.Millisecond, func() error {
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
		runs := slices.Sorted(maps.Keys(bodies))
		for run, res := range waitRuns(t, c, runs, 3*time.Minute) {
			if res.Outcome != long.outcome || res.Steps != long.steps {
				t.Errorf("run %s: %s after %d steps (%s)", run, res.Outcome, res.Steps, res.Reason)
			}
		}
		if diff := cmp.Diff(files(long), fetch(t, c, up, fetched, runs[0])); diff != "" {
			t.Errorf("run %s: its patch applied to the workspace (-want +got):\n%s", runs[0], diff)
		}
	})

	// The faults phase works on roots both sandboxers serve, so a run
	// taken over after a fault may go on with either. A run on a snapshot
	// is tied to the sandboxer that materialised it: cut off or killed,
	// that node must come back for its runs to go on, and a coordinator
	// taking such a run over gives up on it after a minute.
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
		runs := slices.Sorted(maps.Keys(bodies))
		// Progress is read from the run index, which outlives the NATS
		// restarts that lose live events.
		steps := func() int {
			n := 0
			for _, r := range runs {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				if st, err := c.Client().Run(r).Status(ctx); err == nil {
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
			testkit.CheckFor(t, 3*time.Minute, 250*time.Millisecond, func() error {
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
		victim := wire.TenantRun("acme", "burst-00")
		subject := wire.Trace(victim)
		before := len(traceOf(t, c, victim))
		out, _ := c.NATS("worker", "pub", subject, `{"kind":"finished"}`)
		t.Logf("nats pub %s as the worker: %s", subject, strings.TrimSpace(out))
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
		_, perr := js.Publish(ctx, subject, []byte(`{"kind":"finished"}`))
		cancel()
		select {
		case err := <-refused:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
				t.Errorf("a worker's append to the trace: the server said %v, want a permissions violation", err)
			}
			t.Logf("a worker's append to the trace: %v (the publish: %v)", err, perr)
		case <-time.After(5 * time.Second):
			t.Errorf("a worker's append to the trace was not refused by the server (the publish: %v)", perr)
		}
		if after := len(traceOf(t, c, victim)); after != before {
			t.Errorf("the trace grew from %d to %d records after a worker's append", before, after)
		}
		// A tenant may not read another tenant's events or answers.
		for _, subject := range []string{"harness.tenant.bravo.events.>", "_INBOX.bravo.>"} {
			out, _ := c.NATS("tenant-acme", "sub", subject, "--count", "1", "--wait", "3s")
			if !strings.Contains(strings.ToLower(out), "permissions violation") {
				t.Errorf("tenant acme subscribing to %s was not refused: %s", subject, out)
			}
		}
		// A tenant uploads to the workspaces object store but may not read
		// it back: the server refuses the consumer a read takes. (`nats
		// object get` waits forever once refused, so the Go client asks.)
		opts, err = streams.Auth{User: "bravo", Password: c.Password("tenant-bravo")}.Options()
		if err != nil {
			t.Fatal(err)
		}
		refusedRead := make(chan error, 4)
		bnc, err := nats.Connect(c.NATSURL(), append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refusedRead <- err }))...)
		if err != nil {
			t.Fatal(err)
		}
		defer bnc.Close()
		bjs, err := jetstream.New(bnc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(t.Context(), 3*time.Second)
		obs, err := bjs.ObjectStore(ctx, wire.BucketWorkspaces)
		if err == nil {
			_, err = obs.GetBytes(ctx, up.ref)
		}
		cancel()
		select {
		case verr := <-refusedRead:
			if !errors.Is(verr, nats.ErrPermissionViolation) || err == nil {
				t.Errorf("tenant bravo reading %s: %v (the server said %v), want a permissions violation", up.ref, err, verr)
			}
			t.Logf("tenant bravo reading the object store: %v", verr)
		case <-time.After(5 * time.Second):
			t.Errorf("tenant bravo reading %s was not refused by the server (the read: %v)", up.ref, err)
		}
		// A tenant submits on its own subject and hears its run's events.
		finished := subscribe(t, c, "tenant-acme", "harness.tenant.acme.events.*.finished", "--count", "1", "--wait", "90s", "--raw")
		out, err = c.NATS("tenant-acme", "pub", "harness.submit.acme", string(contract(fix, up.ref, "replay")), "-H", "Nats-Msg-Id:job-1")
		if err != nil {
			t.Fatalf("tenant submit: %v: %s", err, out)
		}
		got := finished()
		if !strings.Contains(got, `"run":"t-acme-job-1"`) || !strings.Contains(got, `"outcome":"success"`) {
			t.Errorf("tenant acme's finished event = %q", got)
		}
		// `nats req` is answered by a coordinator with the run id (or the
		// refusal), for an operator and for a tenant in its own inboxes.
		out, err = c.NATS("admin", "req", "harness.submit", string(contract(fix, up.ref, "replay")), "-H", "Nats-Msg-Id:req-1", "--timeout", "60s")
		if err != nil || !strings.Contains(out, `"run":"req-1"`) {
			t.Errorf("nats req harness.submit: %v\n%s", err, out)
		}
		out, err = c.NATS("tenant-acme", "req", "harness.submit.acme", string(contract(fix, up.ref, "replay")), "-H", "Nats-Msg-Id:req-2", "--timeout", "60s")
		if err != nil || !strings.Contains(out, `"run":"t-acme-req-2"`) {
			t.Errorf("nats req harness.submit.acme: %v\n%s", err, out)
		}
		out, _ = c.NATS("admin", "req", "harness.submit", `{"schema":"harness.contract/v1","tusk":1}`, "--timeout", "60s")
		if !strings.Contains(out, `"unknown_field"`) {
			t.Errorf("nats req harness.submit with a bad contract:\n%s", out)
		}
	})

	t.Run("operate", func(t *testing.T) { operate(t, c, work) })

	if dir := os.Getenv("HARNESS_E2E_CAPTURE"); dir != "" {
		capture(t, c, up, dir)
	}
	t.Logf("REPORT e2e took %s before teardown", time.Since(start).Round(time.Second))
}

// workspacesHeld asks every sandboxer for its micro stats, as `nats micro
// stats harness-sandboxer` does, and returns the runs' workspaces each
// holds open, by sandboxer id.
func workspacesHeld(t *testing.T, c *Cluster) map[string]int {
	t.Helper()
	held := map[string]int{}
	err := streams.Gather(t.Context(), c.Client().Conn(), "$SRV.STATS.harness-sandboxer", 2*time.Second, func(m *nats.Msg) bool {
		var st micro.Stats
		if err := json.Unmarshal(m.Data, &st); err != nil {
			t.Errorf("a sandboxer's stats: %v: %s", err, m.Data)
			return false
		}
		for _, e := range st.Endpoints {
			var data struct {
				Workspaces *int `json:"workspaces"`
			}
			if json.Unmarshal(e.Data, &data) == nil && data.Workspaces != nil {
				held[st.Metadata["id"]+"/"+st.ID] = *data.Workspaces
			}
		}
		return len(held) == 2
	})
	if err != nil {
		t.Fatalf("ask the sandboxers for their stats: %v", err)
	}
	return held
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
func capture(t *testing.T, c *Cluster, up *upload, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{
		{"micro", "ls"}, {"micro", "info", "harness-coordinator"}, {"micro", "stats", "harness-worker"},
		{"stream", "report"}, {"consumer", "report", "HARNESS_STEPS"}, {"consumer", "report", "HARNESS_SUBMIT"},
		{"kv", "ls", "harness-runs"}, {"kv", "get", "harness-runs", "t-acme-burst-00", "--raw"}, {"kv", "ls", "harness-approvals"},
		{"kv", "status", "harness-runs"}, {"object", "ls", wire.BucketWorkspaces}, {"object", "info", wire.BucketWorkspaces, up.ref},
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
	events := subscribe(t, c, "admin", "harness.events.>", "--count", "14", "--wait", "60s")
	out, _ := c.NATS("admin", "pub", "harness.submit", string(contract(fix, up.ref, "replay")), "-H", "Nats-Msg-Id:capture-1")
	fmt.Fprintf(&b, "$ nats pub harness.submit \"$(cat contract.json)\" -H Nats-Msg-Id:capture-1\n%s\n", out)
	fmt.Fprintf(&b, "$ nats sub 'harness.events.>'\n%s\n", events())
	if err := os.WriteFile(filepath.Join(dir, "operations.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replayDelay is how long the compose cluster's replaying worker takes
// over a turn (compose.e2e.yaml's --turn-delay).
func replayDelay() string {
	if d := os.Getenv("HARNESS_E2E_DELAY"); d != "" {
		return d
	}
	return "200ms"
}
