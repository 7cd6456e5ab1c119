package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// backoff is the schedule of a retry: the wait after a try that failed,
// doubled after each up to max (a max of zero keeps it fixed), and how
// many waits there may be (zero for no bound). Each caller gives its own
// timings: they are what the fault suite was tuned against.
type backoff struct {
	wait time.Duration
	max  time.Duration
	// waits, when not zero, ends the retry after that many waits with the
	// last try's error: n waits make n tries, and the wait after the last
	// one is kept (the caller goes on to ask the same service).
	waits int
	// sleep waits d or until ctx ends, whichever comes first, and returns
	// ctx's error if it ended; nil is the real clock. Tests give their own.
	sleep func(ctx context.Context, d time.Duration) error
}

// retrying calls try until it succeeds or ends. A try returns nil when it
// succeeded, done(err) to end the retry with err at once, again(d) to be tried
// again after d (at once for zero) whatever the schedule says, and any
// other error to be tried again after the schedule's next wait.
//
// retrying returns nil once try succeeds; done's error; the last try's error
// when the waits are spent; or ctx's error when ctx ends before a try
// (never before the first: try sees ctx itself) or during a wait.
func retrying(ctx context.Context, b backoff, try func() error) error {
	pause := b.sleep
	if pause == nil {
		pause = sleep
	}
	wait, waited := b.wait, 0
	for {
		err := try()
		if err == nil {
			return nil
		}
		var f *finished
		if errors.As(err, &f) {
			return f.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var a *tryAgain
		if errors.As(err, &a) {
			// Not the schedule's wait: it does not advance, nor count.
			if a.after > 0 {
				if serr := pause(ctx, a.after); serr != nil {
					return serr
				}
			}
			continue
		}
		if serr := pause(ctx, wait); serr != nil {
			return serr
		}
		if waited++; b.waits > 0 && waited >= b.waits {
			return err
		}
		if b.max > wait {
			wait = min(2*wait, b.max)
		}
	}
}

// finished is a try's error that ends its retry.
type finished struct{ err error }

func (f *finished) Error() string {
	if f.err == nil {
		return "done"
	}
	return f.err.Error()
}

func (f *finished) Unwrap() error { return f.err }

// done ends a retry with err, nil included.
func done(err error) error { return &finished{err: err} }

// tryAgain is a try's request to be made again after a wait of its own.
type tryAgain struct{ after time.Duration }

func (a *tryAgain) Error() string { return "try again in " + a.after.String() }

// again has a retry try again after d, at once for zero, instead of after
// its schedule's next wait.
func again(d time.Duration) error { return &tryAgain{after: d} }

// sleep waits d or until ctx ends, and returns ctx's error if it ended.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// The JetStream calls of a run: each bounded in time, and its writes
// tried again while JetStream does not answer.

// jsTimeout bounds one JetStream call made under a run's context. That
// context's deadline is the run's own, often hours away, and the client
// then applies no timeout of its own: a request or an answer lost while a
// restarted cluster elects its leaders was waited for until then (seen in
// the e2e suite, every resumed run stuck in its first turn lookup).
var jsTimeout = 10 * time.Second

// jsCall returns ctx bounded by jsTimeout.
func jsCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, jsTimeout)
}

// appendWindow bounds how long a record's append is retried while the
// trace does not answer: a stream electing a new leader after a node died,
// or a server restarting.
const appendWindow = 2 * time.Minute

// persistBackoff is how persist waits between its tries.
var persistBackoff = backoff{wait: 100 * time.Millisecond, max: 5 * time.Second}

// append commits a record to the run's trace, once the step record begun
// before it is in (committed), trying again while the trace stream does not
// answer, within appendWindow and ctx. A retry cannot write twice (the
// writer's message id) nor past another writer (fencing), so only
// protocol.ErrFenced, the end of ctx, or a stream that stays silent ends
// it.
func (d *driver) append(ctx context.Context, rec *protocol.Record) error {
	if !d.committed(ctx) {
		return errCommitLost
	}
	return d.write(ctx, rec)
}

// write is append without the wait for a record begun before.
func (d *driver) write(ctx context.Context, rec *protocol.Record) error {
	return d.persist(ctx, "append to the trace", func() error {
		ctx, cancel := jsCall(ctx)
		defer cancel()
		return d.w.Append(ctx, rec)
	}, "kind", rec.Kind, "step", rec.Step)
}

// persist runs write, an idempotent write to JetStream, until it succeeds,
// trying again while JetStream does not answer (a stream electing a new
// leader after a node died, or a server restarting) within appendWindow
// and ctx. protocol.ErrFenced ends it at once: it will not change. It
// returns write's last error, also when ctx ends while it waits.
func (d *driver) persist(ctx context.Context, what string, write func() error, attrs ...any) error {
	deadline := time.Now().Add(appendWindow)
	var err error
	_ = retrying(ctx, persistBackoff, func() error {
		err = write()
		if err == nil || errors.Is(err, protocol.ErrFenced) || ctx.Err() != nil || time.Now().After(deadline) {
			return done(err)
		}
		d.log.Warn(what+"; trying again", append(attrs, "err", err)...)
		return err
	})
	return err
}
