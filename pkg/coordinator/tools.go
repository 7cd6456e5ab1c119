package coordinator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/pkg/protocol"
)

// Tools named by a contract (its "tools") are an embedder's, offered only
// by the sandboxers built with them, which advertise every tool they hold
// in their micro service's metadata ("tools", comma-separated). Before a
// run's first step its coordinator looks for a sandboxer that has them
// all: it refuses the run, with a typed error naming the tool, when the
// sandboxers that answer have none that does, and sends the open of a
// snapshot workspace to one that does (the open of a root goes to every
// sandboxer, and one without the tools does not answer it).

// discoverWait is how long the sandboxers' answers to a look-up are
// gathered; every running sandboxer answers at once.
const discoverWait = 500 * time.Millisecond

// sandboxerService is the micro service every sandboxer registers.
const sandboxerService = "harness-sandboxer"

// toolsHeld finds a sandboxer that holds every tool the run's contract
// names, asking again until OpenTimeout while no sandboxer answers. It
// returns the node id of one that does, or the typed refusal of the run.
func (d *driver) toolsHeld(ctx context.Context) (string, error) {
	want := d.s.contract.Tools
	deadline := time.Now().Add(d.c.cfg.OpenTimeout)
	var node string
	err := retrying(ctx, openBackoff, func() error {
		held, seen := d.c.sandboxersWith(ctx, want)
		switch {
		case len(held) > 0:
			node = held[0]
			return nil
		case len(seen) > 0:
			return done(protocol.FieldError(protocol.CodeUnsupported, "tools",
				"start a sandboxer built with them (see examples/custom-tool), or leave them out of the contract's tools",
				"no sandboxer offers every tool the contract names (%s); the sandboxers running offer: %s", strings.Join(want, ", "), strings.Join(seen, "; ")))
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

// sandboxersWith asks every sandboxer for its micro service's info and
// returns the id of the first to answer that holds every tool of want,
// if any, and what each that answered offers, for a refusal to name.
func (c *Coordinator) sandboxersWith(ctx context.Context, want []string) (held, seen []string) {
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	subject, err := micro.ControlSubject(micro.InfoVerb, sandboxerService, "")
	if err != nil || c.nc.PublishRequest(subject, inbox, nil) != nil {
		return nil, nil
	}
	until := time.Now().Add(discoverWait)
	for ctx.Err() == nil {
		m, err := sub.NextMsg(time.Until(until))
		if err != nil {
			break
		}
		var info micro.Info
		if json.Unmarshal(m.Data, &info) != nil {
			continue
		}
		tools := strings.Split(info.Metadata["tools"], ",")
		seen = append(seen, info.Metadata["id"]+": "+info.Metadata["tools"])
		if !slices.ContainsFunc(want, func(t string) bool { return !slices.Contains(tools, t) }) {
			return append(held, info.Metadata["id"]), seen // one is enough
		}
	}
	return held, seen
}
