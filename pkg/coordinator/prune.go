package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/metrics"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// DefaultRetention is how long a finished run is kept by default: its
// trace, its index entry, its approvals and its cancel.
const DefaultRetention = 30 * 24 * time.Hour

// A run's records have the ages of its steps, so no stream limit can say
// "the runs that finished a month ago": a limit on age would take the
// first records of a run paused that long, which its resume needs. So
// finished runs are forgotten by a sweep, run by run, from the index.
// What limits do fit is kept by them: the turns stream keeps a day, the
// ops bucket a week.

// prunable lists the runs of states that finished at least keep before
// now, oldest first. A run running or paused is never among them, however
// old.
func prunable(states []protocol.RunState, now time.Time, keep time.Duration) []string {
	var old []protocol.RunState
	for _, st := range states {
		if (st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed) && !st.Updated.After(now.Add(-keep)) {
			old = append(old, st)
		}
	}
	slices.SortFunc(old, func(a, b protocol.RunState) int { return a.Updated.Compare(b.Updated) })
	runs := make([]string, len(old))
	for i, st := range old {
		runs[i] = st.Run
	}
	return runs
}

// prune forgets the runs that finished longer ago than the retention,
// every PruneInterval, until ctx ends.
func (c *Coordinator) prune(ctx context.Context) {
	every(ctx, c.cfg.PruneInterval, func() {
		n, err := c.pruneOnce(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			c.log.Warn("forget finished runs", "err", err)
		}
		if n > 0 {
			c.log.Info("forgot finished runs", "runs", n, "finished before", time.Now().Add(-c.cfg.Retention).Format(time.RFC3339))
		}
	})
}

// pruneOnce forgets the runs that finished at least the retention before
// now, and says how many. Every coordinator sweeps; forgetting is
// idempotent, so two at once only repeat work.
func (c *Coordinator) pruneOnce(ctx context.Context, now time.Time) (int, error) {
	states, err := c.index.List(ctx)
	if err != nil {
		return 0, err
	}
	// Objects before runs: what the runs kept need is touched from their
	// traces before anything is deleted.
	if _, err := c.pruneObjects(ctx, now, states); err != nil {
		return 0, err
	}
	n := 0
	for _, run := range prunable(states, now, c.cfg.Retention) {
		if err := c.forget(ctx, run); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// forget removes a finished run: its trace, its approvals, its cancel,
// and last its index entry, so a forget cut short is found and finished by
// the next sweep.
func (c *Coordinator) forget(ctx context.Context, run string) error {
	if err := c.assets.Trace.Purge(ctx, jetstream.WithPurgeSubject(wire.Trace(run))); err != nil {
		return fmt.Errorf("purge the trace of %s: %w", run, err)
	}
	lister, err := c.assets.Approvals.ListKeysFiltered(ctx, run+".>")
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return fmt.Errorf("list the approvals of %s: %w", run, err)
	}
	if lister != nil {
		for k := range lister.Keys() {
			if err := c.assets.Approvals.Purge(ctx, k); err != nil {
				return fmt.Errorf("forget approval %s: %w", k, err)
			}
		}
	}
	if err := c.assets.Cancels.Purge(ctx, run); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget the cancel of %s: %w", run, err)
	}
	if err := c.assets.Runs.Purge(ctx, run); err != nil {
		return fmt.Errorf("forget run %s: %w", run, err)
	}
	return nil
}

// clusterState reads what the cluster holds as a whole, for the
// cluster-wide gauges a scrape reports.
func (c *Coordinator) clusterState() (metrics.ClusterState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := metrics.ClusterState{Runs: map[string]int{}, Queued: map[string]uint64{}, Inflight: map[string]int{}}
	runs, err := c.index.List(ctx)
	if err != nil {
		return st, err
	}
	ended := map[string]bool{}
	for _, r := range runs {
		st.Runs[string(r.Status)]++
		if r.Status == protocol.StatusCompleted || r.Status == protocol.StatusFailed {
			ended[r.Run] = true
		}
	}
	aps, err := c.approvals.List(ctx)
	if err != nil {
		return st, err
	}
	for _, ap := range aps {
		if ap.Pending != nil && ap.Decision == nil && !ended[ap.Pending.Run] {
			st.Pending++
		}
	}
	infos := c.assets.Steps.ListConsumers(ctx)
	for info := range infos.Info() {
		if pool, ok := strings.CutPrefix(info.Name, "workers-"); ok {
			st.Queued[pool] = info.NumPending
			st.Inflight[pool] = info.NumAckPending
		}
	}
	return st, infos.Err()
}

// pruneObjects deletes the blobs and workspace objects no run kept may
// need: those neither written nor touched within the retention. The store
// names objects by their content, so one may serve many runs; each use
// touches it (a blob put again, a snapshot uploaded again), and a run that
// lives across the horizon (started more than half a retention ago and
// not forgotten) has the objects it refers to touched here first, so its
// trace and its workspace stay whole however long it lasts.
func (c *Coordinator) pruneObjects(ctx context.Context, now time.Time, states []protocol.RunState) (int, error) {
	forgotten := map[string]bool{}
	for _, run := range prunable(states, now, c.cfg.Retention) {
		forgotten[run] = true
	}
	stores := map[string]jetstream.ObjectStore{"blobs": c.assets.Blobs, "workspaces": c.assets.Workspaces}
	for _, st := range states {
		if forgotten[st.Run] || !st.Started.Before(now.Add(-c.cfg.Retention/2)) {
			continue
		}
		refs, err := c.refsOf(ctx, st.Run)
		if err != nil {
			return 0, err
		}
		for store, names := range refs {
			for _, name := range names {
				info, err := stores[store].GetInfo(ctx, name)
				if err != nil {
					continue // gone already: nothing to keep
				}
				if err := trace.Touch(ctx, stores[store], info, now); err != nil {
					return 0, fmt.Errorf("touch %s %s: %w", store, name, err)
				}
			}
		}
	}
	n := 0
	horizon := now.Add(-c.cfg.Retention)
	for store, objs := range stores {
		infos, err := objs.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			return n, fmt.Errorf("list %s: %w", store, err)
		}
		for _, info := range infos {
			if info.Deleted || !trace.LastUsed(info).Before(horizon) {
				continue
			}
			if err := objs.Delete(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
				return n, fmt.Errorf("delete %s %s: %w", store, info.Name, err)
			}
			n++
		}
	}
	return n, nil
}

// refsOf lists the objects run's trace refers to, by store: the blobs
// holding its turns, observations and images, and the workspace snapshot
// and patch.
func (c *Coordinator) refsOf(ctx context.Context, run string) (map[string][]string, error) {
	recs, _, err := c.trace.Read(ctx, run)
	if err != nil {
		return nil, err
	}
	refs := map[string][]string{}
	add := func(store, name string) {
		if name != "" {
			refs[store] = append(refs[store], name)
		}
	}
	for _, r := range recs {
		add("blobs", r.TurnRef)
		for _, o := range slices.Concat(r.Observations, r.Rereads) {
			add("blobs", o.Ref)
			add("blobs", o.ImageRef)
		}
		if r.Contract != nil {
			add("workspaces", r.Contract.Workspace.Snapshot)
		}
		if r.Patch != nil {
			add("workspaces", r.Patch.Ref)
		}
	}
	return refs, nil
}
