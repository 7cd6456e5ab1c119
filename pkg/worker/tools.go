package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/wire"
)

// A worker built with tools of an embedder's (Config.Tools) offers them
// to the runs whose contracts name them: tools that need no workspace,
// such as a call to an internal service. It advertises their names in its
// micro service's metadata ("tools") and serves each on an endpoint of
// its own, harness.worker.tool.<name>, with the tool's spec (its schema
// and gate) in the endpoint's metadata; every worker holding a tool
// shares its queue group, so a call goes to one of them. The coordinator
// decides each call under the run's policy, as it decides a built-in's,
// and journals it in the ops bucket, so a call cut off by a crash is
// reported as indeterminate rather than made again; the worker judges it
// again before it runs it, and holds nothing between calls.

// toolTimeout bounds one call of a worker's tool when the op says none.
const toolTimeout = 5 * time.Minute

// checkTools refuses tools a worker cannot offer: a reserved or duplicate
// name (tools.Extend), and a tool that declares a read or a write of a
// path, since a worker holds no workspace.
func checkTools(ts []tools.Tool) (*tools.Set, error) {
	empty, err := tools.NewSet()
	if err != nil {
		return nil, err
	}
	set, err := tools.Extend(empty, ts...)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	for _, name := range set.Names() {
		if g := set.GateOf(name); g != nil && (g.Act == "read" || g.Act == "write") {
			return nil, fmt.Errorf("worker: tool %q declares a %s of a path, but a worker holds no workspace: serve it from a sandboxer (pkg/sandboxer/command.Main), or declare an exec or a net act", name, g.Act)
		}
	}
	return set, nil
}

// addTools registers an endpoint for each of the worker's tools. Each
// call runs on ctx, once admit lets it (release ends it); a call admit
// refuses is answered at once, not run.
func (w *Worker) addTools(ctx context.Context, svc micro.Service, admit func() bool, release func()) error {
	for _, name := range w.tools.Names() {
		spec := w.tools.Offered([]string{name})[0]
		b, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		md := map[string]string{wire.ToolSpecMetadata: string(b)}
		if w.tools.ReadOnly(name) {
			md[wire.ToolReadOnlyMetadata] = "true"
		}
		t, _ := w.tools.Get(name)
		if err := svc.AddEndpoint("tool-"+name, micro.HandlerFunc(func(r micro.Request) {
			if !admit() {
				w.answerTool(r, &protocol.SandboxReply{Error: protocol.Errorf(protocol.CodeUnavailable, "the worker %s is stopping; the call did not run", w.cfg.ID)})
				return
			}
			go func() {
				defer release()
				w.callTool(ctx, r, t, spec.Gate)
			}()
		}), micro.WithEndpointSubject(wire.WorkerTool(name)), micro.WithEndpointMetadata(md)); err != nil {
			return fmt.Errorf("register tool %s: %w", name, err)
		}
	}
	return nil
}

// callTool runs one call of t and answers it with its observation.
func (w *Worker) callTool(ctx context.Context, r micro.Request, t tools.Tool, g *protocol.ToolGate) {
	var op protocol.SandboxOp
	if err := json.Unmarshal(r.Data(), &op); err != nil || op.Kind != protocol.OpTool || op.Call == nil || op.Call.Name != t.Spec().Name {
		w.answerTool(r, &protocol.SandboxReply{OpID: op.OpID, Error: protocol.Errorf(protocol.CodeBadArguments, "a worker tool takes one tool operation naming it")})
		return
	}
	obs := &protocol.Observation{CallID: op.Call.ID, Tool: op.Call.Name}
	if refusal := covered(&op, g); refusal != "" {
		obs.Status, obs.IsError, obs.Content = protocol.CallRefused, true, refusal
		w.answerTool(r, &protocol.SandboxReply{OpID: op.OpID, Observation: obs})
		return
	}
	timeout := toolTimeout
	if op.Sandbox != nil && op.Sandbox.Limits.WallSecs > 0 {
		timeout = time.Duration(op.Sandbox.Limits.WallSecs) * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	out, err := invoke(cctx, t, op.Call.Arguments)
	switch {
	case cctx.Err() != nil:
		// Cut off (the worker's drain ran out, or the call's time): it may
		// have had its effect.
		obs.Status, obs.IsError = protocol.CallIndeterminate, true
		obs.Content = "[indeterminate] this call was cut off before it finished: it may or may not have taken effect. Find out before you repeat it."
	case err != nil:
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, tools.Failure(op.Call.Name, err)
	case out == nil:
		obs.Status = protocol.CallOK
	default:
		obs.Status, obs.Content, obs.Changed = protocol.CallOK, tools.Bound(out.Content, tools.DefaultEntryCap), out.Changed
	}
	w.log.Debug("tool called", "tool", op.Call.Name, "run", op.Run, "took", time.Since(began), "failed", obs.IsError)
	w.answerTool(r, &protocol.SandboxReply{OpID: op.OpID, Observation: obs})
}

func (w *Worker) answerTool(r micro.Request, reply *protocol.SandboxReply) {
	b, err := json.Marshal(reply)
	if err != nil {
		return
	}
	if err := wire.RespondLater(w.nc, r, b, "", ""); err != nil {
		w.log.Warn("answer a tool call", "err", err)
	}
}

// covered is the worker's own verdict on a call: why it is refused, or ""
// when the run's policy allows it (or asks, and a person's approval comes
// with it).
func covered(op *protocol.SandboxOp, g *protocol.ToolGate) string {
	if op.Policy == nil {
		return "[refused by the worker] no policy verdict covers this call"
	}
	pol, err := policy.FromProtocol(op.Policy)
	if err != nil {
		return "[refused by the worker] the run's policy does not compile: " + err.Error()
	}
	v, bad := gate.VerdictOf(pol, op.Call, g)
	switch {
	case bad != "":
		return bad
	case v.Effect == policy.Deny, v.Effect == policy.Ask && op.Approval == "":
		return v.Refusal()
	}
	return ""
}

// toolNames is the metadata value naming the worker's tools.
func (w *Worker) toolNames() string { return strings.Join(w.tools.Names(), ",") }

// invoke runs one call of t, a panic in it taken for its failure rather
// than the end of the worker and of every turn it holds.
func invoke(ctx context.Context, t tools.Tool, args json.RawMessage) (out *tools.Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, protocol.Errorf(protocol.CodeInternal, "the tool failed inside (%v); it may or may not have taken effect", p)
		}
	}()
	return t.Invoke(ctx, &tools.Env{}, args)
}
