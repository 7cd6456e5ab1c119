package coordinator

import "time"

// SetSweepInterval makes the sweep of decided approvals run every d, for
// a test that must show a decided run is carried on without it; the
// returned func restores it. Call it before any coordinator starts.
func SetSweepInterval(d time.Duration) (restore func()) {
	was := sweepInterval
	sweepInterval = d
	return func() { sweepInterval = was }
}
