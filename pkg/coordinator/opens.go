package coordinator

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// The open of a root goes to every sandboxer, and each that serves the
// root opens the run's workspace and answers. The run goes on with the
// first answer; nothing would ever close the others', and each would hold
// the run's workspace, skills and MCP servers until it restarted. So the
// answers of an open are heard for the rest of its time (OpenTimeout), on
// one subscription of the coordinator's for every open, and each
// sandboxer that opened the workspace and is not the one the run took is
// told to close it again: with a close naming its open
// (SandboxOp.Opened), which it carries out only if no later open of the
// run came to it meanwhile, which a later attempt of this open, or the
// run's next open, may have made the run's.

// rootOpens are the opens of roots whose answers are still heard, by the
// last token of their reply subject.
type rootOpens struct {
	prefix string // the reply subjects: prefix and a token
	mu     sync.Mutex
	open   map[string]*rootOpen
	swept  time.Time // when those whose time is up were last forgotten
}

// rootOpen is one open of a root, from its request until its time is up.
type rootOpen struct {
	run, tree string
	until     time.Time
	first     chan openAnswer // the answer the run goes on with
	// decided is set once the first answer is taken, or the open stopped
	// waiting for one; took is the sandboxer the run went on with, if any.
	decided bool
	took    string
}

type openAnswer struct {
	reply *protocol.SandboxReply
	err   error
}

// openRoot sends op, the open of a root, on harness.sandbox.open and
// returns the first answer within wait; none is nats.ErrTimeout, no
// sandboxer at all nats.ErrNoResponders. The others are heard on
// (heardOpen).
func (c *Coordinator) openRoot(ctx context.Context, op *protocol.SandboxOp, wait time.Duration) (*protocol.SandboxReply, error) {
	data, err := json.Marshal(op)
	if err != nil {
		return nil, err
	}
	token := randomHex(10)
	o := &rootOpen{run: op.Run, tree: op.Tree, until: time.Now().Add(c.cfg.OpenTimeout), first: make(chan openAnswer, 1)}
	c.opens.add(token, o)
	if err := c.nc.PublishRequest(wire.SandboxOpenSubject, c.opens.prefix+token, data); err != nil {
		c.opens.drop(token)
		return nil, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case a := <-o.first:
		return a.reply, a.err
	case <-t.C:
		err = nats.ErrTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.opens.mu.Lock()
	raced := o.decided
	o.decided = true // every answer from now on is closed
	c.opens.mu.Unlock()
	if raced {
		a := <-o.first // taken as the wait ended: the run goes on with it
		return a.reply, a.err
	}
	return nil, err
}

// heardOpen hears one answer to an open of a root: the first is the
// one its open returns, and a sandboxer that opened the workspace beside
// the one the run took is told to close it.
func (c *Coordinator) heardOpen(m *nats.Msg) {
	var a openAnswer
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		a.err = nats.ErrNoResponders
	} else {
		a.reply, a.err = decodeReply(m.Data)
	}
	token := strings.TrimPrefix(m.Subject, c.opens.prefix)
	c.opens.mu.Lock()
	o := c.opens.open[token]
	if o == nil {
		c.opens.mu.Unlock()
		return // its time is up
	}
	if !o.decided {
		o.decided = true
		if a.reply != nil && a.reply.Error == nil {
			o.took = a.reply.Node
		}
		c.opens.mu.Unlock()
		o.first <- a
		return
	}
	took := o.took
	c.opens.mu.Unlock()
	r := a.reply
	if r == nil || r.Error != nil || r.Opened == 0 || r.Node == took || !protocol.ValidToken(r.Node) {
		return
	}
	op := closeOp(o.run, o.tree, r.Opened)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.request(ctx, wire.SandboxOps(r.Node), op, 5*time.Second); err != nil {
			c.log.Debug("close the workspace another sandboxer opened beside the run's", "run", o.run, "sandboxer", r.Node, "err", err)
		}
	}()
}

// add registers an open under token, and forgets those whose time is up,
// looking for them at most once a second.
func (ro *rootOpens) add(token string, o *rootOpen) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if now := time.Now(); now.Sub(ro.swept) >= time.Second {
		ro.swept = now
		for t, old := range ro.open {
			if now.After(old.until) {
				delete(ro.open, t)
			}
		}
	}
	ro.open[token] = o
}

// drop forgets the open under token.
func (ro *rootOpens) drop(token string) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	delete(ro.open, token)
}
