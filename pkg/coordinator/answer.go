package coordinator

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// Answering a request on harness.submit. The submit stream takes every
// message on harness.submit and harness.submit.<tenant> without an
// acknowledgement of its own, and the coordinators' submit endpoint hears
// each one too. A request (`nats req harness.submit`) is answered by
// the coordinator that heard it with what became of the contract: the run
// id once its first record is durable, or the typed error that refused
// it. The coordinator that took the stored copy says which on
// harness.answers.<key> (wire.AnswerKey, the same for both copies), which
// every coordinator hears; an answer heard before its request is kept a
// while (answerKeep), so the order the two arrive in does not matter.
//
// The endpoint also sees what the stream refuses without a word: a
// message over the stream's size limit is a contract refused as too
// large, seen like any other refusal.

// answerKeep is how long an answer heard before its request is kept, and
// askKeep how long a request waits for its answer (a requester gives up
// sooner: `nats req` after 5 s).
const (
	answerKeep = 30 * time.Second
	askKeep    = 5 * time.Minute
)

// asks pairs requests heard on harness.submit with the answers heard on
// harness.answers.
type asks struct {
	mu      sync.Mutex
	waiting map[string][]asked
	heard   map[string]heard
}

type asked struct {
	r  micro.Request
	at time.Time
}

type heard struct {
	data []byte
	at   time.Time
}

// handleSubmit hears a message on a submit subject: one too large for the
// stream is refused here, the stream having dropped it; a request waits
// for its answer.
func (c *Coordinator) handleSubmit(ctx context.Context, r micro.Request) {
	subject := r.Subject()
	tenant, _ := wire.SubmitTenant(subject)
	h := nats.Header(r.Headers())
	reply := r.Reply()
	if reply != "" && !wire.ReplyAllowed(tenant, reply) {
		c.log.Warn("a submitter asked for its answer where it may not be sent; no answer is sent", "reply", reply, "tenant", tenant,
			"msg_id", h.Get(jetstream.MsgIDHeader))
		reply = ""
	}
	if size := len(r.Data()) + headerSize(h); size > wire.MaxSubmitBytes {
		pe := protocol.FieldError(protocol.CodeTooLarge, "", "keep the contract under "+strconv.Itoa(protocol.MaxContractBytes/1024)+" KiB",
			"the contract is %d bytes", len(r.Data()))
		c.refused(subject, h, 0, "", pe)
		if hr := h.Get(wire.HeaderReply); hr != "" && wire.ReplyAllowed(tenant, hr) {
			c.respond(hr, &protocol.SubmitReply{Error: pe})
		}
		if reply != "" {
			c.answerRequest(r, mustJSON(&protocol.SubmitReply{Error: pe}))
		}
		return
	}
	if reply == "" {
		return // the stream has it; whoever takes it answers any Harness-Reply
	}
	msgID := h.Get(jetstream.MsgIDHeader)
	key := wire.AnswerKey(subject, msgID, r.Data())
	c.asks.mu.Lock()
	if a, ok := c.asks.heard[key]; ok {
		delete(c.asks.heard, key)
		c.asks.mu.Unlock()
		c.answerRequest(r, a.data)
		return
	}
	c.asks.waiting[key] = append(c.asks.waiting[key], asked{r: r, at: time.Now()})
	c.asks.mu.Unlock()
	if msgID == "" {
		return
	}
	// A message under a key the stream has seen within the hour is
	// dropped, and nobody takes it: the run it names, if it started,
	// answers for it.
	run := runIDFor(subject, protocol.RunIDFor(msgID))
	go func() {
		gctx, cancel := jsCall(ctx)
		defer cancel()
		if _, err := c.index.Get(gctx, run); err == nil {
			c.answered(key, mustJSON(&protocol.SubmitReply{Run: run}))
		}
	}()
}

// handleAnswer hears what became of a submitted message.
func (c *Coordinator) handleAnswer(m *nats.Msg) {
	c.answered(strings.TrimPrefix(m.Subject, wire.AnswersPrefix), m.Data)
}

// answered answers the requests waiting on key, or keeps the answer for
// one yet to come.
func (c *Coordinator) answered(key string, data []byte) {
	c.asks.mu.Lock()
	waiting := c.asks.waiting[key]
	delete(c.asks.waiting, key)
	if len(waiting) == 0 {
		c.asks.heard[key] = heard{data: data, at: time.Now()}
	}
	c.asks.mu.Unlock()
	for _, a := range waiting {
		c.answerRequest(a.r, data)
	}
}

// answerRequest answers a request with a SubmitReply, a refusal with the
// micro service's error headers. The answer may come after the
// endpoint's handler returned, on another goroutine (wire.RespondLater).
func (c *Coordinator) answerRequest(r micro.Request, data []byte) {
	var reply protocol.SubmitReply
	code, description := "", ""
	if json.Unmarshal(data, &reply) == nil && reply.Error != nil {
		code, description = strconv.Itoa(int(reply.Error.Code)), reply.Error.Message
	}
	err := wire.RespondLater(c.nc, r, data, code, description)
	if err != nil {
		c.log.Warn("answer a submitter", "err", err)
	}
}

// sweepAsks forgets requests nobody answered and answers nobody asked
// for, every answerKeep until ctx ends.
func (c *Coordinator) sweepAsks(ctx context.Context) {
	every(ctx, answerKeep, func() {
		now := time.Now()
		c.asks.mu.Lock()
		defer c.asks.mu.Unlock()
		for k, a := range c.asks.heard {
			if now.Sub(a.at) > answerKeep {
				delete(c.asks.heard, k)
			}
		}
		for k, w := range c.asks.waiting {
			keep := w[:0]
			for _, a := range w {
				if now.Sub(a.at) <= askKeep {
					keep = append(keep, a)
				}
			}
			if len(keep) == 0 {
				delete(c.asks.waiting, k)
			} else {
				c.asks.waiting[k] = keep
			}
		}
	})
}

// tellAnswer says, for the coordinator that heard its request, what
// became of a stored submitted message.
func (c *Coordinator) tellAnswer(msg jetstream.Msg, r *protocol.SubmitReply) {
	key := wire.AnswerKey(msg.Subject(), msg.Headers().Get(jetstream.MsgIDHeader), msg.Data())
	if err := c.nc.Publish(wire.Answer(key), mustJSON(r)); err != nil {
		c.log.Debug("tell the answer to a submission", "err", err)
	}
}

// headerSize is about how many bytes h takes on the wire, as the stream's
// size limit counts them.
func headerSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}
