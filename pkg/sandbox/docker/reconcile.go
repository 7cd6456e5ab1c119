//go:build unix

package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Reconcile removes the harness containers that no one should still be
// running, and returns how many it removed:
//
//   - every container labelled with this sandboxer's ID (LabelSandboxer)
//     that this backend is not running now: what a previous process of
//     this sandboxer left behind, or a container whose removal failed;
//   - every container of another sandboxer whose LabelRun names a run for
//     which live returns false. Containers of other sandboxers without a
//     run label are left to their owners, and so are all of them when
//     live is nil.
//
// Call it once at start, and then now and then, with live reporting
// whether a run is still in progress (the coordinator's view). Containers
// this backend is running are never touched, whatever live says. Errors:
// a *protocol.Error with CodeSandbox when the engine cannot list
// containers; failures to remove single containers are joined into the
// returned error, after every other container was tried.
func (d *Backend) Reconcile(ctx context.Context, live func(run string) bool) (removed int, err error) {
	list, err := d.st.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelSandboxer),
	})
	if err != nil {
		return 0, d.engineError("list the harness containers", err)
	}
	var errs []error
	for _, c := range list.Items {
		if d.trackedAny(c.Names) {
			continue
		}
		run := c.Labels[LabelRun]
		mine := c.Labels[LabelSandboxer] == d.cfg.SandboxerID
		if !mine && (run == "" || live == nil || live(run)) {
			continue
		}
		// A container of ours that this process does not run belonged to
		// a previous process: no one waits for it, even if its run lives.
		_, err := d.st.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			removed++
			d.cfg.Logger.Info("docker reconcile removed a container", "container", shortID(c.ID), "run", run, "sandboxer", c.Labels[LabelSandboxer], "state", c.State)
		case cerrdefs.IsNotFound(err):
			// removed meanwhile, by its own Run or another reconciler
		default:
			errs = append(errs, fmt.Errorf("remove container %s: %w", shortID(c.ID), err))
		}
	}
	return removed, errors.Join(errs...)
}
