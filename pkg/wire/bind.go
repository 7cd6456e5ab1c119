package wire

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBindWait is how long Bind waits for the coordinators to create
// what a role binds to.
const DefaultBindWait = 2 * time.Minute

// lookupTimeout bounds one lookup: a request the server refuses for lack of
// permission is never answered, so only a timeout tells.
const lookupTimeout = 5 * time.Second

// PermissionError is the server refusing these credentials a subject a
// call needed. NATS drops a refused publish and tells the connection
// asynchronously, so the call itself only timed out; the subject is what
// the server named.
type PermissionError struct {
	// Subject is the subject the server refused.
	Subject string
	// Hint says what to change.
	Hint string
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("the NATS server refused these credentials %q (permissions violation): %s", e.Subject, e.Hint)
}

var refusedSubject = regexp.MustCompile(`(?i)(?:publish to|subscription to) "([^"]+)"`)

// explain turns a call that timed out because the server refused its
// subject into a *PermissionError; any other error is returned as it is.
func explain(nc *nats.Conn, err error) error {
	if err == nil || nc == nil {
		return err
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		return err
	}
	last := nc.LastError()
	if !errors.Is(last, nats.ErrPermissionViolation) {
		return err
	}
	m := refusedSubject.FindStringSubmatch(last.Error())
	if m == nil {
		return err
	}
	subj := m[1]
	hint := "give this role's NATS user publish permission on it (docs/security.md lists each role's permissions)"
	for _, create := range []string{"$JS.API.STREAM.CREATE.", "$JS.API.STREAM.UPDATE.", "$JS.API.CONSUMER.CREATE.", "$JS.API.CONSUMER.DURABLE.CREATE."} {
		if strings.HasPrefix(subj, create) {
			hint = "these credentials may not create the harness streams and consumers, which coordinators do; " +
				"start this role with --bind-streams (HARNESS_BIND_STREAMS=1) so it waits for what the coordinators create"
		}
	}
	return &PermissionError{Subject: subj, Hint: hint}
}

// Bind finds every stream and bucket that Ensure creates, without creating
// or changing any, waiting up to wait (DefaultBindWait when zero) for the
// coordinators to create what is missing. It is what a role whose
// credentials may only use the streams calls instead of Ensure. The Assets
// it returns make EnsureWorkerConsumer look a pool's consumer up instead of
// creating it.
//
// Errors: a *PermissionError at once when the server refuses a lookup; a
// stream or bucket still missing after wait, naming it.
func Bind(ctx context.Context, js jetstream.JetStream, wait time.Duration) (*Assets, error) {
	if wait == 0 {
		wait = DefaultBindWait
	}
	// Bind walks the same declarations as Ensure, so it binds to exactly
	// what Ensure would create; the mode travels in the context so the
	// declarations need not know about it.
	b := &binding{deadline: time.Now().Add(wait), wait: wait, nc: js.Conn()}
	a, err := ensure(context.WithValue(ctx, bindingKey{}, b), js, Config{})
	if err != nil {
		return nil, err
	}
	a.bind, a.bindWait = true, wait
	return a, nil
}

type bindingKey struct{}

// binding is Bind's state while it walks Ensure's declarations.
type binding struct {
	deadline time.Time
	wait     time.Duration
	nc       *nats.Conn
}

func bindingOf(ctx context.Context) *binding {
	b, _ := ctx.Value(bindingKey{}).(*binding)
	return b
}

// find looks one asset up with lookup, waiting while it is missing.
func find[T any](ctx context.Context, b *binding, name string, lookup func(context.Context) (T, error)) (T, error) {
	var zero T
	for {
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		v, err := lookup(lctx)
		cancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		var pe *PermissionError
		if errors.As(explain(b.nc, err), &pe) {
			return zero, pe
		}
		if time.Now().After(b.deadline) {
			if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
				return zero, fmt.Errorf("%s does not exist after %s: a coordinator creates it; start one against this NATS server", name, b.wait)
			}
			return zero, err
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return zero, err
		}
	}
}

// waitConsumer looks up a pool's consumer, waiting for a coordinator to
// create it.
func (a *Assets) waitConsumer(ctx context.Context, pool string) (jetstream.Consumer, error) {
	name := WorkerConsumer(pool)
	deadline := time.Now().Add(a.bindWait)
	for {
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		c, err := a.Steps.Consumer(lctx, name)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var pe *PermissionError
		if errors.As(explain(a.nc, err), &pe) {
			return nil, fmt.Errorf("bind to consumer %s: %w", name, pe)
		}
		if time.Now().After(deadline) {
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil, fmt.Errorf("bind to consumer %s on %s: it does not exist after %s: coordinators create it for the pools they are given (coordinator --pools %s)",
					name, StreamSteps, a.bindWait, pool)
			}
			return nil, fmt.Errorf("bind to consumer %s: %w", name, err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

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
