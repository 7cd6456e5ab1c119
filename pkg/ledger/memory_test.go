package ledger_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/ledger/ledgertest"
)

func TestMemoryConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger { return ledger.NewMemory() })
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestMemoryKeyTTL(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := &ledger.Memory{KeyTTL: time.Minute, Now: clock.Now}
	if err := m.Open(ctx, "t", ledger.Ceiling{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(ctx, "t", "root", 0); err != nil {
		t.Fatal(err)
	}
	r := ledger.Reservation{Tree: "t", Agent: "root", Key: "root.1.0", Estimate: ledger.Usage{Steps: 1}}
	if _, err := m.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Settle(ctx, "t", r.Key, ledger.Usage{Steps: 1}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(59 * time.Second)
	if s, err := m.Settle(ctx, "t", r.Key, ledger.Usage{Steps: 1}); err != nil || !s.Replayed {
		t.Fatalf("Settle replay within the TTL = %+v, %v; want replayed", s, err)
	}
	clock.Advance(time.Second)
	if _, err := m.Settle(ctx, "t", r.Key, ledger.Usage{Steps: 1}); !errors.Is(err, ledger.ErrReservationUnknown) {
		t.Fatalf("Settle after the TTL = %v, want ErrReservationUnknown", err)
	}
	// After the TTL the key is a new draw.
	g, err := m.Reserve(ctx, r)
	if err != nil || g.Replayed {
		t.Fatalf("Reserve after the TTL = %+v, %v; want a fresh grant", g, err)
	}
}

func TestMemoryDeadlineClock(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := &ledger.Memory{Now: clock.Now}
	if err := m.Open(ctx, "t", ledger.Ceiling{Wall: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(ctx, "t", "root", 0); err != nil {
		t.Fatal(err)
	}
	r := ledger.Reservation{Tree: "t", Agent: "root", Key: "root.1.0"}
	clock.Advance(time.Minute - time.Microsecond)
	if _, err := m.Reserve(ctx, r); err != nil {
		t.Fatalf("Reserve just before the deadline = %v", err)
	}
	clock.Advance(time.Microsecond)
	r.Key = "root.2.0"
	var ref *ledger.Refusal
	if _, err := m.Reserve(ctx, r); !errors.As(err, &ref) || ref.Dimension != ledger.DimWall {
		t.Fatalf("Reserve at the deadline = %v, want a wall refusal", err)
	}
	if want := clock.Now(); !ref.Deadline.Equal(want) {
		t.Errorf("Refusal.Deadline = %v, want %v", ref.Deadline, want)
	}
}

func TestMemorySweep(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := &ledger.Memory{KeyTTL: time.Second, Now: clock.Now}
	if err := m.Open(ctx, "t", ledger.Ceiling{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(ctx, "t", "root", 0); err != nil {
		t.Fatal(err)
	}
	// Many expired keys do not stop new ones from working.
	for i := range 5000 {
		r := ledger.Reservation{Tree: "t", Agent: "root", Key: "k" + string(rune('a'+i%26)) + time.Duration(i).String()}
		if _, err := m.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx, "t", r.Key); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Millisecond)
	}
}

// TestMemoryPlaceClaim lets a place given to an agent that never started
// lapse after its claim, and keeps one claimed by a Running take for as
// long as it is held.
func TestMemoryPlaceClaim(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := &ledger.Memory{Now: clock.Now}
	if err := m.Open(ctx, "t", ledger.Ceiling{}); err != nil {
		t.Fatal(err)
	}
	ask := func(agent string, running bool) ledger.Place {
		t.Helper()
		p, err := m.TakePlace(ctx, ledger.PlaceRequest{Tree: "t", Agent: agent, Limit: 2, Running: running, Claim: time.Minute, Keep: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ask("started", false)
	ask("started", true) // it started: the place is claimed
	ask("never", false)
	if p := ask("next", false); p.Held {
		t.Fatalf("next = %+v with both places taken, want queued", p)
	}
	clock.Advance(time.Minute - time.Microsecond)
	if p := ask("next", false); p.Held {
		t.Fatalf("next = %+v before the claim lapsed, want queued", p)
	}
	clock.Advance(time.Microsecond)
	if p := ask("next", false); !p.Held || p.Taken != 2 {
		t.Fatalf("next = %+v once the unclaimed place lapsed, want held", p)
	}
	clock.Advance(time.Hour)
	tot, err := m.Totals(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// next's place, given from the queue, is unclaimed too: it lapsed.
	if want := []string{"started"}; !slices.Equal(tot.Places, want) {
		t.Errorf("Places = %q an hour on, want %q", tot.Places, want)
	}
}
