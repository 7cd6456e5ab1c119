// Package docker is the sandbox backend that runs each command in a
// container of its own on a Docker engine of the sandboxer's machine,
// created for the command and removed when it ends: a read-only root, the
// workspace bind-mounted at its own path, a private /tmp, no network
// unless the command may use it, every capability dropped, and every cap
// of protocol.Limits enforced. See [Backend] for the details.
//
// The image must already be on the engine (built or loaded there): the
// backend never pulls. [New] does not contact the engine; a caller asks
// [Backend.Ping] whether one answers, calls [Backend.Reconcile] at start
// to remove what an earlier process left behind (a [sandbox.Reconciler]),
// and [Backend.Shutdown] at the end (a [sandbox.Shutdowner]).
//
// It is the one package of the module that links the Docker Engine's
// client; pkg/sandbox and the packages that run commands through it do
// not.
package docker
