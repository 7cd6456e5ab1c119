package trace

import "time"

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
