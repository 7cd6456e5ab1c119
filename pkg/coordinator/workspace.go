package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// openBackoff is how open waits before it asks again for a sandboxer to
// take the run's workspace.
var openBackoff = backoff{wait: 250 * time.Millisecond}

// open finds a sandboxer that serves the run's workspace, asking again
// until OpenTimeout passes, so a run submitted while the sandboxers are
// still coming up waits for them.
func (d *driver) open(ctx context.Context) error {
	op, subject := d.openOp()
	holder := ""
	deadline := time.Now().Add(d.c.cfg.OpenTimeout)
	return retrying(ctx, openBackoff, func() error {
		wait := time.Until(deadline)
		if subject == wire.SandboxOpenSubject {
			// Opening a directory is quick: an answer lost to a NATS
			// restart is asked for again rather than waited for until the
			// deadline.
			wait = min(resendInterval, wait)
		}
		reply, err := d.c.request(ctx, subject, op, wait)
		switch {
		case err == nil && reply.Error == nil && reply.Holder != "" && holder == "" && protocol.ValidToken(reply.Holder):
			// Another sandboxer holds the run's snapshot workspace: ask it.
			holder, subject = reply.Holder, wire.SandboxOps(reply.Holder)
			return again(0)
		case err == nil && reply.Error != nil && reply.Error.Retryable() && time.Now().Before(deadline):
			d.log.Info("the workspace cannot be opened yet; asking again", "err", reply.Error)
			return reply.Error
		case err == nil && reply.Error != nil:
			return done(reply.Error)
		case err == nil:
			d.node, d.tools, d.toolchain, d.skills = reply.Node, reply.Tools, reply.Toolchain, reply.Skills
			d.offerWorkerTools()
			d.offerOwnAgain()
			d.log.Info("workspace opened", "sandboxer", d.node)
			d.mcpConnected(reply.MCP)
			return nil
		case ctx.Err() != nil:
			return done(ctx.Err())
		case !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout):
			return done(fmt.Errorf("open workspace: %w", err))
		case !time.Now().Before(deadline):
			return done(errors.New(d.noSandboxer(holder)))
		}
		return err // no sandboxer answered yet: ask again
	})
}

// offerOwnAgain offers again, after a workspace opened anew on another
// sandboxer mid-run (nodeRequest), the tools of the coordinator's own the
// run was offered at its first open: the model keeps the tools it was
// told of.
func (d *driver) offerOwnAgain() {
	if d.spawning {
		d.tools = append(d.tools, spawnSpec)
	}
	if d.remembering {
		d.tools = append(d.tools, rememberSpec)
	}
	if d.skilling {
		d.tools = append(d.tools, readSkillSpec)
	}
}

// close gives the workspace back to the sandboxer holding it.
func (d *driver) close() {
	if d.node == "" {
		return // no workspace was opened
	}
	op := closeOp(d.s.run, d.s.tree, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if reply, err := d.c.request(ctx, wire.SandboxOps(d.node), op, 5*time.Second); err == nil {
		d.mcpClosed(reply.MCP)
	}
}

// closeOn gives the run's workspace back to node, a sandboxer the run
// left when it was gone, if it comes back within closeGone.
func (d *driver) closeOn(node string) {
	op := closeOp(d.s.run, d.s.tree, 0)
	ctx, cancel := context.WithTimeout(d.ctx, closeGone) // or until the coordinator stops
	defer cancel()
	_, _ = d.c.request(ctx, wire.SandboxOps(node), op, closeGone)
}

// closeGone is how long closeOn waits for a sandboxer to come back.
const closeGone = 2 * time.Minute

// openOp is the operation that opens the run's workspace and the subject
// it goes to: harness.sandbox.open for a root, which every sandboxer hears
// and those serving the root answer; harness.sandbox.snapshot for a
// snapshot, which one sandboxer of the queue group takes (or names the
// sandboxer already holding the run, if another does, to ask instead).
func (d *driver) openOp() (*protocol.SandboxOp, string) {
	c := d.s.contract
	// The policy and the verification go with it, so a sandboxer that
	// will not run the contract (a blanket allow, a verification command
	// with nowhere safe to run) says so before the first step.
	op := &protocol.SandboxOp{OpID: d.s.run + ".open", Run: d.s.run, Kind: protocol.OpOpen,
		Workspace: c.Workspace.Dir(), Sandbox: &c.Sandbox, Policy: d.wirePolicy(), Verification: &c.Verification, Tools: d.sandboxerTools(),
		Tree: d.s.tree, MCP: c.MCP}
	if d.s.skills == nil {
		// The skills are read when the workspace first opens; a run that
		// recorded them keeps what its model was told.
		op.Skills = c.Skills
	}
	if c.Workspace.Snapshot == "" {
		return op, wire.SandboxOpenSubject // a sandboxer without the tools does not answer
	}
	op.Snapshot, op.Commit = c.Workspace.Snapshot, d.commitSpec()
	if d.toolNode != "" {
		return op, wire.SandboxOps(d.toolNode) // one that has the tools, not any of the queue group
	}
	return op, wire.SandboxSnapshotSubject
}

// noSandboxer says why no sandboxer took the run's workspace; holder is
// the sandboxer said to hold it, if any.
func (d *driver) noSandboxer(holder string) string {
	w := d.s.contract.Workspace
	if holder != "" {
		return "the sandboxer " + holder + " holds the run's snapshot workspace and its changes, and does not answer: start it again with the same --id and --snapshots"
	}
	if w.Snapshot != "" {
		return "no sandboxer took the snapshot workspace " + w.Snapshot + ": start one connected to the cluster's object store"
	}
	return "no sandboxer serves the workspace " + w.Dir() + ": start one whose roots include it"
}

// commitSpec is the contract's commit request with its message filled in:
// the contract's, or "harness: " and the task's first line.
func (d *driver) commitSpec() *protocol.CommitSpec {
	c := d.s.contract.Workspace.Commit
	if c == nil {
		return nil
	}
	out := *c
	if strings.TrimSpace(out.Message) == "" {
		line, _, _ := strings.Cut(strings.TrimSpace(d.s.contract.Task), "\n")
		if len(line) > 72 {
			line = line[:72]
		}
		out.Message = "harness: " + line
	}
	return &out
}

// collect asks the sandboxer holding a snapshot workspace for the run's
// changes, to be recorded with the outcome. It returns nil for a root
// workspace or a workspace that never opened; a failure is recorded in the
// patch, and the outcome stands.
func (d *driver) collect(ctx context.Context) *protocol.Patch {
	c := d.s.contract
	if c.Workspace.Snapshot == "" || d.node == "" {
		return nil
	}
	op := &protocol.SandboxOp{OpID: d.s.run + ".collect", Run: d.s.run, Kind: protocol.OpCollect,
		Snapshot: c.Workspace.Snapshot, Commit: d.commitSpec(), Sandbox: &c.Sandbox, Git: c.Git}
	reply, err := d.c.request(ctx, wire.SandboxOps(d.node), op, 2*d.opTimeout())
	switch {
	case err != nil:
		return &protocol.Patch{Node: d.node, Error: protocol.Errorf(protocol.CodeUnavailable, "the sandboxer %s holding the workspace did not answer: %s", d.node, err.Error())}
	case reply.Error != nil:
		return &protocol.Patch{Node: d.node, Error: reply.Error}
	case reply.Patch == nil:
		return &protocol.Patch{Node: d.node, Error: protocol.Errorf(protocol.CodeInternal, "the sandboxer %s returned no patch", d.node)}
	}
	d.log.Info("changes collected", "files", len(reply.Patch.Files), "patch", reply.Patch.Ref, "commit", reply.Patch.Commit)
	return reply.Patch
}
