//go:build unix && !linux

package docker

import "time"

// cgroupUsage is what the cgroup of a container said while it ran.
type cgroupUsage struct {
	cpu    time.Duration
	capHit string
}

// cgroupWatch reads nothing outside Linux: the engine's cgroups are not on
// this machine.
type cgroupWatch struct{}

func (d *Backend) watchCgroup(id string, cpuMax time.Duration, onCap func(string)) *cgroupWatch {
	return &cgroupWatch{}
}

func (w *cgroupWatch) poke() {}

func (w *cgroupWatch) stop() cgroupUsage { return cgroupUsage{} }
