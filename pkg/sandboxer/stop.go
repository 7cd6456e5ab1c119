package sandboxer

import (
	"context"
	"sync"
)

// running are the cancel functions of each run's operations in progress,
// so that a stop (the run cancelled) ends its commands at once, wherever
// they are in their wall-clock allowance.
type running struct {
	mu   sync.Mutex
	runs map[string]map[uint64]context.CancelFunc
	next uint64
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
