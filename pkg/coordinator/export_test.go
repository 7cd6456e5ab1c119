package coordinator

import (
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// SetSweepInterval makes the sweep of decided approvals run every d, for
// a test that must show a decided run is carried on without it; the
// returned func restores it. Call it before any coordinator starts.
func SetSweepInterval(d time.Duration) (restore func()) {
	was := sweepInterval
	sweepInterval = d
	return func() { sweepInterval = was }
}

// SetNodeGone sets how long a run's sandboxer may be gone before the run
// goes on with another serving its root; the returned func restores it.
func SetNodeGone(d time.Duration) (restore func()) {
	was := nodeGone
	nodeGone = d
	return func() { nodeGone = was }
}

// SetCommitHook has h run before every record a step's commit writes, on
// the commit's goroutine; an error from it is the write's. The returned
// func restores it. Call it before any coordinator starts.
func SetCommitHook(h func(*protocol.Record) error) (restore func()) {
	was := commitHook
	commitHook = h
	return func() { commitHook = was }
}

// SetLeaseClock makes now the clock of the leases of every coordinator
// made from here on; the returned func restores it.
func SetLeaseClock(now func() time.Time) (restore func()) {
	was := leaseClock
	leaseClock = now
	return func() { leaseClock = was }
}

// SetKidsLost has every finish of a sub-agent for which lost reports true
// go unheard by its waiting parent, and looked run after each look the
// parent takes at its sub-agents' states; the returned func restores
// both. Call it before any coordinator starts.
func SetKidsLost(lost func(child string) bool, looked func()) (restore func()) {
	wasLost, wasLooked := kidFinishLost, kidsLooked
	kidFinishLost, kidsLooked = lost, looked
	return func() { kidFinishLost, kidsLooked = wasLost, wasLooked }
}

// SetReadHook has h run in a resume between the trace read begun beside
// the lease and the look-up that checks it is whole.
func SetReadHook(h func(run string)) (restore func()) {
	was := readHook
	readHook = h
	return func() { readHook = was }
}

// SetIndexPutHook has h asked before every write of the run index a
// coordinator makes for a run's state, failing it with h's error, until
// the returned function restores it.
func SetIndexPutHook(h func(*protocol.RunState) error) (restore func()) {
	was := indexPutHook
	indexPutHook = h
	return func() { indexPutHook = was }
}

// SetAdmissionWaitHook has h called when an index entry or event of a run
// begins to wait for the run's admission to be told, until the returned
// function restores it.
func SetAdmissionWaitHook(h func(run string)) (restore func()) {
	was := admissionWaitHook
	admissionWaitHook = h
	return func() { admissionWaitHook = was }
}
