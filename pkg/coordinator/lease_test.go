package coordinator

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
)

// leaseBucket is a real key-value bucket on an embedded server, as the
// harness-leases bucket is.
func leaseBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "leases"})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// clock is an injected clock a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// ttl is the lease TTL of twoHolders.
const ttl = 5 * time.Second

// twoHolders returns coordinators a and b on one leases bucket, with
// lease TTL ttl, both on the injected clock it returns.
func twoHolders(t *testing.T) (*clock, *leases, *leases) {
	t.Helper()
	kv := leaseBucket(t)
	clk := &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	return clk, &leases{kv: kv, owner: "a", ttl: ttl, now: clk.Now}, &leases{kv: kv, owner: "b", ttl: ttl, now: clk.Now}
}

// TestLeaseOneWriterPerRun walks one run's lease between two coordinators
// on an injected clock: one holder at a time, each takeover a new
// generation, a lease kept alive by its holder's heartbeat alone, never
// taken while that beats, and only dead leases listed.
func TestLeaseOneWriterPerRun(t *testing.T) {
	clk, a, b := twoHolders(t)
	ctx := t.Context()

	la, err := a.acquire(ctx, "r1")
	if err != nil || la.gen != 1 {
		t.Fatalf("a takes a free run: %+v, %v; want generation 1", la, err)
	}
	if _, err := b.acquire(ctx, "r1"); !errors.Is(err, errHeld) {
		t.Fatalf("b takes a live lease: %v, want errHeld", err)
	}
	clk.advance(ttl - time.Second)
	if lapsed, err := a.beat(ctx); err != nil || lapsed {
		t.Fatalf("a beats before expiry: lapsed %v, %v", lapsed, err)
	}
	clk.advance(ttl - time.Second) // past the first expiry, within the renewed one
	if _, err := b.acquire(ctx, "r1"); !errors.Is(err, errHeld) {
		t.Fatalf("b takes a lease whose holder beats: %v, want errHeld", err)
	}
	if got, err := b.expired(ctx); err != nil || len(got) != 0 {
		t.Fatalf("expired with a live lease = %q, %v; want none", got, err)
	}

	clk.advance(ttl) // a stops beating: its lease dies with its heartbeat
	if got, err := b.expired(ctx); err != nil || !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("expired after the TTL = %q, %v; want [r1]", got, err)
	}
	lb, err := b.acquire(ctx, "r1")
	if err != nil || lb.gen != 2 {
		t.Fatalf("b takes the dead lease: %+v, %v; want generation 2", lb, err)
	}
	if lapsed, err := a.beat(ctx); err != nil || !lapsed {
		t.Fatalf("a beats again a whole TTL late: lapsed %v, %v; want lapsed", lapsed, err)
	}
	a.release(ctx, la) // a stale release leaves b's lease alone
	if _, err := a.acquire(ctx, "r1"); !errors.Is(err, errHeld) {
		t.Fatalf("a takes b's live lease after releasing its stale one: %v, want errHeld", err)
	}

	// Its own lease a coordinator takes again, as on resume.
	again, err := b.acquire(ctx, "r1")
	if err != nil || again.gen != 3 {
		t.Fatalf("b takes its own lease again: %+v, %v; want generation 3", again, err)
	}
	b.release(ctx, again)
	la2, err := a.acquire(ctx, "r1")
	if err != nil || la2.gen != 1 {
		t.Fatalf("a takes a released run: %+v, %v; want a fresh lease, generation 1", la2, err)
	}
}

// TestLeaseEpochLapses: a coordinator whose heartbeat lapsed holds none of
// the leases of its old epoch, all of them dead at once for another to
// take; those it takes again live with its new epoch.
func TestLeaseEpochLapses(t *testing.T) {
	clk, a, b := twoHolders(t)
	ctx := t.Context()
	for _, run := range []string{"r1", "r2", "r3"} {
		if _, err := a.acquire(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.beat(ctx); err != nil {
		t.Fatal(err)
	}
	clk.advance(ttl)
	if _, err := b.beat(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b.expired(ctx)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"r1", "r2", "r3"}) {
		t.Fatalf("expired after a's heartbeat ran out = %q, %v; want all three", got, err)
	}
	if lapsed, err := a.beat(ctx); err != nil || !lapsed {
		t.Fatalf("a's late beat: lapsed %v, %v; want lapsed", lapsed, err)
	}
	// Beating again does not bring the old epoch's leases back.
	if got, err := b.expired(ctx); err != nil || len(got) != 3 {
		t.Fatalf("expired after a began a new epoch = %q, %v; want all three still", got, err)
	}
	if _, err := b.acquire(ctx, "r1"); err != nil {
		t.Fatalf("b takes r1: %v", err)
	}
	l2, err := a.acquire(ctx, "r2")
	if err != nil || l2.gen != 2 {
		t.Fatalf("a takes back r2 under its new epoch: %+v, %v", l2, err)
	}
	got, err = b.expired(ctx)
	if err != nil || !slices.Equal(got, []string{"r3"}) {
		t.Fatalf("expired once r1 and r2 are taken again = %q, %v; want [r3]", got, err)
	}
	if _, err := b.acquire(ctx, "r2"); !errors.Is(err, errHeld) {
		t.Fatalf("b takes r2, live under a's new epoch: %v, want errHeld", err)
	}
}

// TestLeaseRaceHasOneWinner: coordinators taking one free run at once end
// with exactly one holder.
func TestLeaseRaceHasOneWinner(t *testing.T) {
	kv := leaseBucket(t)
	clk := &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	const n = 8
	var wg sync.WaitGroup
	won := make(chan string, n)
	for i := range n {
		l := &leases{kv: kv, owner: string(rune('a' + i)), ttl: 5 * time.Second, now: clk.Now}
		wg.Go(func() {
			if _, err := l.acquire(t.Context(), "r1"); err == nil {
				won <- l.owner
			} else if !errors.Is(err, errHeld) {
				t.Errorf("acquire by %s: %v", l.owner, err)
			}
		})
	}
	wg.Wait()
	close(won)
	var winners []string
	for w := range won {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Errorf("%d coordinators hold r1 (%q), want exactly one", len(winners), winners)
	}
}

// TestLeaseHandOver is a coordinator stopping: it hands its live lease
// over, and without the clock moving the run is listed expired and another
// coordinator takes it at once, a generation on; the old holder's release
// leaves it alone.
func TestLeaseHandOver(t *testing.T) {
	_, a, b := twoHolders(t)
	ctx := t.Context()
	la, err := a.acquire(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(ctx, "r1"); !errors.Is(err, errHeld) {
		t.Fatalf("b took a live lease: %v", err)
	}
	if err := a.handOver(ctx, la); err != nil {
		t.Fatal(err)
	}
	if runs, err := b.expired(ctx); err != nil || !slices.Equal(runs, []string{"r1"}) {
		t.Fatalf("expired after the hand-over = %v, %v; want [r1]", runs, err)
	}
	lb, err := b.acquire(ctx, "r1")
	if err != nil {
		t.Fatalf("b could not take a handed-over lease: %v", err)
	}
	if lb.gen != la.gen+1 {
		t.Errorf("generation after the hand-over = %d, want %d", lb.gen, la.gen+1)
	}
	a.release(ctx, la)
	if _, err := a.acquire(ctx, "r1"); !errors.Is(err, errHeld) {
		t.Errorf("the old holder's release gave up the lease b took: %v", err)
	}
}

// TestLeaseDiesBeforeItsTTL: a holder's leases die a twentieth of the TTL
// before the TTL has passed since its last renewal, so that another
// coordinator's look at that moment, and its take, land within the TTL
// of the holder's death however late in the TTL it renewed; until then
// they are alive, and the holder itself counts them lapsed at the same
// mark.
func TestLeaseDiesBeforeItsTTL(t *testing.T) {
	clk, a, b := twoHolders(t)
	ctx := t.Context()
	if _, err := a.acquire(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	clk.advance(ttl - ttl/20 - time.Millisecond)
	if got, err := b.expired(ctx); err != nil || len(got) != 0 {
		t.Fatalf("expired just before the heartbeat's life is out = %q, %v; want none", got, err)
	}
	if _, stale := a.stale(); stale {
		t.Fatal("the holder counts its heartbeat stale before its life is out")
	}
	clk.advance(time.Millisecond)
	if got, err := b.expired(ctx); err != nil || !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("expired once the TTL less a twentieth has passed = %q, %v; want [r1], taken within the TTL", got, err)
	}
	if _, stale := a.stale(); !stale {
		t.Error("the holder does not count its heartbeat stale once others take its leases for dead")
	}
}
