package coordinator

import "testing"

// TestSlot takes slots as Run's callback does and gives them back along
// every path a holder can take: released twice, deferred and passed on,
// passed after it was released. Each slot is given back exactly once.
func TestSlot(t *testing.T) {
	c := &Coordinator{slots: make(chan struct{}, 4)}
	// Another run's slot, held throughout: a slot given back twice takes
	// it, where an empty channel would block the test instead of failing it.
	c.slots <- struct{}{}
	take := func() *slot {
		c.slots <- struct{}{}
		return c.heldSlot()
	}
	inUse := func(want int, when string) {
		t.Helper()
		if n := len(c.slots) - 1; n != want {
			t.Fatalf("%s: %d slots in use, want %d", when, n, want)
		}
	}

	s := take()
	s.release()
	s.release()
	inUse(0, "released twice")

	var kept *slot
	func() {
		s := take()
		defer s.release()
		kept = s.pass()
	}()
	inUse(1, "passed on, its first holder returned")
	kept.release()
	inUse(0, "released by whoever it was passed to")

	s = take()
	s.release()
	late := s.pass()
	late.release()
	inUse(0, "passed after it was released")

	a, b := take(), take()
	b2 := b.pass()
	a.release()
	b.release()
	inUse(1, "one released, one passed on")
	b2.release()
	b2.release()
	inUse(0, "all released")
}
