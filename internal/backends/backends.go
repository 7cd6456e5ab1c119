// Package backends builds the sandbox backends a sandboxer offers from a
// list of names, probing each once: a backend this machine cannot run is
// left out with the reason logged, so "auto" means the best that really
// works here, and every exec still records the backend that ran it.
package backends

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/sandbox"
)

// Build returns the backends named in order (a comma-separated list of
// "native", "docker" and "floor"), best first, leaving out those that do
// not start here. The floor always works. Errors: an unknown name, or no
// backend left.
//
// The docker backend runs dockerImage ("" for its default,
// harness-sandbox:latest), which must be on the engine already: nothing is
// pulled.
func Build(ctx context.Context, names, dockerImage string, log *slog.Logger) ([]sandbox.Backend, error) {
	var out []sandbox.Backend
	for _, name := range strings.Split(names, ",") {
		switch strings.TrimSpace(name) {
		case "native":
			b, err := sandbox.NewNative(sandbox.NativeConfig{})
			if err != nil {
				log.Warn("native sandbox unavailable; leaving it out", "err", err)
				continue
			}
			out = append(out, b)
		case "docker":
			b, err := sandbox.NewDocker(sandbox.DockerConfig{Image: dockerImage})
			if err != nil {
				log.Warn("docker sandbox unavailable; leaving it out", "err", err)
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = b.Ping(pctx)
			cancel()
			if err != nil {
				log.Warn("docker engine does not answer; leaving the docker sandbox out", "err", err)
				continue
			}
			out = append(out, b)
		case "floor":
			out = append(out, sandbox.NewFloor())
		case "":
		default:
			return nil, fmt.Errorf("unknown sandbox backend %q: use native, docker and floor", name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sandbox backend of %q works here; add floor", names)
	}
	return out, nil
}
