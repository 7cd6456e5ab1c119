package sandboxer

import (
	"context"
	"sync"
)

// running are the cancel functions of each run's operations in progress,
// so that a stop (the run cancelled) ends its commands at once, wherever
// they are in their wall-clock allowance, and each run's operations
// admitted and not yet ended, so that a close waits for them.
type running struct {
	mu       sync.Mutex
	runs     map[string]map[uint64]context.CancelFunc
	admitted map[string]map[uint64]chan struct{}
	next     uint64 // numbers the operations, and stamps the opens
	// opens stamps each run's last open, from next, until a close of the
	// run is carried out: a close that waited (settle) while the run was
	// opened again is stale (closed). closes are the runs with a close
	// under way.
	opens  map[string]uint64
	closes map[string]bool
}

// track returns a context for one operation of run that stop cancels, and
// the function that forgets it when the operation is over.
func (r *running) track(ctx context.Context, run string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = make(map[string]map[uint64]context.CancelFunc)
	}
	if r.runs[run] == nil {
		r.runs[run] = make(map[uint64]context.CancelFunc)
	}
	r.next++
	id := r.next
	r.runs[run][id] = cancel
	return ctx, func() {
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.runs[run], id)
		if len(r.runs[run]) == 0 {
			delete(r.runs, run)
		}
	}
}

// stop cancels every operation of run in progress and reports how many.
func (r *running) stop(run string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.runs[run] {
		cancel()
	}
	return len(r.runs[run])
}

// admit records an operation of run admitted here, until the function it
// returns is called when the operation has ended, so that a close of the
// run waits for it (settle).
func (r *running) admit(run string) func() {
	done := make(chan struct{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admitted == nil {
		r.admitted = make(map[string]map[uint64]chan struct{})
	}
	if r.admitted[run] == nil {
		r.admitted[run] = make(map[uint64]chan struct{})
	}
	r.next++
	id := r.next
	r.admitted[run][id] = done
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.admitted[run], id)
		if len(r.admitted[run]) == 0 {
			delete(r.admitted, run)
		}
		close(done)
	}
}

// closing is a close of a run as it came: the run's operations admitted
// before it, which it waits for, and the stamp of the run's last open
// then.
type closing struct {
	pending []chan struct{}
	opened  uint64
}

// closingNow reports whether a close of run is under way: a coordinator
// that asks again while the first waits is answered at once rather than
// holding a place of its own.
func (r *running) closingNow(run string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closes[run]
}

// closing registers a close of run, admitted, in the order the ops came;
// closed ends it. A close that names an open (opened, not zero) is
// registered only if that open is the run's last here, and ok says
// whether it was: one that another open followed gives nothing back.
func (r *running) closing(run string, opened uint64) (c closing, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if opened != 0 && r.opens[run] != opened {
		return c, false
	}
	if r.closes == nil {
		r.closes = make(map[string]bool)
	}
	r.closes[run] = true
	for _, done := range r.admitted[run] {
		c.pending = append(c.pending, done)
	}
	c.opened = r.opens[run]
	return c, true
}

// settle returns once every operation of c's run admitted before c came
// has ended, or ctx has. A close waits so: its coordinator may close the
// run as it lets go of it with an operation still here (a tool call it
// stopped waiting for), and that operation must end as it would have,
// its reply kept for the next coordinator to ask for, not fail on a
// workspace closed under it.
func (c closing) settle(ctx context.Context) {
	for _, done := range c.pending {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// opened stamps an open of run, in the order the ops came, from a count
// that only grows, and returns the stamp.
func (r *running) opened(run string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opens == nil {
		r.opens = make(map[string]uint64)
	}
	r.next++
	r.opens[run] = r.next
	return r.next
}

// closed ends c, a close of run, once it has settled, and reports whether
// to carry it out: not if run was opened again since c came. A close
// waits for the run's operations before it, and meanwhile the
// coordinator that sent it may have let go of the run and another taken
// it over and opened it: that close must not take the workspace, the
// skills or the MCP servers from the new one. A close carried out
// forgets the run's opens.
func (r *running) closed(run string, c closing) (carryOut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.closes, run)
	if r.opens[run] != c.opened {
		return false
	}
	delete(r.opens, run)
	return true
}
