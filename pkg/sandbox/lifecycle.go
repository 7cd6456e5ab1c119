package sandbox

import "context"

// Optional interfaces of a Backend with state of its own: a caller that
// holds backends finds them by type assertion, and a backend declares
// them with a compile-time check, such as
//
//	var _ sandbox.Reconciler = (*Backend)(nil)
//
// The docker backend is a Reconciler and a Shutdowner; the native backend
// a Closer; the floor none of them.

// Reconciler is a Backend that leaves state outside the sandboxer's
// process (the docker backend's containers), labelled with the run named
// by WithRun. Reconcile removes what no one should still be running: what
// an earlier process of this sandboxer left behind, and what belongs to a
// run for which live returns false (live may be nil: then only the
// former). It never touches what the backend is running now, and returns
// how many it removed. A sandboxer calls it once at start.
type Reconciler interface {
	Reconcile(ctx context.Context, live func(run string) bool) (removed int, err error)
}

// Closer is a Backend that holds resources between commands (the native
// backend's warm sandboxes and its reaper). Close releases them without
// stopping commands that are running; it is idempotent. A sandboxer calls
// it once no operation is in flight.
type Closer interface {
	Close() error
}

// Shutdowner is a Backend whose commands outlive a cancelled Run for a
// while (the docker backend removes its containers in the background).
// Shutdown stops taking commands, waits for those in progress and their
// cleanup until ctx ends, and releases the backend; it returns ctx.Err()
// when ctx ended first, and may be called more than once. A sandboxer
// calls it once no operation is in flight, with a deadline.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
}
