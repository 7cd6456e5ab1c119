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
	next     uint64
	// opens counts the opens of each run that came here, until a close
	// of the run is carried out: a close that waited (settle) while the
	// run was opened again is stale (reopened).
	opens map[string]uint64
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

// settle returns once every operation of run admitted before it was
// called has ended, or ctx has. A close waits so: its coordinator may
// close the run as it lets go of it with an operation still here (a tool
// call it stopped waiting for), and that operation must end as it would
// have, its reply kept for the next coordinator to ask for, not fail on a
// workspace closed under it.
func (r *running) settle(ctx context.Context, run string) {
	r.mu.Lock()
	var pending []chan struct{}
	for _, done := range r.admitted[run] {
		pending = append(pending, done)
	}
	r.mu.Unlock()
	for _, done := range pending {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// opened counts an open of run, in the order the ops came.
func (r *running) opened(run string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opens == nil {
		r.opens = make(map[string]uint64)
	}
	r.opens[run]++
}

// openCount is how many opens of run came since its last close was
// carried out, for a close that comes now to pass to reopened.
func (r *running) openCount(run string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opens[run]
}

// reopened reports whether run was opened again since a close of it
// came, when the run's opens stood at seen; if not, the close is carried
// out and the count starts again. A close waits for the run's operations
// before it (settle), and meanwhile the coordinator that sent it may have
// let go of the run and another taken it over and opened it: that
// close must not take the workspace, the skills or the MCP servers from
// the new one.
func (r *running) reopened(run string, seen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opens[run] != seen {
		return true
	}
	delete(r.opens, run)
	return false
}
