package faults

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// faultRuns is how many runs each loop makes.
const faultRuns = 50

// faultSeed is HARNESS_FAULT_SEED, or a fresh seed.
func faultSeed(t *testing.T) uint64 {
	if s := os.Getenv("HARNESS_FAULT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HARNESS_FAULT_SEED=%q: %v", s, err)
		}
		return n
	}
	return rand.Uint64() % 1_000_000_000
}

// TestFaults runs the loops and prints what they did. It fails on any
// anomaly, and when a kill point was never reached.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a cluster of processes and kills them for minutes; run without -short")
	}
	seed := faultSeed(t)
	t.Logf("fault suite seed %d (HARNESS_FAULT_SEED=%d replays its plan)", seed, seed)
	start := time.Now()
	env := &faultEnv{seed: seed}
	var wg sync.WaitGroup
	wg.Go(func() { env.bin = clustertest.BuildRoles(t) })
	wg.Go(func() { env.natsBin = buildNATS(t) })
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	env.agentURL = startAgent(t).URL + "/v1"
	env.prices = filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(env.prices, []byte(`{"fault-model": {"input_per_million": 2000000, "output_per_million": 8000000}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the binaries in %s", time.Since(start).Round(time.Millisecond))

	var mu sync.Mutex
	var reports []*loopReport
	t.Run("loop", func(t *testing.T) {
		for i, target := range targets {
			t.Run(target, func(t *testing.T) {
				t.Parallel()
				rep := runFaultLoop(t, env, target, uint64(i))
				mu.Lock()
				reports = append(reports, rep)
				mu.Unlock()
			})
		}
	})

	// The whole suite: counts, and every point of every target exercised.
	sort.Slice(reports, func(i, j int) bool {
		return slices.Index(targets, reports[i].target) < slices.Index(targets, reports[j].target)
	})
	total := &loopReport{target: "all", kills: map[string]int{}, outcomes: map[string]int{}}
	for _, r := range reports {
		total.add(r)
	}
	t.Logf("fault suite, seed %d, %s:\n%s", seed, time.Since(start).Round(time.Second), total.String())
	for _, r := range reports {
		for _, p := range points[r.target] {
			if r.kills[r.target+"/"+string(p)] == 0 {
				t.Errorf("the %s loop never killed at %s (seed %d): the point was armed but not reached", r.target, p, seed)
			}
		}
	}
	if total.anomalies > 0 {
		t.Errorf("%d anomalies (seed %d; HARNESS_FAULT_SEED=%d replays the plan)", total.anomalies, seed, seed)
	}
}

// faultEnv is what every loop shares.
type faultEnv struct {
	seed     uint64
	bin      string // the role binaries
	natsBin  string // nats-server
	agentURL string
	prices   string
}

// buildNATS builds nats-server from the module in go.mod.
func buildNATS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/nats-io/nats-server/v2")
	cmd.Dir = clustertest.Repo(".")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("build nats-server: %v\n%s", err, out.String())
	}
	return filepath.Join(dir, "nats-server")
}

// loopReport is what one loop did.
type loopReport struct {
	target        string
	runs          int
	took          time.Duration
	kills         map[string]int // "target/point" → kills
	outcomes      map[string]int
	indeterminate int // observations saying a call was cut off
	unanswered    int // observations saying the sandboxer never answered
	again         int // changes the agent made again after looking
	looks         int // looks after an unknown outcome
	replayBranch  int // runs whose replay had to try a cut-off call both ways
	anomalies     int
	takeovers     []time.Duration
	leasesTaken   []time.Duration // coordinator killed to its run's lease taken by another
}

func (r *loopReport) add(o *loopReport) {
	r.runs += o.runs
	for k, v := range o.kills {
		r.kills[k] += v
	}
	for k, v := range o.outcomes {
		r.outcomes[k] += v
	}
	r.indeterminate += o.indeterminate
	r.unanswered += o.unanswered
	r.again += o.again
	r.looks += o.looks
	r.replayBranch += o.replayBranch
	r.anomalies += o.anomalies
	r.takeovers = append(r.takeovers, o.takeovers...)
	r.leasesTaken = append(r.leasesTaken, o.leasesTaken...)
}

func (r *loopReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  runs %d", r.runs)
	if r.took > 0 {
		fmt.Fprintf(&b, " in %s", r.took.Round(100*time.Millisecond))
	}
	n := 0
	for _, target := range targets {
		line := ""
		for _, k := range slices.Sorted(mapKeys(r.kills)) {
			if p, ok := strings.CutPrefix(k, target+"/"); ok {
				line += fmt.Sprintf(" %s %d,", p, r.kills[k])
				n += r.kills[k]
			}
		}
		if line != "" {
			fmt.Fprintf(&b, "\n  kills of %s:%s", targetName(target), strings.TrimSuffix(line, ","))
		}
	}
	fmt.Fprintf(&b, "\n  kills in all: %d\n  outcomes:", n)
	outcomes := ""
	for _, k := range slices.Sorted(mapKeys(r.outcomes)) {
		outcomes += fmt.Sprintf(" %s %d,", cmp.Or(k, "(none)"), r.outcomes[k])
	}
	b.WriteString(strings.TrimSuffix(outcomes, ","))
	fmt.Fprintf(&b, "\n  calls cut off: %d indeterminate, %d unanswered; the agent looked %d times and made %d changes again; %d replays tried a cut-off call both ways",
		r.indeterminate, r.unanswered, r.looks, r.again, r.replayBranch)
	spread := func(what string, d []time.Duration) {
		if len(d) == 0 {
			return
		}
		d = slices.Clone(d)
		slices.Sort(d)
		fmt.Fprintf(&b, "\n  takeover (coordinator killed to %s): %d runs, min %s, median %s, max %s", what,
			len(d), d[0].Round(time.Millisecond), d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	spread("its run's lease taken by another", r.leasesTaken)
	spread("its run's next record by the coordinator that took it", r.takeovers)
	fmt.Fprintf(&b, "\n  anomalies: %d", r.anomalies)
	return b.String()
}

// targetName is how the counts name a loop's target.
func targetName(target string) string {
	if target == "nats" {
		return "NATS"
	}
	return "the " + target + "s"
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// faultRun is one run of a loop.
type faultRun struct {
	id   string
	kind string // plain, ask or deny
	ws   string
}

// faultLoop is one loop: a cluster, its runs, its plan, what happened.
type faultLoop struct {
	t      *testing.T
	env    *faultEnv
	target string
	dir    string
	logs   string // the processes' logs, kept when the loop fails
	nats   *NATSServer
	client *harness.Client
	js     jetstream.JetStream
	ledger ledger.Ledger // the coordinators' shared budget ledger, in a real Redis
	sup    *Supervisor
	runs   []*faultRun
	kinds  map[string]string // run → kind

	mu        sync.Mutex
	plan      []Kill // what is left of it
	quiet     bool   // the runs are over: no more kills
	stopping  bool
	kills     map[string]int
	anomalies []string
	takeovers []time.Duration
	// leasesTaken is, for each run a killed coordinator held, how long
	// until another took its lease: the takeover itself, before the
	// interrupted step is done again.
	leasesTaken []time.Duration
	measuring   sync.WaitGroup

	// The NATS killer: the trigger it waits for and how often it has been
	// seen since the last restart.
	natsMu   sync.Mutex
	natsSeen int
	natsBusy bool
}

func (l *faultLoop) anomaly(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.anomalies = append(l.anomalies, fmt.Sprintf(format, args...))
}

func (l *faultLoop) killed(target string, p fault.Point) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kills[target+"/"+string(p)]++
}

// nextKill takes the next kill of the plan, if any is left.
func (l *faultLoop) nextKill() (Kill, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.plan) == 0 || l.quiet || l.stopping {
		return Kill{}, false
	}
	k := l.plan[0]
	l.plan = l.plan[1:]
	return k, true
}

// runFaultLoop runs one loop and checks its runs.
func runFaultLoop(t *testing.T, env *faultEnv, target string, index uint64) *loopReport {
	rng := rand.New(rand.NewPCG(env.seed, index))
	l := &faultLoop{t: t, env: env, target: target, dir: t.TempDir(), kills: map[string]int{}, kinds: map[string]string{}}
	l.logs = keptDir(t, "harness-faults-"+target+"-")
	l.plan = MakePlan(rng, target)
	var planned []string
	for _, k := range l.plan {
		planned = append(planned, k.Spec())
	}
	t.Logf("%s loop plan: %s", target, strings.Join(planned, ", "))

	// The runs, and their workspaces under one root both sandboxers serve.
	root := filepath.Join(l.dir, "ws")
	for i := range faultRuns {
		kind := "plain"
		switch r := rng.IntN(100); {
		case r < 20:
			kind = "ask"
		case r < 33:
			kind = "deny"
		}
		run := &faultRun{id: fmt.Sprintf("%s-%02d-%s", target, i, kind), kind: kind, ws: filepath.Join(root, fmt.Sprintf("r%02d", i))}
		if err := WriteTree(run.ws, agentWorkspace); err != nil {
			t.Fatal(err)
		}
		l.runs = append(l.runs, run)
		l.kinds[run.id] = kind
	}
	gaps := make([]time.Duration, faultRuns)
	for i := range gaps {
		gaps[i] = time.Duration(30+rng.IntN(170)) * time.Millisecond
	}

	var err error
	l.nats, err = StartNATS(env.natsBin, filepath.Join(l.dir, "nats"), l.logs)
	if l.nats != nil {
		t.Cleanup(l.nats.Kill)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := harness.Connect(t.Context(), l.nats.URL, nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l.client = c
	if l.js, err = jetstream.New(c.Conn()); err != nil {
		t.Fatal(err)
	}

	// The budget ledger the coordinators share: a real Redis, so a killed
	// coordinator's draws outlive it and the suite can hold the ledger's
	// totals against the traces.
	rs := redistest.Start(t)
	var closeLedger func() error
	if l.ledger, closeLedger, err = ledger.Dial(t.Context(), rs.URL(), ledger.RedisConfig{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeLedger() }()

	// The cluster. The target's processes start armed; each is started
	// again, with the next kill of the plan, whenever a kill fires.
	common := []string{"NATS_URL=" + l.nats.URL, fault.EnvVar + "="}
	var procs []*Proc
	add := func(role, name string, env []string, args ...string) {
		procs = append(procs, &Proc{Role: role, Name: name, Bin: filepath.Join(l.env.bin, role), Env: append(slices.Clone(common), env...), Args: args,
			FreshID: role == "coordinator"})
	}
	for _, n := range []string{"a", "b"} {
		add("sandboxer", "sandboxer-"+n, nil, "--id", "sandboxer-"+n, "--root", root, "--backends", "floor", "--allow-floor", "--max-concurrent", "16")
		add("worker", "worker-"+n, []string{"OPENAI_API_KEY=sk-fault", "OPENAI_BASE_URL=" + env.agentURL, "HARNESS_PROVIDERS=openai", "HARNESS_ACK_WAIT=2s"},
			"--concurrency", "8")
		add("coordinator", "coordinator-"+n, []string{"HARNESS_PRICES=" + env.prices, "REDIS_URL=" + rs.URL()})
	}
	l.sup = NewSupervisor(l.logs, l.died)
	for _, p := range procs {
		first := ""
		if p.Role == target {
			if k, ok := l.nextKill(); ok {
				first = k.Spec()
			}
		}
		l.sup.Start(p, first)
	}
	defer l.stop()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	bg.Go(func() { l.decide(ctx) })
	if target == "nats" {
		l.watchEvents(ctx)
	}

	began := time.Now()
	bg.Go(func() {
		for i, r := range l.runs {
			if err := sleep(ctx, gaps[i]); err != nil {
				return
			}
			l.submit(ctx, r)
		}
	})
	l.waitRuns(ctx, 3*time.Minute)
	took := time.Since(began)
	l.mu.Lock()
	l.quiet = true
	l.mu.Unlock()
	cancel()
	bg.Wait()
	l.measuring.Wait()
	l.natsSettled()
	l.stop()

	rep := &loopReport{target: target, runs: len(l.runs), took: took, kills: l.kills, outcomes: map[string]int{}, takeovers: l.takeovers, leasesTaken: l.leasesTaken}
	l.mu.Lock()
	for _, k := range l.plan {
		t.Logf("%s loop: the kill %s was not reached before the runs ended", target, k.Spec())
	}
	l.mu.Unlock()
	l.check(rep)
	rep.anomalies = len(l.anomalies)
	for i, a := range l.anomalies {
		if i == 40 {
			t.Errorf("... and %d more", len(l.anomalies)-i)
			break
		}
		t.Errorf("anomaly: %s", a)
	}
	t.Logf("%s loop:\n%s", target, rep.String())
	return rep
}

// submit asks for a run as `nats req` with an idempotency key would,
// again until a coordinator answers: a request lost while a process is
// killed starts nothing, and one made again under the same key starts
// nothing twice.
func (l *faultLoop) submit(ctx context.Context, r *faultRun) {
	msg := &nats.Msg{Subject: wire.SubjectSubmit, Data: faultContract(l.t, r), Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, r.id)
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := l.js.Conn().RequestMsgWithContext(rctx, msg)
		cancel()
		if err == nil {
			return
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
}

// faultContract is a run's contract: the three changes allowed, the third
// asking a person for kinds ask and deny, verified by a command that takes
// a moment so kills land during it.
func faultContract(t *testing.T, r *faultRun) []byte {
	t.Helper()
	third := "allow"
	if r.kind != "plain" {
		third = "ask"
	}
	b, err := json.Marshal(map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "Make the three changes (fault run " + r.id + ").",
		"workspace":    map[string]string{"root": r.ws},
		"verification": map[string]any{"command": map[string]any{"argv": []string{"sh", "-c", "sleep 0.2; grep -qx line-three approved.txt"}}},
		"policy": map[string]any{
			"layers": []any{map[string]any{"name": "faults", "rules": []any{
				map[string]string{"act": "write", "effect": "allow", "pattern": "log.txt"},
				map[string]string{"act": "write", "effect": third, "pattern": "approved.txt"},
				map[string]string{"act": "exec", "effect": "allow", "pattern": "sh"},
				map[string]string{"act": "exec", "effect": "allow", "pattern": "sh -c*"},
			}}},
			"defaults": map[string]string{"read": "allow", "write": "deny", "exec": "deny", "net": "deny"},
		},
		"budget":   map[string]any{"max_steps": 20},
		"provider": map[string]any{"model": "fault-model"},
		"sandbox":  map[string]any{"backend": "floor", "limits": map[string]any{"wall_secs": 3}},
		"stall":    map[string]any{"window": 0, "max_replans": 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decide answers every pending approval as the run's kind says: ask is
// approved, deny denied. In the NATS loop, an approval seen pending may
// first kill NATS.
func (l *faultLoop) decide(ctx context.Context) {
	for ctx.Err() == nil {
		_ = sleep(ctx, 150*time.Millisecond)
		aps, err := l.client.Approvals(ctx)
		if err != nil {
			continue
		}
		for _, ap := range aps {
			if ap.Pending == nil || ap.Decision != nil {
				continue
			}
			if l.target == "nats" && l.natsObserve("pause") {
				l.bounceNATS(ctx)
			}
			d := &protocol.Decision{Approve: l.kinds[ap.Pending.Run] == "ask", By: "fault-suite"}
			if !d.Approve {
				d.Reason = "the fault suite says no"
			}
			if _, err := l.client.Decide(ctx, ap.ID, d); err != nil && !errorsIsFinished(err) {
				l.t.Logf("decide %s: %v", ap.ID, err)
			}
		}
	}
}

func errorsIsFinished(err error) bool { return protocol.AsError(err).Code == protocol.CodeRunFinished }

// waitRuns waits until every run is completed or failed, or the limit
// passes (each run still going is then an anomaly).
func (l *faultLoop) waitRuns(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		states := map[string]protocol.RunState{}
		if sts, err := l.client.Runs(ctx); err == nil {
			for _, st := range sts {
				states[st.Run] = st
			}
		}
		var open []string
		for _, r := range l.runs {
			st, ok := states[r.id]
			if !ok || (st.Status != protocol.StatusCompleted && st.Status != protocol.StatusFailed) {
				open = append(open, fmt.Sprintf("%s (%s at step %d, %s)", r.id, st.Status, st.Step, st.Coordinator))
			}
		}
		if len(open) == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			l.anomaly("%d runs did not end within %s: %s", len(open), limit, strings.Join(open, ", "))
			return
		}
		_ = sleep(ctx, 250*time.Millisecond)
	}
}

// died is told of each role process's death by the supervisor, and says
// how to start it again: a planned kill is counted (and for a coordinator
// its runs' takeover timed), any other death is an anomaly; the target's
// processes are started again armed with the plan's next kill.
func (l *faultLoop) died(e Exit) (spec string, restart time.Duration) {
	switch {
	case !e.Started:
		l.anomaly("%v", e.Err)
		return "", 0
	case e.Point == "":
		l.anomaly("%s (%s) died unplanned: %v; its log is %s", e.Proc.Name, e.ID, e.Err, e.Log)
	default:
		l.killed(e.Proc.Role, e.Point)
		if e.Proc.Role == "coordinator" {
			l.measureTakeover(e.ID, e.Time)
		}
	}
	if e.Proc.Role != l.target {
		return "", 0
	}
	if k, ok := l.nextKill(); ok {
		return k.Spec(), k.Restart
	}
	return "", 0
}

// stop kills every role process and waits for their supervisors; no kill
// is taken from the plan after it.
func (l *faultLoop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	l.sup.Stop()
}

// measureTakeover times, for each unfinished run the dead coordinator
// held, how long until another coordinator appended the run's next trace
// record.
func (l *faultLoop) measureTakeover(id string, died time.Time) {
	ctx := l.t.Context()
	kv, err := l.js.KeyValue(ctx, wire.BucketLeases)
	if err != nil {
		l.t.Logf("takeover after %s: %v", id, err)
		return
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return
	}
	stream, err := l.js.Stream(ctx, trace.StreamName)
	if err != nil {
		return
	}
	for run := range keys.Keys() {
		e, err := kv.Get(ctx, run)
		if err != nil {
			continue
		}
		var lease struct{ Owner string }
		if json.Unmarshal(e.Value(), &lease) != nil || lease.Owner != id {
			continue
		}
		last, err := stream.GetLastMsgForSubject(ctx, trace.Subject(run))
		if err != nil {
			continue
		}
		var lastRec protocol.Record
		if json.Unmarshal(last.Data, &lastRec) == nil && lastRec.Kind == protocol.RecordFinished {
			continue // it died after the run's outcome, before giving up the lease: nothing is left to take over
		}
		l.measuring.Go(func() {
			deadline := time.Now().Add(2 * time.Minute)
			// taken is the time to the lease's next revision, which only
			// a take writes; takes counts the takes seen: a taker killed
			// in its turn before it recorded anything makes a second,
			// and the wait for the run's next record is then its death's
			// takeover, measured from it, not this one's.
			var taken time.Duration
			rev, takes := e.Revision(), 0
			for time.Now().Before(deadline) {
				if le, err := kv.Get(ctx, run); err == nil && le.Revision() != rev {
					if takes == 0 {
						taken = le.Created().Sub(died)
					}
					rev, takes = le.Revision(), takes+1
				}
				m, err := stream.GetLastMsgForSubject(ctx, trace.Subject(run))
				if err == nil && m.Sequence != last.Sequence {
					var rec protocol.Record
					if json.Unmarshal(m.Data, &rec) == nil && rec.Kind != protocol.RecordPaused {
						next := m.Time.Sub(died)
						if takes == 0 {
							taken = next // taken and stepped between two looks
						}
						l.mu.Lock()
						l.leasesTaken = append(l.leasesTaken, taken)
						if takes <= 1 {
							l.takeovers = append(l.takeovers, next)
						}
						l.mu.Unlock()
						if takes <= 1 && next > 6*time.Second {
							l.t.Logf("slow takeover of run %s after %s died: lease taken at %s, next record (%s, step %d) at %s; the record before it was %s of step %d",
								run, id, taken.Round(time.Millisecond), rec.Kind, rec.Step, next.Round(time.Millisecond), lastRec.Kind, lastRec.Step)
							l.t.Logf("what the processes logged of run %s:\n%s", run, l.logged(run))
						}
					}
					return
				}
				if st, err := l.client.Run(run).Status(ctx); err == nil && st.Status == protocol.StatusPaused {
					return // waiting for a person, not for a coordinator
				}
				time.Sleep(20 * time.Millisecond)
			}
			l.anomaly("run %s, held by the killed %s, was not taken over within 2 minutes", run, id)
		})
	}
}

// logged is every line of the role processes' logs that names run, each
// after the name of its log, for a takeover slow enough to look into.
func (l *faultLoop) logged(run string) string {
	logs, _ := filepath.Glob(filepath.Join(l.logs, "*.log"))
	var b strings.Builder
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, run) {
				b.WriteString(filepath.Base(f) + ": " + line)
			}
		}
	}
	return b.String()
}

// watchEvents counts the live events that trigger the NATS kills.
func (l *faultLoop) watchEvents(ctx context.Context) {
	sub, err := l.client.Conn().Subscribe(wire.EventsPrefix+">", func(m *nats.Msg) {
		kind := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		if l.natsObserve(kind) {
			go l.bounceNATS(ctx)
		}
	})
	if err != nil {
		l.t.Fatal(err)
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
}

// natsObserve counts one trigger, and reports whether it is the one the
// next NATS kill waits for.
func (l *faultLoop) natsObserve(kind string) bool {
	l.mu.Lock()
	if len(l.plan) == 0 || l.quiet || l.stopping || natsTrigger[l.plan[0].Point] != kind {
		l.mu.Unlock()
		return false
	}
	n := l.plan[0].N
	l.mu.Unlock()
	l.natsMu.Lock()
	defer l.natsMu.Unlock()
	if l.natsBusy {
		return false
	}
	l.natsSeen++
	if l.natsSeen < n {
		return false
	}
	l.natsBusy = true
	return true
}

// bounceNATS kills the NATS server with SIGKILL at the plan's next point
// and starts it again on the same store.
func (l *faultLoop) bounceNATS(ctx context.Context) {
	k, ok := l.nextKill()
	if !ok {
		return
	}
	l.nats.Kill()
	l.killed("nats", k.Point)
	_ = sleep(ctx, k.Restart)
	if err := l.nats.Start(); err != nil {
		l.t.Errorf("%v", err)
	}
	l.natsMu.Lock()
	l.natsSeen, l.natsBusy = 0, false
	l.natsMu.Unlock()
}

// natsSettled waits for a NATS restart in progress to finish.
func (l *faultLoop) natsSettled() {
	for {
		l.natsMu.Lock()
		busy := l.natsBusy
		l.natsMu.Unlock()
		if !busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keptDir makes a directory that is removed after the test, unless the
// test failed: then its path is logged, to read what is in it.
func keptDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the processes' logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
