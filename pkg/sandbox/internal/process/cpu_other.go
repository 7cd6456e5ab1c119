//go:build unix && !linux

package process

import "time"

// CPUTime is not available here: it returns 0.
func CPUTime(pid int) time.Duration { return 0 }
