package trace

import (
	"context"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// RewindForTest sets the sequence the writer expects, as if the
// acknowledgement of its last append had been lost.
func (w *Writer) RewindForTest(seq uint64) { w.last = seq }

// SetWaitPollForTest makes Index.Wait read the run's state every d until
// the returned function restores it.
func SetWaitPollForTest(d time.Duration) (restore func()) {
	old := waitPoll
	waitPoll = d
	return func() { waitPoll = old }
}

// ReadToForTest is readTo: Each with the sequence of the last record
// given rather than looked up.
func (t *Trace) ReadToForTest(ctx context.Context, run string, last uint64, fn func(*protocol.Record) error) (uint64, error) {
	return t.readTo(ctx, run, last, fresh, fn)
}

// SetDirectListBytesForTest bounds the bytes a direct listing of the index
// asks for, until the returned function restores the server's bound.
func SetDirectListBytesForTest(n int) (restore func()) {
	old := directListBytes
	directListBytes = n
	return func() { directListBytes = old }
}
