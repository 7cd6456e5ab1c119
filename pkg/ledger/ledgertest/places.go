package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// The places of a tree (TakePlace, FreePlace): how many of its agents run
// at once.

// queued is a request that waits its turn for an hour, and holds a place
// it is given until freed.
func queued(tree, agent string, limit int) ledger.PlaceRequest {
	return ledger.PlaceRequest{Tree: tree, Agent: agent, Limit: limit, Keep: time.Hour}
}

func take(t *testing.T, l ledger.Ledger, p ledger.PlaceRequest) ledger.Place {
	t.Helper()
	got, err := l.TakePlace(context.Background(), p)
	if err != nil {
		t.Fatalf("TakePlace(%+v) = %v", p, err)
	}
	return got
}

// wantPlace takes p and checks where it stands.
func wantPlace(t *testing.T, l ledger.Ledger, p ledger.PlaceRequest, want ledger.Place) {
	t.Helper()
	if got := take(t, l, p); got != want {
		t.Errorf("TakePlace(%s) = %+v, want %+v", p.Agent, got, want)
	}
}

func free(t *testing.T, l ledger.Ledger, tree, agent string, want bool) {
	t.Helper()
	got, err := l.FreePlace(context.Background(), tree, agent)
	if err != nil || got != want {
		t.Errorf("FreePlace(%s) = %v, %v; want %v, nil", agent, got, err, want)
	}
}

// wantPlaces checks who holds the tree's places and who waits, in order.
func wantPlaces(t *testing.T, l ledger.Ledger, tree string, held, waiting []string) {
	t.Helper()
	tot := totals(t, l, tree)
	if diff := cmp.Diff(held, tot.Places); diff != "" {
		t.Errorf("Totals.Places (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(waiting, tot.Queued); diff != "" {
		t.Errorf("Totals.Queued (-want +got):\n%s", diff)
	}
}

// testPlacesFirstComeFirstServed queues the agents over the limit in the
// order they asked, keeps a queued agent's turn when it asks again, and
// gives each freed place to the first in the queue, whoever asks next.
func testPlacesFirstComeFirstServed(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{})
	wantPlace(t, l, ledger.PlaceRequest{Tree: tree, Agent: "root", Limit: 2, Running: true}, ledger.Place{Held: true, Taken: 1})
	wantPlace(t, l, queued(tree, "a", 2), ledger.Place{Held: true, Taken: 2})
	for i, a := range []string{"b", "c", "d"} {
		wantPlace(t, l, queued(tree, a, 2), ledger.Place{Ahead: i, Taken: 2})
	}
	wantPlace(t, l, queued(tree, "c", 2), ledger.Place{Ahead: 1, Taken: 2}) // asking again keeps the turn
	wantPlace(t, l, queued(tree, "a", 2), ledger.Place{Held: true, Taken: 2})
	wantPlaces(t, l, tree, []string{"a", "root"}, []string{"b", "c", "d"})

	// d asks first after a frees its place, but b's turn came first.
	free(t, l, tree, "a", true)
	wantPlace(t, l, queued(tree, "d", 2), ledger.Place{Ahead: 1, Taken: 2})
	wantPlace(t, l, queued(tree, "b", 2), ledger.Place{Held: true, Taken: 2})
	wantPlace(t, l, queued(tree, "c", 2), ledger.Place{Ahead: 0, Taken: 2})
	// A queued agent that leaves moves those behind it up.
	free(t, l, tree, "c", true)
	wantPlace(t, l, queued(tree, "d", 2), ledger.Place{Ahead: 0, Taken: 2})
	free(t, l, tree, "b", true)
	wantPlace(t, l, queued(tree, "d", 2), ledger.Place{Held: true, Taken: 2})
	wantPlaces(t, l, tree, []string{"d", "root"}, nil)

	// No limit: nobody queues.
	open := setup(t, l, ledger.Ceiling{})
	for i, a := range []string{"a", "b", "c"} {
		wantPlace(t, l, queued(open, a, 0), ledger.Place{Held: true, Taken: i + 1})
	}
}

// testPlaceFreedOnce frees a place once however often the agent's finish
// is replayed: a second free of the same agent gives no one else its
// place, and an agent never seen frees nothing.
func testPlaceFreedOnce(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{})
	wantPlace(t, l, queued(tree, "a", 1), ledger.Place{Held: true, Taken: 1})
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Ahead: 0, Taken: 1})
	wantPlace(t, l, queued(tree, "c", 1), ledger.Place{Ahead: 1, Taken: 1})
	free(t, l, tree, "a", true)
	free(t, l, tree, "a", false)
	free(t, l, tree, "never-seen", false)
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Held: true, Taken: 1})
	wantPlace(t, l, queued(tree, "c", 1), ledger.Place{Ahead: 0, Taken: 1})
	wantPlaces(t, l, tree, []string{"b"}, []string{"c"})
	free(t, l, tree, "b", true)
	free(t, l, tree, "b", false)
	wantPlace(t, l, queued(tree, "c", 1), ledger.Place{Held: true, Taken: 1})
	free(t, l, tree, "c", true)
	wantPlaces(t, l, tree, nil, nil)
}

// testPlaceRunning holds a place for an agent that runs already at once,
// over the limit, taking it out of the queue; freeing it hands on no place
// while the places held are still over the limit.
func testPlaceRunning(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{})
	wantPlace(t, l, queued(tree, "a", 1), ledger.Place{Held: true, Taken: 1})
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Ahead: 0, Taken: 1})
	wantPlace(t, l, queued(tree, "c", 1), ledger.Place{Ahead: 1, Taken: 1})
	wantPlace(t, l, ledger.PlaceRequest{Tree: tree, Agent: "c", Limit: 1, Running: true}, ledger.Place{Held: true, Taken: 2})
	wantPlace(t, l, ledger.PlaceRequest{Tree: tree, Agent: "c", Limit: 1, Running: true}, ledger.Place{Held: true, Taken: 2})
	wantPlaces(t, l, tree, []string{"a", "c"}, []string{"b"})
	free(t, l, tree, "c", true)
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Ahead: 0, Taken: 1})
	free(t, l, tree, "a", true)
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Held: true, Taken: 1})
}

// testPlaceClaimLapses gives a place to an agent that never starts (its
// starter died before submitting it): the place lapses after its Claim,
// and goes to the next in the queue.
func testPlaceClaimLapses(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{})
	never := queued(tree, "never-started", 1)
	never.Claim = 50 * time.Millisecond
	wantPlace(t, l, never, ledger.Place{Held: true, Taken: 1})
	wantPlace(t, l, queued(tree, "next", 1), ledger.Place{Ahead: 0, Taken: 1})
	testkit.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if p := take(t, l, queued(tree, "next", 1)); !p.Held {
			return fmt.Errorf("next = %+v while the unclaimed place has not lapsed", p)
		}
		return nil
	})
	wantPlaces(t, l, tree, []string{"next"}, nil)
	free(t, l, tree, "never-started", false)
}

// testPlaceTurnLapses drops a queued agent that stopped asking (its
// waiter died) after its Keep: it no longer holds up those behind it.
func testPlaceTurnLapses(t *testing.T, l ledger.Ledger) {
	tree := setup(t, l, ledger.Ceiling{})
	wantPlace(t, l, queued(tree, "a", 1), ledger.Place{Held: true, Taken: 1})
	gone := queued(tree, "gone", 1)
	gone.Keep = 50 * time.Millisecond
	wantPlace(t, l, gone, ledger.Place{Ahead: 0, Taken: 1})
	wantPlace(t, l, queued(tree, "waits", 1), ledger.Place{Ahead: 1, Taken: 1})
	testkit.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if p := take(t, l, queued(tree, "waits", 1)); p.Ahead != 0 {
			return fmt.Errorf("waits = %+v while the lapsed turn is still ahead", p)
		}
		return nil
	})
	free(t, l, tree, "a", true)
	wantPlace(t, l, queued(tree, "waits", 1), ledger.Place{Held: true, Taken: 1})
	wantPlaces(t, l, tree, []string{"waits"}, nil)
}

// testPlacesInvalid refuses malformed requests and a tree that does not
// exist.
func testPlacesInvalid(t *testing.T, l ledger.Ledger) {
	ctx := context.Background()
	tree := setup(t, l, ledger.Ceiling{})
	for _, tt := range []struct {
		name string
		p    ledger.PlaceRequest
	}{
		{"no tree", ledger.PlaceRequest{Agent: "a", Keep: time.Hour}},
		{"no agent", ledger.PlaceRequest{Tree: tree, Keep: time.Hour}},
		{"negative limit", ledger.PlaceRequest{Tree: tree, Agent: "a", Limit: -1, Keep: time.Hour}},
		{"negative claim", ledger.PlaceRequest{Tree: tree, Agent: "a", Claim: -time.Second, Keep: time.Hour}},
		{"queued without a keep", ledger.PlaceRequest{Tree: tree, Agent: "a"}},
	} {
		if _, err := l.TakePlace(ctx, tt.p); !errors.Is(err, protocol.ErrInvalidField) {
			t.Errorf("TakePlace(%s) = %v, want ErrInvalidField", tt.name, err)
		}
	}
	if _, err := l.FreePlace(ctx, tree, ""); !errors.Is(err, protocol.ErrInvalidField) {
		t.Errorf("FreePlace of no agent = %v, want ErrInvalidField", err)
	}
	unknown := NewTree(t)
	if _, err := l.TakePlace(ctx, queued(unknown, "a", 1)); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Errorf("TakePlace on an unknown tree = %v, want ErrTreeUnknown", err)
	}
	if _, err := l.FreePlace(ctx, unknown, "a"); !errors.Is(err, ledger.ErrTreeUnknown) {
		t.Errorf("FreePlace on an unknown tree = %v, want ErrTreeUnknown", err)
	}
	// A Running take needs no Keep.
	wantPlace(t, l, ledger.PlaceRequest{Tree: tree, Agent: "a", Limit: 1, Running: true}, ledger.Place{Held: true, Taken: 1})
}

// testPlacesWatched tells a watcher of the tree when a freed place is
// given to a queued agent.
func testPlacesWatched(t *testing.T, l ledger.Ledger) {
	w, ok := l.(ledger.PlaceWatcher)
	if !ok {
		t.Skip("the ledger does not implement PlaceWatcher")
	}
	tree := setup(t, l, ledger.Ceiling{})
	ch, err := w.WatchPlaces(t.Context(), tree)
	if err != nil {
		t.Fatalf("WatchPlaces = %v", err)
	}
	wantPlace(t, l, queued(tree, "a", 1), ledger.Place{Held: true, Taken: 1})
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Ahead: 0, Taken: 1})
	free(t, l, tree, "a", true)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice within 10s of a place given to b")
	}
	wantPlace(t, l, queued(tree, "b", 1), ledger.Place{Held: true, Taken: 1})
}

// testPlacesConcurrent has 24 agents ask for 3 places at once, each
// freeing its place once given: never more than 3 hold one at once, as
// the agents count them and as the ledger does, and every agent gets one.
func testPlacesConcurrent(t *testing.T, l ledger.Ledger) {
	const agents, limit = 24, 3
	tree := setup(t, l, ledger.Ceiling{})
	w, _ := l.(ledger.PlaceWatcher)
	var holding, most, served atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for i := range agents {
		wg.Go(func() {
			ctx := t.Context()
			var notices <-chan struct{}
			if w != nil {
				ch, err := w.WatchPlaces(ctx, tree)
				if err != nil {
					errs <- err
					return
				}
				notices = ch
			}
			p := queued(tree, fmt.Sprintf("agent%02d", i), limit)
			for {
				got, err := l.TakePlace(ctx, p)
				if err != nil {
					errs <- err
					return
				}
				if got.Taken > limit {
					select { // reported once is enough; the agent goes on
					case errs <- fmt.Errorf("TakePlace(%s) = %+v: more places taken than the %d there are", p.Agent, got, limit):
					default:
					}
				}
				if got.Held {
					break
				}
				select { // a poll as well as the notice: one may be lost
				case <-notices:
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			}
			n := holding.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			holding.Add(-1)
			if _, err := l.FreePlace(ctx, tree, p.Agent); err != nil {
				errs <- err
				return
			}
			served.Add(1)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := most.Load(); n > limit {
		t.Errorf("%d agents held a place at once, want at most %d", n, limit)
	}
	if n := served.Load(); n != agents {
		t.Errorf("%d agents were given a place, want %d", n, agents)
	}
	wantPlaces(t, l, tree, nil, nil)
}
