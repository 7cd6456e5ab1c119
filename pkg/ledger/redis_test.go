package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/ledger/ledgertest"
	"github.com/ioharness/harness/pkg/protocol"
)

// newClient returns a client of addr that fails fast when the server is
// gone (no retries, short timeouts), closed when the test ends.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:               addr,
		MaxRetries:         -1,
		DialerRetries:      1,
		DialerRetryTimeout: 10 * time.Millisecond,
		DialTimeout:        time.Second,
		ReadTimeout:        2 * time.Second,
		WriteTimeout:       2 * time.Second,
		PoolSize:           32,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newRedis(t testing.TB, c redis.UniversalClient, cfg ledger.RedisConfig) *ledger.Redis {
	l, err := ledger.NewRedis(c, cfg)
	if err != nil {
		t.Fatalf("NewRedis = %v", err)
	}
	return l
}

func TestRedisConformance(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger { return newRedis(t, c, ledger.RedisConfig{}) })
}

// trace stands in for the run's trace: what each agent's committed steps
// spent, from which the ledger is rebuilt.
type trace map[string]ledger.Usage

// draw reserves and settles one step of agent and records it in tr.
func draw(t *testing.T, l ledger.Ledger, tree, agent, key string, u ledger.Usage, tr trace) {
	t.Helper()
	ctx := context.Background()
	if _, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: agent, Key: key, Estimate: u}); err != nil {
		t.Fatalf("Reserve(%s) = %v", key, err)
	}
	s, err := l.Settle(ctx, tree, key, u)
	if err != nil {
		t.Fatalf("Settle(%s) = %v", key, err)
	}
	tr[agent] = tr[agent].Add(s.Charged)
}

func open(t *testing.T, l ledger.Ledger, c ledger.Ceiling, agents ...string) string {
	t.Helper()
	ctx := context.Background()
	tree := ledgertest.NewTree(t)
	if err := l.Open(ctx, tree, c); err != nil {
		t.Fatalf("Open = %v", err)
	}
	for i, a := range agents {
		if err := l.Register(ctx, tree, a, min(i, 1)); err != nil {
			t.Fatalf("Register(%s) = %v", a, err)
		}
	}
	return tree
}

var oneStep = ledger.Usage{InputTokens: 100, OutputTokens: 20, CostMicros: 7, Steps: 1}

// TestRedisKeysLost restarts Redis without persistence in the middle of a
// tree: every draw answers ErrTreeUnknown until the tree is restored from
// the trace, and then the spend is intact and the ceiling still holds.
func TestRedisKeysLost(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := newRedis(t, newClient(t, s.Addr()), ledger.RedisConfig{})
	c := ledger.Ceiling{Limits: ledger.Limits{Steps: 8}, Wall: time.Hour, Start: time.Now().Add(-time.Minute)}
	tree := open(t, l, c, "root", "child")
	tr := trace{}
	for i := range 3 {
		draw(t, l, tree, "root", fmt.Sprintf("root.%d.0", i), oneStep, tr)
		draw(t, l, tree, "child", fmt.Sprintf("child.%d.0", i), oneStep, tr)
	}
	before, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	inFlight := ledger.Reservation{Tree: tree, Agent: "child", Key: "child.3.0", Estimate: oneStep}
	if _, err := l.Reserve(ctx, inFlight); err != nil {
		t.Fatal(err)
	}

	s.Restart()

	next := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.3.0", Estimate: oneStep}
	if _, err := l.Reserve(ctx, next); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Fatalf("Reserve after the loss = %v, want ErrTreeUnknown", err)
	}
	if _, err := l.Settle(ctx, tree, inFlight.Key, oneStep); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Fatalf("Settle after the loss = %v, want ErrTreeUnknown", err)
	}
	if _, err := l.Totals(ctx, tree); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Fatalf("Totals after the loss = %v, want ErrTreeUnknown", err)
	}
	if err := l.Register(ctx, tree, "late", 1); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Fatalf("Register after the loss = %v, want ErrTreeUnknown", err)
	}

	// Rebuild from the trace, with the root's original start.
	if ok, err := l.Restore(ctx, tree, before.Ceiling, tr); err != nil || !ok {
		t.Fatalf("Restore = %v, %v", ok, err)
	}
	after, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	if after.Spent != before.Spent || !after.Ceiling.Start.Equal(before.Ceiling.Start) || after.Ceiling.Steps != 8 {
		t.Errorf("Totals after Restore = %+v, want spent %+v and the original ceiling %+v", after, before.Spent, before.Ceiling)
	}
	for _, a := range []string{"root", "child"} {
		if after.Agents[a].Spent != before.Agents[a].Spent {
			t.Errorf("agent %s spent %+v after Restore, want %+v", a, after.Agents[a].Spent, before.Agents[a].Spent)
		}
	}
	// The reservation in flight at the loss is gone with it.
	if _, err := l.Settle(ctx, tree, inFlight.Key, oneStep); !errors.Is(err, ledger.ErrReservationUnknown) {
		t.Errorf("Settle of a reservation lost with the tree = %v, want ErrReservationUnknown", err)
	}
	// The run continues: 6 of 8 steps are spent, so two more fit.
	draw(t, l, tree, "root", "root.3.0", oneStep, tr)
	draw(t, l, tree, "child", "child.4.0", oneStep, tr)
	if _, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.4.0", Estimate: oneStep}); !errors.Is(err, ledger.ErrCeilingReached) {
		t.Errorf("ninth step after Restore = %v, want ErrCeilingReached", err)
	}
}

// TestRedisUnavailable stops Redis under a running agent: draws fail
// closed with a retryable unavailable error and nothing panics; the agent
// waits with backoff, and when Redis is back (empty) it rebuilds the tree
// from the trace and goes on.
func TestRedisUnavailable(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := newRedis(t, newClient(t, s.Addr()), ledger.RedisConfig{})
	c := ledger.Ceiling{Limits: ledger.Limits{Tokens: 1_000_000}}
	tree := open(t, l, c, "root")
	tr := trace{}
	draw(t, l, tree, "root", "root.0.0", oneStep, tr)
	ceiling, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}

	s.Stop()
	calls := []struct {
		name string
		call func() error
	}{
		{"Open", func() error { return l.Open(ctx, "other", c) }},
		{"Register", func() error { return l.Register(ctx, tree, "x", 1) }},
		{"Reserve", func() error {
			_, err := l.Reserve(ctx, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: oneStep})
			return err
		}},
		{"Settle", func() error { _, err := l.Settle(ctx, tree, "root.0.0", oneStep); return err }},
		{"Release", func() error { return l.Release(ctx, tree, "root.0.0") }},
		{"Totals", func() error { _, err := l.Totals(ctx, tree); return err }},
		{"Restore", func() error { _, err := l.Restore(ctx, tree, c, tr); return err }},
	}
	for _, tc := range calls {
		err := tc.call()
		if !errors.Is(err, protocol.ErrUnavailable) || !protocol.AsError(err).Retryable() {
			t.Errorf("%s with Redis stopped = %v, want a retryable protocol.ErrUnavailable", tc.name, err)
		}
	}

	// An agent waits for the ledger: it reports each wait, backs off, and
	// rebuilds the tree when Redis comes back without it.
	waiting := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		backoff := time.Millisecond
		r := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: oneStep}
		for {
			_, err := l.Reserve(ctx, r)
			switch {
			case err == nil:
				_, err := l.Settle(ctx, tree, r.Key, oneStep)
				done <- err
				return
			case errors.Is(err, protocol.ErrUnavailable):
				select {
				case waiting <- err:
				default:
				}
				time.Sleep(backoff) // the agent's backoff, not the test's synchronisation
				backoff = min(2*backoff, 50*time.Millisecond)
			case errors.Is(err, ledger.ErrTreeUnknown):
				if _, err := l.Restore(ctx, tree, ceiling.Ceiling, tr); err != nil {
					done <- err
					return
				}
			default:
				done <- err
				return
			}
		}
	}()
	if err := <-waiting; err == nil {
		t.Fatal("the agent did not report waiting")
	}
	s.Restart()
	if err := <-done; err != nil {
		t.Fatalf("the agent's draw after Redis came back = %v", err)
	}
	got, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	if want := oneStep.Add(oneStep); got.Spent != want {
		t.Errorf("Spent = %+v, want %+v (the step before the stop and the one after)", got.Spent, want)
	}
}

// TestRedisScriptFlush empties the server's script cache between draws:
// EVALSHA answers NOSCRIPT and the ledger reloads the script.
func TestRedisScriptFlush(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	l := newRedis(t, c, ledger.RedisConfig{})
	tree := open(t, l, ledger.Ceiling{}, "root")
	tr := trace{}
	draw(t, l, tree, "root", "root.0.0", oneStep, tr)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	draw(t, l, tree, "root", "root.1.0", oneStep, tr)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	r := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.3.0", Estimate: oneStep}
	if _, _, err := l.SettleAndReserve(ctx, "root.1.0", oneStep, r); err != nil {
		t.Fatalf("SettleAndReserve after SCRIPT FLUSH = %v", err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, tree, r.Key); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH = %v", err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Register(ctx, tree, "child", 1); err != nil {
		t.Fatalf("Register after SCRIPT FLUSH = %v", err)
	}
	got, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	if want := oneStep.Add(oneStep); got.Spent != want || got.Reserved != (ledger.Usage{}) {
		t.Errorf("Totals = %+v, want %+v spent and nothing held", got, want)
	}
}

// TestRedisResumeAfterCrash: a coordinator reserves, calls the provider
// and dies before settling; another one resumes the step and settles the
// same key, perhaps twice. The step is charged exactly once.
func TestRedisResumeAfterCrash(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	first := newRedis(t, newClient(t, s.Addr()), ledger.RedisConfig{})
	tree := open(t, first, ledger.Ceiling{}, "root")
	r := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.5.0", Estimate: ledger.Usage{InputTokens: 1000, OutputTokens: 4096, Steps: 1}}
	if _, err := first.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	// The first coordinator is gone; a second one, with its own client,
	// replays the reservation (it cannot know whether it was made) and
	// settles with the usage the trace recorded.
	second := newRedis(t, newClient(t, s.Addr()), ledger.RedisConfig{})
	g, err := second.Reserve(ctx, r)
	if err != nil || !g.Replayed || g.State != ledger.StateReserved {
		t.Fatalf("replayed Reserve = %+v, %v; want the first grant, still reserved", g, err)
	}
	used := ledger.Usage{InputTokens: 1000, OutputTokens: 321, Steps: 1}
	for range 2 {
		if _, err := second.Settle(ctx, tree, r.Key, used); err != nil {
			t.Fatal(err)
		}
	}
	got, err := second.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spent != used || got.Reserved != (ledger.Usage{}) {
		t.Errorf("Totals = %+v, want %+v spent once and nothing held", got, used)
	}
}

// TestRedisKeys checks the key layout: every key of a tree carries the
// hash tag {tree}, so Redis Cluster keeps a tree in one slot, and every key
// expires.
func TestRedisKeys(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	l := newRedis(t, c, ledger.RedisConfig{Prefix: "hl", KeyTTL: time.Hour, TreeTTL: 2 * time.Hour})
	tree := open(t, l, ledger.Ceiling{}, "root")
	tr := trace{}
	draw(t, l, tree, "root", "root.0.0", oneStep, tr)
	keys, err := c.Keys(ctx, "*").Result() // a test may list keys; the ledger never does
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("keys = %q, want the tree and one reservation", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "hl:{"+tree+"}") {
			t.Errorf("key %q does not start with the hash tag hl:{%s}", k, tree)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		max := time.Hour
		if k == "hl:{"+tree+"}" {
			max = 2 * time.Hour
		}
		if ttl <= max-time.Minute || ttl > max {
			t.Errorf("PTTL(%q) = %v, want about %v", k, ttl, max)
		}
	}
}

// TestRedisKeyTTL lets a reservation's key expire: a replay after the TTL
// is a new draw, and a settle of it finds nothing.
func TestRedisKeyTTL(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	l := newRedis(t, c, ledger.RedisConfig{KeyTTL: 50 * time.Millisecond})
	tree := open(t, l, ledger.Ceiling{}, "root")
	r := ledger.Reservation{Tree: tree, Agent: "root", Key: "root.0.0", Estimate: oneStep}
	if _, err := l.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(ctx, tree, r.Key, oneStep); err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		_, err := l.Settle(ctx, tree, r.Key, oneStep)
		if errors.Is(err, ledger.ErrReservationUnknown) {
			return nil
		}
		return fmt.Errorf("Settle of an expired key = %v, want ErrReservationUnknown", err)
	})
}

func TestRedisConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  ledger.RedisConfig
		ok   bool
	}{
		{"zero", ledger.RedisConfig{}, true},
		{"explicit", ledger.RedisConfig{Prefix: "x", KeyTTL: time.Hour, TreeTTL: -1}, true},
		{"brace in prefix", ledger.RedisConfig{Prefix: "a{b"}, false},
		{"negative key TTL", ledger.RedisConfig{KeyTTL: -time.Second}, false},
		{"sub-millisecond key TTL", ledger.RedisConfig{KeyTTL: time.Microsecond}, false},
		{"sub-millisecond tree TTL", ledger.RedisConfig{TreeTTL: time.Microsecond}, false},
		{"tree TTL under key TTL", ledger.RedisConfig{KeyTTL: time.Hour, TreeTTL: time.Minute}, false},
		{"key TTL over the default tree TTL", ledger.RedisConfig{KeyTTL: 30 * 24 * time.Hour}, false},
		{"key TTL with trees kept forever", ledger.RedisConfig{KeyTTL: 30 * 24 * time.Hour, TreeTTL: -1}, true},
	}
	unconnected := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { unconnected.Close() })
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tt.name, err, tt.ok)
		}
		if _, err := ledger.NewRedis(unconnected, tt.cfg); (err == nil) != tt.ok {
			t.Errorf("%s: NewRedis = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if _, err := ledger.NewRedis(nil, ledger.RedisConfig{}); err == nil {
		t.Error("NewRedis(nil) succeeded")
	}
}

// Environment of the helper process (see TestHelperProcess).
const (
	helperEnv = "LEDGER_TEST_HELPER"
	addrEnv   = "LEDGER_TEST_REDIS"
	treeEnv   = "LEDGER_TEST_TREE"
	agentsEnv = "LEDGER_TEST_AGENTS"
	tallyMark = "LEDGER_TALLY "
)

// TestRedisProcesses runs ledgertest.Hammer in 4 processes at once, 16
// goroutines each, on one tree, and checks the totals invariant over all.
func TestRedisProcesses(t *testing.T) {
	const procs, perProc = 4, 16
	ctx := context.Background()
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	l := newRedis(t, c, ledger.RedisConfig{})
	tree := open(t, l, ledgertest.HammerCeiling)
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for p := range procs {
		agents := make([]string, perProc)
		for i := range agents {
			agents[i] = fmt.Sprintf("p%d.a%02d", p, i)
			if err := l.Register(ctx, tree, agents[i], 1); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=hammer", addrEnv+"="+s.Addr(), treeEnv+"="+tree, agentsEnv+"="+strings.Join(agents, ","))
		outs[p] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[p], outs[p]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p] = cmd
	}
	// Release all helpers at once, once each is connected and waiting.
	testkit.CheckFor(t, 60*time.Second, 5*time.Millisecond, func() error {
		n, err := c.Get(ctx, "test:{"+tree+"}:ready").Int()
		if err != nil || n < procs {
			return fmt.Errorf("%d of %d helpers ready (%v)", n, procs, err)
		}
		return nil
	})
	if err := c.Set(ctx, "test:{"+tree+"}:go", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var tallies []ledgertest.Tally
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", p, err, outs[p])
		}
		var found bool
		sc := bufio.NewScanner(outs[p])
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), tallyMark); ok {
				var ta ledgertest.Tally
				if err := json.Unmarshal([]byte(line), &ta); err != nil {
					t.Fatalf("helper %d tally: %v", p, err)
				}
				tallies = append(tallies, ta)
				found = true
			}
		}
		if !found {
			t.Fatalf("helper %d reported no tally:\n%s", p, outs[p])
		}
	}
	for p, ta := range tallies {
		if ta.Grants == 0 {
			t.Errorf("helper %d was granted nothing: the processes did not draw concurrently", p)
		}
	}
	tot, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	ledgertest.CheckHammer(t, tot, tallies, procs*perProc)
}

// TestHelperProcess is not a test: TestRedisProcesses runs the test binary
// again with LEDGER_TEST_HELPER=hammer to draw from another process, the
// way os/exec's tests run helpers.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "hammer" {
		return
	}
	ctx := context.Background()
	tree := os.Getenv(treeEnv)
	c := newClient(t, os.Getenv(addrEnv))
	l := newRedis(t, c, ledger.RedisConfig{})
	if err := c.Incr(ctx, "test:{"+tree+"}:ready").Err(); err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 60*time.Second, 5*time.Millisecond, func() error { return c.Get(ctx, "test:{"+tree+"}:go").Err() })
	tally, err := ledgertest.Hammer(ctx, l, tree, strings.Split(os.Getenv(agentsEnv), ","))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(tally)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", tallyMark, data)
}

// TestRedisConcurrentClients runs the 64-goroutine workload with 64
// separate ledgers and clients, as if each agent ran on its own machine.
func TestRedisConcurrentClients(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := newRedis(t, newClient(t, s.Addr()), ledger.RedisConfig{})
	tree := open(t, l, ledgertest.HammerCeiling)
	const n = 64
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		tallies []ledgertest.Tally
		errs    = make([]error, n)
	)
	agents := make([]string, n)
	for i := range agents {
		agents[i] = fmt.Sprintf("m%02d", i)
		if err := l.Register(ctx, tree, agents[i], 1); err != nil {
			t.Fatal(err)
		}
	}
	for i, agent := range agents {
		own := newRedis(t, newClient(t, s.Addr()), ledger.RedisConfig{})
		wg.Go(func() {
			ta, err := ledgertest.Hammer(ctx, own, tree, []string{agent})
			errs[i] = err
			mu.Lock()
			tallies = append(tallies, ta)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	tot, err := l.Totals(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	ledgertest.CheckHammer(t, tot, tallies, n)
}

// TestRedisErrors sorts failures: a script error (here the tree's key
// holds a string) is internal, not retryable; a cancelled context is
// unavailable and still matches context.Canceled.
func TestRedisErrors(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	l := newRedis(t, c, ledger.RedisConfig{})
	if err := c.Set(ctx, "ledger:{broken}", "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := l.Reserve(ctx, ledger.Reservation{Tree: "broken", Agent: "a", Key: "a.1.0", Estimate: oneStep})
	if !errors.Is(err, protocol.ErrInternal) || protocol.AsError(err).Retryable() {
		t.Errorf("Reserve on a corrupt tree = %v, want a non-retryable protocol.ErrInternal", err)
	}
	if _, err := l.Totals(ctx, "broken"); !errors.Is(err, protocol.ErrInternal) {
		t.Errorf("Totals on a corrupt tree = %v, want protocol.ErrInternal", err)
	}

	tree := open(t, l, ledger.Ceiling{}, "root")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Reserve(cancelled, ledger.Reservation{Tree: tree, Agent: "root", Key: "root.1.0", Estimate: oneStep})
	if !errors.Is(err, protocol.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with a cancelled context = %v, want protocol.ErrUnavailable and context.Canceled", err)
	}
}

// TestRedisUniversalClient draws through the client type the roles build
// from REDIS_URL.
func TestRedisUniversalClient(t *testing.T) {
	s := redistest.Start(t)
	opts, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	uc := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{opts.Addr}, DB: opts.DB})
	t.Cleanup(func() { uc.Close() })
	l := newRedis(t, uc, ledger.RedisConfig{})
	tree := open(t, l, ledger.Ceiling{Limits: ledger.Limits{Steps: 1}}, "root")
	draw(t, l, tree, "root", "root.0.0", oneStep, trace{})
}

// TestRedisPlaceKeys checks the keys of a tree's places: under the tree's
// hash tag, expiring with the tree; and that places outliving their tree
// (its hash lost or expired) are dropped when the tree is rebuilt, not
// counted against it.
func TestRedisPlaceKeys(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := newClient(t, s.Addr())
	l := newRedis(t, c, ledger.RedisConfig{Prefix: "hl", KeyTTL: time.Hour, TreeTTL: 2 * time.Hour})
	tree := open(t, l, ledger.Ceiling{}, "root")
	for _, a := range []string{"a", "b"} {
		if _, err := l.TakePlace(ctx, ledger.PlaceRequest{Tree: tree, Agent: a, Limit: 1, Keep: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	tag := "hl:{" + tree + "}"
	for _, k := range []string{tag + ":p", tag + ":q", tag + ":x"} {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= 2*time.Hour-time.Minute || ttl > 2*time.Hour {
			t.Errorf("PTTL(%q) = %v, %v; want about the tree's 2h", k, ttl, err)
		}
	}
	if err := c.Del(ctx, tag).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TakePlace(ctx, ledger.PlaceRequest{Tree: tree, Agent: "c", Limit: 1, Keep: time.Hour}); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Fatalf("TakePlace on a lost tree = %v, want ErrTreeUnknown", err)
	}
	if ok, err := l.Restore(ctx, tree, ledger.Ceiling{}, map[string]ledger.Usage{"root": {}}); err != nil || !ok {
		t.Fatalf("Restore = %v, %v", ok, err)
	}
	tot, err := l.Totals(ctx, tree)
	if err != nil || tot.Places != nil || tot.Queued != nil {
		t.Fatalf("Totals after Restore = %+v, %v; want no places nor queue", tot, err)
	}
	p, err := l.TakePlace(ctx, ledger.PlaceRequest{Tree: tree, Agent: "c", Limit: 1, Keep: time.Hour})
	if err != nil || !p.Held || p.Taken != 1 {
		t.Errorf("TakePlace after Restore = %+v, %v; want held, the only place taken", p, err)
	}
}
