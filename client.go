package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// Client submits contracts to a harness cluster, waits for their outcomes
// and reads their traces. It is safe for concurrent use.
type Client struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	assets    *wire.Assets
	trace     *trace.Trace
	index     *trace.Index
	blobs     *trace.Blobs
	approvals *trace.Approvals
	own       bool   // the client opened nc and closes it
	onClose   func() // then, if set (Open's store)
}

// Connect dials the NATS server at url and returns a client. Errors: the
// server cannot be reached, or JetStream is not enabled on it.
func Connect(ctx context.Context, url string, opts ...nats.Option) (*Client, error) {
	opts = append([]nats.Option{nats.Name("harness-client"), nats.MaxReconnects(-1)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", streams.Redact(url), err)
	}
	c, err := NewClient(ctx, nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.own = true
	return c, nil
}

// NewClient returns a client over an established connection, creating the
// streams and buckets if they do not exist yet. Errors: JetStream is not
// available.
func NewClient(ctx context.Context, nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	assets, err := wire.Ensure(ctx, js, wire.Config{})
	if err != nil {
		return nil, err
	}
	traces := trace.New(js, assets.Trace)
	return &Client{nc: nc, js: js, assets: assets, trace: traces,
		index: trace.NewIndex(assets.Runs, js), blobs: trace.NewBlobs(assets.Blobs), approvals: trace.NewApprovals(assets.Approvals, traces)}, nil
}

// BindClient returns a client over an established connection that
// creates and changes nothing: it finds the streams and buckets the
// cluster's coordinators created, waiting up to wait for them
// (wire.DefaultBindWait when zero). It is for credentials that may only
// use them, such as the console's (ConsolePermissions). Errors: a
// *wire.PermissionError when the server refuses a lookup; a stream or
// bucket still missing after wait, naming it.
func BindClient(ctx context.Context, nc *nats.Conn, wait time.Duration) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	assets, err := wire.Bind(ctx, js, wait)
	if err != nil {
		return nil, err
	}
	traces := trace.New(js, assets.Trace)
	return &Client{nc: nc, js: js, assets: assets, trace: traces,
		index: trace.NewIndex(assets.Runs, js), blobs: trace.NewBlobs(assets.Blobs), approvals: trace.NewApprovals(assets.Approvals, traces)}, nil
}

// JetStream returns the client's JetStream handle, for reading what the
// client has no method for (the steps stream's queues, say).
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// Close closes the connection if the client opened it.
func (c *Client) Close() {
	if c.own {
		c.nc.Close()
	}
	if c.onClose != nil {
		c.onClose()
	}
}

// Conn returns the client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// NewRunID returns a fresh, readable run id: the UTC time and random hex.
func NewRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// Submit publishes a contract on harness.submit and waits for a
// coordinator to accept it; WithRunID sets its idempotency key, and so
// its run id (default a fresh one). Submitting the same id again returns
// the same run without starting another. WithObserver watches the run's
// events from before the submission until RunHandle.Wait returns.
//
// Errors: a *protocol.Error for a contract that does not validate,
// refused here before anything is sent, or by the coordinator (errors.Is
// matches protocol.ErrUnknownField and the others); protocol.ErrTooLarge
// past the stream's message limit; a timeout when no coordinator answered,
// which leaves the contract queued.
func (c *Client) Submit(ctx context.Context, contract *protocol.Contract, opts ...SubmitOption) (*RunHandle, error) {
	var co callOptions
	for _, o := range opts {
		o.applySubmit(&co)
	}
	cc := *contract
	if cc.Schema == "" {
		cc.Schema = protocol.ContractSchema
	}
	data, err := json.Marshal(&cc)
	if err != nil {
		return nil, fmt.Errorf("encode contract: %w", err)
	}
	if _, err := protocol.DecodeContract(data); err != nil {
		return nil, err
	}
	id := co.id
	if id == "" {
		id = NewRunID()
	}
	h := c.Run(protocol.RunIDFor(id))
	if err := h.observeWith(&co); err != nil {
		return nil, err
	}
	// The run id is the key's (protocol.RunIDFor), known before anyone
	// answers, so the observer watches the right run from the start.
	if _, err := c.submit(ctx, data, id); err != nil {
		h.stopObserving()
		return nil, err
	}
	return h, nil
}

// submit publishes an encoded contract under the idempotency key id and
// returns the run id the coordinators answer with once the run's first
// record is durable. It asks twice over on one inbox: as a request, which
// the coordinator that hears it answers, and with a Harness-Reply header,
// which the coordinator that takes the stored copy answers, so the answer
// comes even when no coordinator was up to hear the request. A
// submission that goes unanswered (lost while NATS fails over) is made
// again under the same key, which starts nothing twice.
func (c *Client) submit(ctx context.Context, contract []byte, id string) (string, error) {
	run := protocol.RunIDFor(id)
	inbox := c.nc.NewRespInbox()
	// A few answers come at most (the request's, the stored copy's, one
	// per submission made again): a channel of a few, not the 64k a
	// synchronous subscription allocates (half a megabyte cleared for
	// every run a burst submits).
	answers := make(chan *nats.Msg, 8)
	sub, err := c.nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return "", fmt.Errorf("subscribe for the answer: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// A connection closed under the wait ends it, as it would end a wait
	// on a synchronous subscription.
	closed := make(chan struct{})
	var closing sync.Once
	sub.SetClosedHandler(func(string) { closing.Do(func() { close(closed) }) })
	msg := &nats.Msg{Subject: wire.SubjectSubmit, Reply: inbox, Data: contract, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, id)
	msg.Header.Set(wire.HeaderReply, inbox)
	for {
		if err := c.nc.PublishMsg(msg); err != nil {
			return "", fmt.Errorf("submit: %w", err)
		}
		var m *nats.Msg
		var err error
		again := time.NewTimer(submitAgain)
		select {
		case m = <-answers:
		case <-again.C:
			err = context.DeadlineExceeded
		case <-closed:
			again.Stop()
			hint := fmt.Sprintf("the contract is queued as run %s if the submit stream took it; connect again and look (harness status %s) before submitting it again", run, run)
			if c.nc.IsClosed() {
				return "", fmt.Errorf("submit: %w before a coordinator answered: %s", nats.ErrConnectionClosed, hint)
			}
			return "", fmt.Errorf("submit: the subscription for the answer ended before a coordinator answered: %s", hint)
		case <-ctx.Done():
			err = ctx.Err()
		}
		again.Stop()
		switch {
		case err == nil && len(m.Data) == 0 && m.Header.Get("Status") == "503":
			return "", protocol.Errorf(protocol.CodeUnavailable, "nothing takes contracts on %s: no coordinator is running and the submit stream does not exist; start the cluster (harness up) and submit again", wire.SubjectSubmit)
		case err == nil:
			var reply protocol.SubmitReply
			if err := json.Unmarshal(m.Data, &reply); err != nil {
				return "", fmt.Errorf("undecodable answer from the coordinator: %w", err)
			}
			if reply.Error != nil {
				return "", reply.Error
			}
			return reply.Run, nil
		case ctx.Err() != nil:
			return "", fmt.Errorf("no coordinator answered before the wait ended (the contract is queued as run %s if the submit stream took it, and runs when a coordinator starts): see whether one runs (nats micro ls, or harness status %s), and wait on the run rather than submit it again: %w", run, run, ctx.Err())
		}
	}
}

// submitAgain is how long a submission waits for its answer before it is
// made again.
const submitAgain = 30 * time.Second

// Runs returns the state of every run the cluster's index holds.
func (c *Client) Runs(ctx context.Context) ([]protocol.RunState, error) {
	return c.index.List(ctx)
}

// Decide records a person's decision on an approval (the id a paused run
// printed, run.step.call), with who decided in d.By, which the trace keeps.
// The cluster's coordinators carry the run on from there. It is accepted
// only for an action that is pending, or, made before the run paused, for
// a call of the step the run is taking: that decision waits for the pause
// and counts.
//
// Errors: protocol.ErrInvalidField for a malformed id or rewrite;
// protocol.ErrUnknownRun for a run that does not exist or an action it has
// not reached (a later step, a provider endpoint not asked about yet, a
// call of a past step that asked nobody); protocol.ErrRunFinished when the
// approval was already decided or its run has finished.
func (c *Client) Decide(ctx context.Context, id string, d *protocol.Decision) (*protocol.Approval, error) {
	if _, _, _, err := protocol.ParseApprovalID(id); err != nil {
		return nil, err
	}
	if d.Rewrite != nil && !json.Valid(d.Rewrite) {
		return nil, protocol.FieldError(protocol.CodeInvalidField, "rewrite", `give the call's new arguments as a JSON object, such as {"path":"a.go","content":"..."}`, "the rewrite is not JSON")
	}
	if d.By == "" {
		d.By = "client" // the trace names who decided; a caller that does not say is a Go client
	}
	return c.approvals.Decide(ctx, id, d)
}

// Pending lists the actions waiting for a person to decide, oldest first:
// approvals not decided yet whose runs have not ended.
func (c *Client) Pending(ctx context.Context) ([]protocol.Approval, error) {
	aps, err := c.approvals.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []protocol.Approval
	for _, ap := range aps {
		if ap.Pending == nil || ap.Decision != nil {
			continue
		}
		if st, err := c.index.Get(ctx, ap.Pending.Run); err == nil && (st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed) {
			continue
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b protocol.Approval) int { return a.Pending.Time.Compare(b.Pending.Time) })
	return out, nil
}

// Approvals lists every approval, pending or decided.
func (c *Client) Approvals(ctx context.Context) ([]protocol.Approval, error) {
	return c.approvals.List(ctx)
}
