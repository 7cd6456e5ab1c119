package sandboxer

import (
	"context"

	"github.com/ioharness/harness/pkg/sandbox"
)

// metered returns b counting every command it runs in the node's metrics:
// how it ended, how long it took, which cap stopped it.
func (s *Sandboxer) metered(b sandbox.Backend) sandbox.Backend {
	return meteredBackend{Backend: b, s: s}
}

type meteredBackend struct {
	sandbox.Backend
	s *Sandboxer
}

func (m meteredBackend) Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error) {
	r, err := m.Backend.Run(ctx, spec)
	if err != nil || r == nil {
		m.s.m.Exec(m.Backend.Name(), nil)
		return r, err
	}
	m.s.m.Exec(m.Backend.Name(), &r.Report)
	return r, nil
}

// openWorkspaces is the number of workspaces the node holds, for the
// metrics.
func (s *Sandboxer) openWorkspaces() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(len(s.workspaces))
}
