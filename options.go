package harness

import (
	"log/slog"

	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/worker"
)

// The options are typed by where they apply, as nats.go's jetstream options
// are: each call takes an interface that only the options it understands
// implement, so an option in the wrong place does not compile.
//
//	option            Run  Resume  Client.Submit  RunHandle.Resume
//	Option (cluster)   ✓     ✓
//	WithRunID          ✓                ✓
//	WithObserver       ✓     ✓          ✓
//	WithFlow           ✓     ✓          ✓
//	WithPolicy               ✓                         ✓
//	WithDecision             ✓                         ✓

// RunOption configures Run: the cluster's options (Option), WithRunID and
// WithObserver.
type RunOption interface{ applyRun(*Config, *callOptions) }

// ResumeOption configures the package's Resume: the cluster's options
// (Option), WithPolicy, WithDecision and WithObserver.
type ResumeOption interface{ applyResume(*Config, *callOptions) }

// SubmitOption configures Client.Submit: WithRunID and WithObserver.
type SubmitOption interface{ applySubmit(*callOptions) }

// CarryOption configures RunHandle.Resume, on a cluster already running:
// WithPolicy and WithDecision.
type CarryOption interface{ applyCarry(*callOptions) }

// callOptions are what the per-call options set.
type callOptions struct {
	id       string
	observer func(*protocol.Event)
	flow     func(*protocol.Event) Flow
	policy   *protocol.Policy
	approval string
	decision *protocol.Decision
	decided  bool // WithDecision was given, even with a nil decision
}

// Option configures the embedded cluster that Run and Resume start for
// the call. Start takes a Config instead.
type Option func(*Config)

func (o Option) applyRun(c *Config, _ *callOptions)    { o(c) }
func (o Option) applyResume(c *Config, _ *callOptions) { o(c) }

// WithProvider sets the provider that answers the agent's turns. Required.
func WithProvider(p worker.Provider) Option { return func(c *Config) { c.Provider = p } }

// WithDataDir sets the data directory that keeps the trace; default
// DefaultDataDir().
func WithDataDir(dir string) Option { return func(c *Config) { c.DataDir = dir } }

// WithLogger sends the roles' logs to l.
func WithLogger(l *slog.Logger) Option { return func(c *Config) { c.Logger = l } }

// WithBackends sets the sandbox backends, best first; default the floor,
// which runs nothing without WithAllowFloor.
func WithBackends(b ...sandbox.Backend) Option { return func(c *Config) { c.Backends = b } }

// WithAllowFloor lets the sandboxer run commands on the floor backend:
// unsandboxed, as this process's user, seeing what it sees. It is the
// caller's choice as the operator, never a contract's; without it a
// contract naming "floor" is refused, and so is a command that would have
// to fall back to it.
func WithAllowFloor() Option { return func(c *Config) { c.AllowFloor = true } }

// WithApprover sets who answers what the policy asks a person; default
// durable: the run pauses with outcome awaiting_approval until a decision
// is recorded (RunHandle.Decide, `harness approve`).
func WithApprover(a coordinator.Approver) Option { return func(c *Config) { c.Approver = a } }

// RunIDOption is what WithRunID returns.
type RunIDOption string

func (o RunIDOption) applyRun(_ *Config, co *callOptions) { co.id = string(o) }
func (o RunIDOption) applySubmit(co *callOptions)         { co.id = string(o) }

// WithRunID sets the run's idempotency key, and so its id; default a fresh
// one. Submitting again with the same id reports that run, and starts no
// other.
func WithRunID(id string) RunIDOption { return RunIDOption(id) }

// ObserverOption is what WithObserver returns.
type ObserverOption func(*protocol.Event)

func (o ObserverOption) applyRun(_ *Config, co *callOptions)    { co.observer = o }
func (o ObserverOption) applyResume(_ *Config, co *callOptions) { co.observer = o }
func (o ObserverOption) applySubmit(co *callOptions)            { co.observer = o }

// WithObserver calls fn for every live event of the run, in order, on one
// goroutine, from before the run is submitted or resumed, so none is
// missed. A slow observer loses events, never slows the run; the trace has
// them all. With Client.Submit it observes until RunHandle.Wait returns.
func WithObserver(fn func(*protocol.Event)) ObserverOption { return ObserverOption(fn) }

// Flow is what an observer given with WithFlow says after each event:
// carry on, or cancel the run (io-harness 0.17's Flow).
type Flow int

// Flows.
const (
	FlowContinue Flow = iota
	FlowCancel
)

// FlowOption is what WithFlow returns.
type FlowOption func(*protocol.Event) Flow

func (o FlowOption) applyRun(_ *Config, co *callOptions)    { co.flow = o }
func (o FlowOption) applyResume(_ *Config, co *callOptions) { co.flow = o }
func (o FlowOption) applySubmit(co *callOptions)            { co.flow = o }

// WithFlow is WithObserver for an observer that may stop the run: when fn
// returns FlowCancel the run is cancelled (RunHandle.Cancel, by
// "observer") and ends cancelled. Events after that are still delivered.
func WithFlow(fn func(*protocol.Event) Flow) FlowOption { return FlowOption(fn) }

// PolicyOption is what WithPolicy returns.
type PolicyOption struct{ policy *protocol.Policy }

func (o PolicyOption) applyResume(_ *Config, co *callOptions) { co.policy = o.policy }
func (o PolicyOption) applyCarry(co *callOptions)             { co.policy = o.policy }

// WithPolicy carries the run on under this policy instead of the one it
// was started with, and records it in the trace as the run's policy from
// then on (io-harness 0.17's resume_with). A sub-agent's new policy stays
// within its parent's.
func WithPolicy(p *protocol.Policy) PolicyOption { return PolicyOption{p} }

// DecisionOption is what WithDecision returns.
type DecisionOption struct {
	approval string
	decision *protocol.Decision
}

func (o DecisionOption) applyResume(_ *Config, co *callOptions) { o.applyCarry(co) }
func (o DecisionOption) applyCarry(co *callOptions) {
	co.approval, co.decision, co.decided = o.approval, o.decision, true
}

// WithDecision records a person's decision on the action the run waits
// for (approval is the id the paused run printed, RUN.STEP.CALL) before
// carrying it on (io-harness 0.17's resume_with_decision):
//
//   - a nil decision defers again: nothing is written, and the result says
//     the run still awaits approval;
//   - a denial ends the run denied, and the model hears the reason;
//   - an approval performs the action once, rewritten if the decision
//     rewrites it, after checking it against the run's policy again, so a
//     deny added while the run was paused still holds.
//
// Calling again with the same decision (after a crash, say) carries on.
func WithDecision(approval string, d *protocol.Decision) DecisionOption {
	return DecisionOption{approval, d}
}
