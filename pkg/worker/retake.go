package worker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A worker takes its pool's consumer up again when it loses it (consume).
// Whether a task may then come twice depends on how it was lost:
//
//   - A pull thought lost (two heartbeats missed) leaves the consumer as it
//     was: the tasks this worker holds stay pending on it, to no one else,
//     and the ones in the old buffer are served as they come.
//   - A consumer deleted (by hand, or gone with the steps stream) forgets
//     what it delivered. If the stream kept its tasks, the consumer made
//     again delivers them all again, as first deliveries, while this
//     worker may be calling for some and holds others in its old buffer.
//     Each would then be paid for twice.
//
// So after a deletion, a task that may have been delivered before is
// looked up in the turns stream before it is called for, as a redelivery
// is: one from the old buffer, and one stored before the deletion that the
// new consumer brings. An answer already published is not paid for again;
// and a task this worker is calling for now, brought again, is given back
// for a moment (callingAgain), marked as given back without a call so
// that its next delivery does not count it as one, until that call is
// answered. A task the stream lost with its consumer is still served from
// the old buffer: nobody else can.

// pullOf is what serve knows of the consumer a task came through.
type pullOf struct {
	// gone: the consumer was deleted, and the task came from the buffer
	// it left behind.
	gone atomic.Bool
	// made: when the consumer was made, by the server's clock.
	made time.Time
	// since: tasks stored before it may have been delivered by a consumer
	// this worker lost by deletion; zero when it lost none.
	since time.Time
}

// maybeAgain reports whether a delivery may not be the task's first: it is
// a redelivery, or came from a deleted consumer's buffer, or was stored
// before the consumer that brought it was made again.
func (p *pullOf) maybeAgain(md *jetstream.MsgMetadata) bool {
	if md == nil {
		return false
	}
	return md.NumDelivered > 1 || p.gone.Load() || !p.since.IsZero() && md.Timestamp.Before(p.since)
}

// callingAgain is how long a task this worker is calling for, brought
// again by a consumer made anew, is put off before it comes back (and is
// then looked up in the turns stream, as any redelivery is).
const callingAgain = 2 * time.Second

// calling is the set of tasks (by key) this worker is calling for now.
type calling struct {
	mu   sync.Mutex
	keys map[string]bool
}

// take marks key as called for, and reports false if it already was.
func (c *calling) take(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys[key] {
		return false
	}
	if c.keys == nil {
		c.keys = map[string]bool{}
	}
	c.keys[key] = true
	return true
}

func (c *calling) done(key string) {
	c.mu.Lock()
	delete(c.keys, key)
	c.mu.Unlock()
}
