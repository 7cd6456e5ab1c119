package coordinator

import (
	"context"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Approver answers an action the policy asks a person about. It returns a
// decision now, or nil to defer to a person: the action is then recorded
// in the approvals bucket and the run pauses, holding nothing, until a
// decision arrives there (harness approve, harness deny, or a plain NATS
// client writing the decision). An error defers too.
type Approver interface {
	Decide(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error)
}

// Durable defers every action to a person. It is the default.
type Durable struct{}

// Decide returns nil: a person decides, durably.
func (Durable) Decide(context.Context, *protocol.Pending) (*protocol.Decision, error) {
	return nil, nil
}

// ApproveAll approves every action as asked. For tests and trusted setups.
type ApproveAll struct{}

// Decide approves.
func (ApproveAll) Decide(context.Context, *protocol.Pending) (*protocol.Decision, error) {
	return &protocol.Decision{Approve: true, By: "approve-all", Time: time.Now().UTC()}, nil
}

// DenyAll denies every action; the model hears "no approver available".
type DenyAll struct{}

// Decide denies.
func (DenyAll) Decide(context.Context, *protocol.Pending) (*protocol.Decision, error) {
	return &protocol.Decision{Reason: "no approver available", By: "deny-all", Time: time.Now().UTC()}, nil
}

// ApproverFunc adapts a function to an Approver.
type ApproverFunc func(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error)

// Decide calls f.
func (f ApproverFunc) Decide(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error) {
	return f(ctx, p)
}
