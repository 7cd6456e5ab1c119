package coordinator

import (
	"context"
	"sync/atomic"
)

// slot is one of the coordinator's run slots (Config.MaxRuns of them) in
// the hands of whoever holds it. Release gives it back once, however often
// it is called; pass hands it on. So a holder defers release and passes
// the slot to whoever keeps it beyond the holder's return: no path leaks
// the slot, and none gives it back twice.
type slot struct {
	slots chan struct{} // the coordinator's: one value in it per slot held
	held  atomic.Bool
}

// heldSlot is the slot the caller has just taken, by sending on c.slots.
func (c *Coordinator) heldSlot() *slot {
	s := &slot{slots: c.slots}
	s.held.Store(true)
	return s
}

// release gives the slot back, if it is still held here.
func (s *slot) release() {
	if s.held.CompareAndSwap(true, false) {
		<-s.slots
	}
}

// lend gives the slot back for a while the holder does no work, to be
// taken again with reclaim. It reports whether there was a slot to lend.
func (s *slot) lend() bool {
	if s.held.CompareAndSwap(true, false) {
		<-s.slots
		return true
	}
	return false
}

// reclaim takes a slot again after lend, waiting for one to be free, or
// returns ctx's error; the slot is then not held.
func (s *slot) reclaim(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		s.held.Store(true)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pass hands the slot on: the slot returned holds it, and s no longer
// does. A slot released already passes on nothing.
func (s *slot) pass() *slot {
	n := &slot{slots: s.slots}
	n.held.Store(s.held.CompareAndSwap(true, false))
	return n
}
