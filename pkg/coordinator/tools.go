package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/wire"
)

// Tools named by a contract (its "tools") are an embedder's, offered only
// by the sandboxers and workers built with them, which advertise every
// tool they hold in their micro service's metadata ("tools",
// comma-separated). Before a run's first step its coordinator asks both:
// a tool some worker holds is called on the workers
// (harness.worker.tool.<name>, any one of those holding it), and the rest
// must all be held by one sandboxer. It refuses the run, with a typed
// error naming the tool, when those that answer have no such tool, and
// sends the open of a snapshot workspace to a sandboxer that has the rest
// (the open of a root goes to every sandboxer, and one without them does
// not answer it).

// discoverWait is how long the answers to a look-up are gathered; every
// running sandboxer and worker answers at once.
const discoverWait = 500 * time.Millisecond

// toolsGrace is how long a run waits for tools its contract names that
// what answers does not hold, looking again meanwhile, before it is
// refused: a worker or sandboxer started beside the coordinator (a fleet
// coming up, a rolling restart) answers within it, and a run submitted
// then is not refused for a process a moment late.
const toolsGrace = 3 * time.Second

// The micro services the look-ups ask.
const (
	sandboxerService = "harness-sandboxer"
	workerService    = "harness-worker"
)

// workerTool is a tool the workers hold, as one of them describes it.
type workerTool struct {
	spec     protocol.ToolSpec
	readOnly bool
}

// toolsHeld finds where the tools the run's contract names are held: the
// workers' among them (d.workerTools), and a sandboxer holding all the
// rest, whose node id it returns ("" when the workers hold them all). It
// asks again until OpenTimeout while nothing answers, and returns the
// typed refusal of the run when what answers has not held the tools for
// toolsGrace.
func (d *driver) toolsHeld(ctx context.Context) (string, error) {
	want := d.s.contract.Tools
	// A document_contains verification needs a sandboxer that reads the
	// document's kind, built with its tag.
	doc := protocol.DocumentKind(d.s.contract.Verification.CheckedFile())
	if d.s.contract.Verification.DocumentContains == nil {
		doc = ""
	}
	deadline := time.Now().Add(d.c.cfg.OpenTimeout)
	var node string
	var missing time.Time // when what answered first lacked the tools
	err := retrying(ctx, openBackoff, func() error {
		var wg sync.WaitGroup
		var held, seen []string
		wg.Go(func() { held, seen = d.c.sandboxersWith(ctx, want, doc) })
		byWorker, workersSeen := map[string]workerTool{}, []string(nil)
		if len(want) > 0 && d.c.workersMayHold(ctx, want) {
			byWorker, workersSeen = d.c.workersWith(ctx, want)
		}
		wg.Wait()
		rest := slices.DeleteFunc(slices.Clone(want), func(t string) bool { _, ok := byWorker[t]; return ok })
		if len(rest) < len(want) && len(held) == 0 && (len(rest) > 0 || doc != "") {
			held, seen = d.c.sandboxersWith(ctx, rest, doc) // the workers hold some: one sandboxer for the others
		}
		answered := len(seen) > 0 || len(workersSeen) > 0 // what answered lacks the tools, unless held
		switch {
		case (len(rest) == 0 && doc == "") || len(held) > 0:
			d.workerTools = byWorker
			if len(rest) > 0 || doc != "" {
				node = held[0]
			}
			return nil
		case answered && ctx.Err() == nil && (missing.IsZero() || time.Since(missing) < toolsGrace):
			if missing.IsZero() {
				missing = time.Now()
			}
			return again(openBackoff.wait)
		case answered:
			offered := strings.Join(append(seen, workersSeen...), "; ")
			if doc != "" && len(rest) == 0 {
				return done(protocol.FieldError(protocol.CodeUnsupported, "verification.document_contains",
					"start a sandboxer built with -tags "+doc+" (or -tags documents), or check the file another way",
					"no sandboxer reads %s documents; what is running offers: %s", doc, offered))
			}
			return done(protocol.FieldError(protocol.CodeUnsupported, "tools",
				"start a sandboxer or a worker built with them (see examples/custom-tool), or leave them out of the contract's tools",
				"no sandboxer offers every tool the contract names that no worker offers (%s%s)%s; what is running offers: %s", strings.Join(rest, ", "), docNeed(doc), tagsNeeded(rest), offered))
		case ctx.Err() != nil:
			return done(ctx.Err())
		case !time.Now().Before(deadline):
			return done(protocol.FieldError(protocol.CodeUnavailable, "tools", "start a sandboxer built with the contract's tools",
				"no sandboxer answered within %s", d.c.cfg.OpenTimeout.Round(time.Second)))
		}
		return again(0)
	})
	return node, err
}

// sandboxerTools are the tools of the contract the run's sandboxer is to
// offer: those no worker holds.
func (d *driver) sandboxerTools() []string {
	if len(d.workerTools) == 0 {
		return d.s.contract.Tools
	}
	return slices.DeleteFunc(slices.Clone(d.s.contract.Tools), func(t string) bool { _, ok := d.workerTools[t]; return ok })
}

// offerWorkerTools adds the workers' tools to what the model is offered,
// in the contract's order.
func (d *driver) offerWorkerTools() {
	for _, name := range d.s.contract.Tools {
		if wt, ok := d.workerTools[name]; ok {
			d.tools = append(d.tools, wt.spec)
		}
	}
}

// workersMayHold reports whether any worker may hold one of the tools
// want names. Only a worker holding a tool subscribes to its subject
// (wire.WorkerTool), so a request there is answered at once with no
// responders where none does, and the look-up of every worker's info,
// which waits discoverWait for the last of them to answer, is spared the
// runs whose tools the sandboxers alone hold. The request is an empty
// operation, which a worker's tool refuses without running; a reply, or
// none in time, may be a worker holding it.
func (c *Coordinator) workersMayHold(ctx context.Context, want []string) bool {
	ctx, cancel := context.WithTimeout(ctx, discoverWait)
	defer cancel()
	held := make(chan bool, len(want))
	for _, name := range want {
		go func() {
			_, err := c.nc.RequestWithContext(ctx, wire.WorkerTool(name), []byte("{}"))
			held <- !errors.Is(err, nats.ErrNoResponders)
		}()
	}
	may := false
	for range want {
		may = <-held || may
	}
	return may
}

// services asks every instance of the micro service svc for its info,
// gathering answers for discoverWait or until enough says to stop.
func (c *Coordinator) services(ctx context.Context, svc string, enough func(*micro.Info) bool) {
	subject, err := micro.ControlSubject(micro.InfoVerb, svc, "")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, discoverWait)
	defer cancel()
	_ = streams.Gather(ctx, c.nc, subject, discoverWait, func(m *nats.Msg) bool {
		var info micro.Info
		return json.Unmarshal(m.Data, &info) == nil && enough(&info)
	})
}

// sandboxersWith returns the id of the first sandboxer to answer that
// holds every tool of want, if any, and what each that answered offers,
// for a refusal to name.
func (c *Coordinator) sandboxersWith(ctx context.Context, want []string, doc string) (held, seen []string) {
	c.services(ctx, sandboxerService, func(info *micro.Info) bool {
		tools := strings.Split(info.Metadata["tools"], ",")
		seen = append(seen, info.Metadata["id"]+": "+info.Metadata["tools"]+docsOf(info))
		if doc != "" && !slices.Contains(strings.Split(info.Metadata["documents"], ","), doc) {
			return false
		}
		if !slices.ContainsFunc(want, func(t string) bool { return !slices.Contains(tools, t) }) {
			held = append(held, info.Metadata["id"])
			return true // one is enough
		}
		return false
	})
	return held, seen
}

// workersWith returns those of want some worker holds, with their specs,
// and what each worker holding tools offers, for a refusal to name. It
// stops asking once it has them all.
func (c *Coordinator) workersWith(ctx context.Context, want []string) (map[string]workerTool, []string) {
	found := map[string]workerTool{}
	var seen []string
	c.services(ctx, workerService, func(info *micro.Info) bool {
		if info.Metadata["tools"] == "" {
			return false
		}
		seen = append(seen, "worker "+info.Metadata["id"]+": "+info.Metadata["tools"])
		for _, ep := range info.Endpoints {
			var spec protocol.ToolSpec
			if !strings.HasPrefix(ep.Subject, wire.WorkerToolPrefix) || json.Unmarshal([]byte(ep.Metadata[wire.ToolSpecMetadata]), &spec) != nil ||
				tools.Reserved(spec.Name) {
				continue // a worker never stands in for a tool of the harness's own
			}
			if _, ok := found[spec.Name]; !ok && slices.Contains(want, spec.Name) && ep.Subject == wire.WorkerTool(spec.Name) {
				found[spec.Name] = workerTool{spec: spec, readOnly: ep.Metadata[wire.ToolReadOnlyMetadata] == "true"}
			}
		}
		return len(found) == len(want)
	})
	return found, seen
}

// workerCall has a worker holding the call's tool carry it out, at most
// once: its start is recorded in the ops bucket first, and a call whose
// start is there without its end (its coordinator died under it) is
// reported as indeterminate, never made again, unless its tool changes
// nothing. A call is asked once: unanswered, it may or may not have run.
func (d *driver) workerCall(ctx context.Context, op *protocol.SandboxOp, wt workerTool, obs *protocol.Observation) *protocol.Observation {
	key := wire.OpKey(op.OpID)
	ops := d.c.assets.Ops
	begun, _ := json.Marshal(wire.OpRecord{})
	if _, err := opsCall(ctx, func(ctx context.Context) (uint64, error) { return ops.Create(ctx, key, begun) }); err != nil {
		switch e, gerr := opsCall(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return ops.Get(ctx, key) }); {
		case errors.Is(err, jetstream.ErrKeyExists) && gerr == nil:
			var rec wire.OpRecord
			if json.Unmarshal(e.Value(), &rec) == nil && rec.Done && rec.Reply != nil && rec.Reply.Observation != nil {
				return rec.Reply.Observation // made before a takeover: its result
			}
			if !wt.readOnly {
				obs.Status, obs.IsError = protocol.CallIndeterminate, true
				obs.Content = "[indeterminate] this call was cut off when its coordinator stopped: it may or may not have taken effect. Find out before you repeat it."
				return obs
			}
		case errors.Is(err, jetstream.ErrKeyExists) && !wt.readOnly:
			// An earlier attempt began it; what became of it cannot be read.
			obs.Status, obs.IsError = protocol.CallIndeterminate, true
			obs.Content = "[indeterminate] this call was begun before and what became of it cannot be read now: it may or may not have taken effect. Find out before you repeat it."
			return obs
		case !wt.readOnly:
			obs.Status, obs.IsError = protocol.CallUnanswered, true
			obs.Content = "[tool failed] the call could not be recorded before it ran, so it did not run: " + err.Error() + ". Try it again."
			return obs
		}
	}
	data, err := json.Marshal(op)
	if err != nil {
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, "[tool failed] "+err.Error()
		return obs
	}
	rctx, cancel := context.WithTimeout(ctx, d.opTimeout())
	defer cancel()
	m, err := d.c.nc.RequestWithContext(rctx, wire.WorkerTool(op.Call.Name), data)
	var reply protocol.SandboxReply
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		_ = ops.Delete(context.WithoutCancel(ctx), key) // nothing ran
		obs.Status, obs.IsError = protocol.CallFailed, true
		obs.Content = "[tool failed] no worker holding " + op.Call.Name + " is running now; the call did not run. Try it again later, or do without it."
		return obs
	case err != nil:
		obs.Status, obs.IsError = protocol.CallUnanswered, true
		obs.Content = "[tool failed] the worker did not answer: " + err.Error() + ". The call may or may not have taken effect; find out before you repeat it."
		return obs
	case json.Unmarshal(m.Data, &reply) != nil || (reply.Error == nil && reply.Observation == nil):
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, "[tool failed] the worker's answer could not be read"
		return obs
	case reply.Error != nil:
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, "[tool failed] "+reply.Error.Message
	default:
		*obs = *reply.Observation
		obs.CallID, obs.Tool = op.Call.ID, op.Call.Name
		obs.Status = obs.State()
	}
	rec, _ := json.Marshal(wire.OpRecord{Done: true, Reply: &protocol.SandboxReply{OpID: op.OpID, Observation: obs}})
	if _, err := opsCall(ctx, func(ctx context.Context) (uint64, error) { return ops.Put(ctx, key, rec) }); err != nil {
		d.log.Warn("record a worker tool's result", "op", op.OpID, "err", err)
	}
	return obs
}

// opsCall runs one call to the ops bucket, bounded.
func opsCall[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return f(ctx)
}

// docsOf names the document kinds a sandboxer reads, for a refusal.
func docsOf(info *micro.Info) string {
	if d := info.Metadata["documents"]; d != "" {
		return " (reads " + d + " documents)"
	}
	return ""
}

// docNeed names the document kind a run's verification reads, for a
// refusal.
func docNeed(doc string) string {
	if doc == "" {
		return ""
	}
	return ", and reading " + doc + " documents"
}

// tagsNeeded names the build tags of the document tools among names: the
// tag a sandboxer must be built with to hold each.
func tagsNeeded(names []string) string {
	var tags []string
	for _, n := range names {
		if t := documents.TagOf(n); t != "" && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if len(tags) == 0 {
		return ""
	}
	return "; the document tools come with a sandboxer built with -tags " + strings.Join(tags, ",") + " (or -tags documents)"
}
