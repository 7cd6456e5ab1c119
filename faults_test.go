package harness_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
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
	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// The fault-injection suite (issue 6). For each role, and for NATS itself,
// a loop of faultRuns runs goes through a cluster of real processes (a
// nats-server built from the module, two coordinators, two workers, two
// sandboxers) while the loop's target is killed with SIGKILL again and
// again at named points (internal/fault), chosen with their timing from
// one seed, and restarted. The runs overlap: they are submitted a little
// apart and all run at once, so each kill lands among many of them.
//
// The agent is faults_agent_test.go's: three changes, each visible if it
// lands twice, and a careful look when a call's outcome is unknown. A
// third of the runs ask a person before the third change (approved or
// denied by the suite), so the approval path is killed too.
//
// After each loop, for every run: it reached its expected outcome; its
// workspace holds each change exactly once; its trace numbers its steps
// 1, 2, 3... with none repeated and ends with one finished record; the
// tokens and cost in its status are the sum over its committed steps
// (checkSpend adds the ledger's totals); and the trace, replayed from the
// start into a fresh copy of the workspace, reproduces the final workspace
// and the recorded outcome (see replayExplains for what replaying means
// when a call was cut off).
//
// Kills of NATS are triggered from outside, through the live events (the
// k-th turn, observation, check or step event seen) and the approvals the
// suite sees pending, so they land just after the point they are named
// for.
//
// HARNESS_FAULT_SEED=N replays a seed's plan: the same kinds of runs, kill
// points, counts, delays and restart pauses. The interleaving of 50 runs
// on real processes differs from one replay to the next, so a failure may
// take a few replays to show again.
const faultRuns = 50

// faultTargets are what the loops kill, one loop each.
var faultTargets = []string{"coordinator", "worker", "sandboxer", "nats"}

// faultPoints are the points each target is killed at, each at least once
// per loop.
var faultPoints = map[string][]fault.Point{
	"coordinator": {fault.BeforeCommit, fault.AfterCommit, fault.DuringVerification, fault.DuringApprovalPause},
	"worker":      {fault.BeforeProviderCall, fault.AfterTurnPublished},
	"sandboxer":   {fault.AfterToolEffect, fault.DuringVerification},
	"nats":        {fault.AfterTurnPublished, fault.AfterToolEffect, fault.BeforeCommit, fault.AfterCommit, fault.DuringApprovalPause},
}

// killsPerLoop is how many kills each loop plans.
var killsPerLoop = map[string]int{"coordinator": 6, "worker": 6, "sandboxer": 5, "nats": 5}

// natsTrigger is what is seen from outside when a NATS kill point is
// reached: the live event right after it, or "pause" for an approval the
// suite sees pending.
var natsTrigger = map[fault.Point]string{
	fault.AfterTurnPublished:  protocol.EventTurn,
	fault.AfterToolEffect:     protocol.EventObserved,
	fault.BeforeCommit:        protocol.EventCheck,
	fault.AfterCommit:         protocol.EventStep,
	fault.DuringApprovalPause: "pause",
}

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
	wg.Go(func() { env.bin = buildRoles(t) })
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
		for i, target := range faultTargets {
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
		return slices.Index(faultTargets, reports[i].target) < slices.Index(faultTargets, reports[j].target)
	})
	total := &loopReport{target: "all", kills: map[string]int{}, outcomes: map[string]int{}}
	for _, r := range reports {
		total.add(r)
	}
	t.Logf("fault suite, seed %d, %s:\n%s", seed, time.Since(start).Round(time.Second), total.String())
	for _, r := range reports {
		for _, p := range faultPoints[r.target] {
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
}

func (r *loopReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  runs %d", r.runs)
	if r.took > 0 {
		fmt.Fprintf(&b, " in %s", r.took.Round(100*time.Millisecond))
	}
	n := 0
	for _, target := range faultTargets {
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
	if len(r.takeovers) > 0 {
		d := slices.Clone(r.takeovers)
		slices.Sort(d)
		fmt.Fprintf(&b, "\n  takeover (coordinator killed to its run's next record by another): %d runs, min %s, median %s, max %s",
			len(d), d[0].Round(time.Millisecond), d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
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

// plannedKill is one kill of a loop's plan.
type plannedKill struct {
	point   fault.Point
	n       int           // the n-th time the point is reached (from the process start, or from the last NATS restart)
	delay   time.Duration // into a span
	restart time.Duration // pause before the restart
}

func (k plannedKill) spec() string {
	return fault.Entry{Point: k.point, N: k.n, Delay: k.delay}.String()
}

// faultLoop is one loop: a cluster, its runs, its plan, what happened.
type faultLoop struct {
	t      *testing.T
	env    *faultEnv
	target string
	dir    string
	logs   string // the processes' logs, kept when the loop fails
	nats   *natsProc
	client *harness.Client
	js     jetstream.JetStream
	ledger ledger.Ledger // the coordinators' shared budget ledger, in a real Redis
	procs  []*roleProc
	runs   []*faultRun
	kinds  map[string]string // run → kind

	mu        sync.Mutex
	plan      []plannedKill // what is left of it
	quiet     bool          // the runs are over: no more kills
	stopping  bool
	kills     map[string]int
	anomalies []string
	takeovers []time.Duration
	measuring sync.WaitGroup

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
func (l *faultLoop) nextKill() (plannedKill, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.plan) == 0 || l.quiet || l.stopping {
		return plannedKill{}, false
	}
	k := l.plan[0]
	l.plan = l.plan[1:]
	return k, true
}

// makePlan draws the loop's kills: every point of the target once, in a
// random order, then as many more as the loop makes, at random points;
// counts small enough that each is reached while the runs last.
func makePlan(rng *rand.Rand, target string) []plannedKill {
	points := slices.Clone(faultPoints[target])
	rng.Shuffle(len(points), func(i, j int) { points[i], points[j] = points[j], points[i] })
	for range killsPerLoop[target] - len(points) {
		points = append(points, faultPoints[target][rng.IntN(len(faultPoints[target]))])
	}
	var plan []plannedKill
	for _, p := range points {
		k := plannedKill{point: p, n: 1 + rng.IntN(12), restart: time.Duration(rng.IntN(500)) * time.Millisecond}
		switch {
		case p == fault.DuringApprovalPause:
			k.n = 1 + rng.IntN(2)
		case target == "nats":
			k.n = 1 + rng.IntN(6)
		}
		if fault.IsSpan(p) {
			k.delay = time.Duration(20+rng.IntN(160)) * time.Millisecond
		}
		plan = append(plan, k)
	}
	return plan
}

// runFaultLoop runs one loop and checks its runs.
func runFaultLoop(t *testing.T, env *faultEnv, target string, index uint64) *loopReport {
	rng := rand.New(rand.NewPCG(env.seed, index))
	l := &faultLoop{t: t, env: env, target: target, dir: t.TempDir(), kills: map[string]int{}, kinds: map[string]string{}}
	l.logs = keptDir(t, "harness-faults-"+target+"-")
	l.plan = makePlan(rng, target)
	var planned []string
	for _, k := range l.plan {
		planned = append(planned, k.spec())
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
		if err := writeTree(run.ws, agentWorkspace); err != nil {
			t.Fatal(err)
		}
		l.runs = append(l.runs, run)
		l.kinds[run.id] = kind
	}
	gaps := make([]time.Duration, faultRuns)
	for i := range gaps {
		gaps[i] = time.Duration(30+rng.IntN(170)) * time.Millisecond
	}

	l.nats = startNATS(t, env.natsBin, filepath.Join(l.dir, "nats"), l.logs)
	c, err := harness.Connect(t.Context(), l.nats.url, nats.ReconnectWait(100*time.Millisecond))
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
	common := []string{"NATS_URL=" + l.nats.url, fault.EnvVar + "="}
	add := func(role, name string, env []string, args ...string) {
		p := &roleProc{role: role, name: name, bin: filepath.Join(l.env.bin, role), env: append(slices.Clone(common), env...), args: args,
			exited: make(chan struct{})}
		l.procs = append(l.procs, p)
	}
	for _, n := range []string{"a", "b"} {
		add("sandboxer", "sandboxer-"+n, nil, "--id", "sandboxer-"+n, "--root", root, "--backends", "floor", "--allow-floor", "--max-concurrent", "16")
		add("worker", "worker-"+n, []string{"OPENAI_API_KEY=sk-fault", "OPENAI_BASE_URL=" + env.agentURL, "HARNESS_PROVIDERS=openai", "HARNESS_ACK_WAIT=2s"},
			"--concurrency", "8")
		add("coordinator", "coordinator-"+n, []string{"HARNESS_PRICES=" + env.prices, "REDIS_URL=" + rs.URL()})
	}
	for _, p := range l.procs {
		first := ""
		if p.role == target {
			if k, ok := l.nextKill(); ok {
				first = k.spec()
			}
		}
		l.supervise(p, first)
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

	rep := &loopReport{target: target, runs: len(l.runs), took: took, kills: l.kills, outcomes: map[string]int{}, takeovers: l.takeovers}
	l.mu.Lock()
	for _, k := range l.plan {
		t.Logf("%s loop: the kill %s was not reached before the runs ended", target, k.spec())
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

// submit publishes a run's contract as a raw `nats pub` with an
// idempotency key would, again until the server takes it.
func (l *faultLoop) submit(ctx context.Context, r *faultRun) {
	data := faultContract(l.t, r)
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := l.js.PublishMsg(pctx, &nats.Msg{Subject: wire.SubjectSubmit, Data: data}, jetstream.WithMsgID(r.id))
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

// roleProc is one role process, started again after each death.
type roleProc struct {
	role, name string
	bin        string
	env        []string
	args       []string
	gen        int
	cur        *exec.Cmd // under faultLoop.mu
	exited     chan struct{}
}

// supervise keeps p running until the loop stops, armed with spec first
// and then with the next kill of the plan after each fault. A death that
// is not a planned fault is an anomaly.
func (l *faultLoop) supervise(p *roleProc, spec string) {
	restart := time.Duration(0)
	go func() {
		defer close(p.exited)
		for {
			if restart > 0 {
				time.Sleep(restart)
			}
			l.mu.Lock()
			if l.stopping {
				l.mu.Unlock()
				return
			}
			p.gen++
			args := slices.Clone(p.args)
			id := p.name
			if p.role == "coordinator" {
				id = fmt.Sprintf("%s-%d", p.name, p.gen) // a new coordinator, not the dead one back
				args = append(args, "--id", id)
			}
			cmd := exec.Command(p.bin, args...)
			cmd.Env = append(os.Environ(), p.env...)
			cmd.Env = append(cmd.Env, fault.EnvVar+"="+spec)
			logPath := filepath.Join(l.logs, fmt.Sprintf("%s.%d.log", p.name, p.gen))
			out, err := os.Create(logPath)
			if err == nil {
				cmd.Stdout, cmd.Stderr = out, out
				err = cmd.Start()
				out.Close()
			}
			if err != nil {
				l.mu.Unlock()
				l.anomaly("start %s: %v", p.name, err)
				return
			}
			p.cur = cmd
			l.mu.Unlock()
			err = cmd.Wait()
			died := time.Now()
			l.mu.Lock()
			stopping := l.stopping
			l.mu.Unlock()
			if stopping {
				return
			}
			log, _ := os.ReadFile(logPath)
			point := faultLine(string(log))
			if point == "" {
				l.anomaly("%s (%s) died unplanned: %v; its log is %s", p.name, id, err, logPath)
			} else {
				l.killed(p.role, point)
				if p.role == "coordinator" {
					l.measureTakeover(id, died)
				}
			}
			spec, restart = "", 0
			if p.role != l.target {
				continue
			}
			if k, ok := l.nextKill(); ok {
				spec, restart = k.spec(), k.restart
			}
		}
	}()
}

// faultLine is the point a process's fault line names, or "".
func faultLine(out string) fault.Point {
	_, rest, ok := strings.Cut(out, "harness fault: SIGKILL at ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return fault.Point(name)
}

// stop kills every role process and waits for their supervisors.
func (l *faultLoop) stop() {
	l.mu.Lock()
	l.stopping = true
	var cmds []*exec.Cmd
	for _, p := range l.procs {
		if p.cur != nil {
			cmds = append(cmds, p.cur)
		}
	}
	l.mu.Unlock()
	for _, c := range cmds {
		_ = c.Process.Kill()
	}
	for _, p := range l.procs {
		<-p.exited
	}
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
			for time.Now().Before(deadline) {
				m, err := stream.GetLastMsgForSubject(ctx, trace.Subject(run))
				if err == nil && m.Sequence != last.Sequence {
					var rec protocol.Record
					if json.Unmarshal(m.Data, &rec) == nil && rec.Kind != protocol.RecordPaused {
						l.mu.Lock()
						l.takeovers = append(l.takeovers, m.Time.Sub(died))
						l.mu.Unlock()
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
	if len(l.plan) == 0 || l.quiet || l.stopping || natsTrigger[l.plan[0].point] != kind {
		l.mu.Unlock()
		return false
	}
	n := l.plan[0].n
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
	l.nats.kill()
	l.killed("nats", k.point)
	_ = sleep(ctx, k.restart)
	l.nats.start(l.t)
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

// natsProc is a nats-server process with JetStream on a store that
// survives its restarts, syncing every write before acknowledging it.
type natsProc struct {
	bin, conf, url string
	logs           string
	mu             sync.Mutex
	cmd            *exec.Cmd
	gen            int
}

func startNATS(t *testing.T, bin, dir, logs string) *natsProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	text := fmt.Sprintf("listen: %q\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", addr, filepath.Join(dir, "store"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &natsProc{bin: bin, conf: conf, url: "nats://" + addr, logs: logs}
	n.start(t)
	t.Cleanup(n.kill)
	return n
}

// start starts the server and waits until it takes connections.
func (n *natsProc) start(t *testing.T) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := exec.Command(n.bin, "-c", n.conf)
	n.gen++
	out, err := os.Create(filepath.Join(n.logs, fmt.Sprintf("nats-server.%d.log", n.gen)))
	if err == nil {
		cmd.Stdout, cmd.Stderr = out, out
		err = cmd.Start()
		out.Close()
	}
	if err != nil {
		t.Errorf("start nats-server: %v", err)
		return
	}
	n.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(n.url, nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("nats-server did not come up: %v (its log is in %s)", err, n.logs)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill kills the server with SIGKILL.
func (n *natsProc) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
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

// writeTree writes files (relative path → content) under dir.
func writeTree(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readTree reads every regular file under dir (relative path → content).
func readTree(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out, err
}
