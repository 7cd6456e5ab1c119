package streams

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// gatherRoom is how many answers Gather holds before it takes them: room
// for a large fleet, not the 64k pointers (half a megabyte) a synchronous
// subscription allocates for every look.
const gatherRoom = 1024

// Gather publishes an empty request on subject (a micro service's control
// subject, say) with a fresh inbox and hands each answer to each, until
// each says it has enough, no answer has come for gap, or ctx ends.
// Errors: the subscription's or the publish's; ctx's when it ended first.
func Gather(ctx context.Context, nc *nats.Conn, subject string, gap time.Duration, each func(*nats.Msg) (enough bool)) error {
	inbox := nc.NewRespInbox()
	answers := make(chan *nats.Msg, gatherRoom)
	sub, err := nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return err
	}
	t := time.NewTimer(gap)
	defer t.Stop()
	for {
		select {
		case m := <-answers:
			if each(m) {
				return nil
			}
			t.Reset(gap)
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
