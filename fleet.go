package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/internal/streams"
)

// Instance is one role process of the cluster as its micro service
// describes itself: the name (harness-coordinator, harness-worker,
// harness-sandboxer), its id and its metadata (a worker's provider and
// pools, a sandboxer's backends and roots).
type Instance struct {
	Service  string            `json:"service"`
	ID       string            `json:"id"`
	Version  string            `json:"version"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Fleet lists the role instances that answer within wait (default 500
// ms): what `nats micro info` shows, for each of the three services.
func (c *Client) Fleet(ctx context.Context, wait time.Duration) ([]Instance, error) {
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	var out []Instance
	for _, svc := range []string{"harness-coordinator", "harness-worker", "harness-sandboxer"} {
		subj, err := micro.ControlSubject(micro.InfoVerb, svc, "")
		if err != nil {
			return nil, err
		}
		// Every instance answers; they are collected until none has for a
		// while, as the nats CLI does.
		err = streams.Gather(ctx, c.nc, subj, wait, func(m *nats.Msg) bool {
			var info micro.Info
			if json.Unmarshal(m.Data, &info) == nil {
				out = append(out, Instance{Service: info.Name, ID: info.Metadata["id"], Version: info.Version, Metadata: info.Metadata})
			}
			return false
		})
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("list the fleet: %w", err)
		}
	}
	return out, nil
}

// Serving says why no instance of the fleet could serve a run of pool
// with backend, or "" when one can: no worker serves the pool, or no
// sandboxer has the backend ("" and "auto" name any).
func Serving(fleet []Instance, pool, backend string) string {
	pool = strings.TrimSpace(pool)
	if pool == "" {
		pool = "default"
	}
	var pools, backends []string
	worker, sandboxer := false, false
	for _, in := range fleet {
		switch in.Service {
		case "harness-worker":
			ps := strings.Split(in.Metadata["pools"], ",")
			pools = append(pools, ps...)
			worker = worker || slices.Contains(ps, pool)
		case "harness-sandboxer":
			bs := strings.Split(in.Metadata["backends"], ",")
			backends = append(backends, bs...)
			sandboxer = sandboxer || backend == "" || backend == "auto" || slices.Contains(bs, backend)
		}
	}
	switch {
	case !worker && len(pools) == 0:
		return fmt.Sprintf("no worker is running: the run's turns (pool %s) wait for one", pool)
	case !worker:
		slices.Sort(pools)
		return fmt.Sprintf("no worker serves pool %s (the workers serve %s): the run's turns wait for one", pool, strings.Join(slices.Compact(pools), ", "))
	case !sandboxer && len(backends) == 0:
		return "no sandboxer is running: the run's workspace waits for one"
	case !sandboxer:
		slices.Sort(backends)
		return fmt.Sprintf("no sandboxer has the %s backend (they have %s)", backend, strings.Join(slices.Compact(backends), ", "))
	}
	return ""
}
