package worker

import (
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// observe counts one provider call in the worker's metrics: by the
// provider that served it, or the one asked when it failed.
func (w *Worker) observe(turn *protocol.Turn, err error, d time.Duration) {
	name := w.p.Name()
	if err == nil && turn != nil && turn.Served != "" {
		name = turn.Served
	}
	w.m.Provider(name, d, protocol.AsError(err))
}
