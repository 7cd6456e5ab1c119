package sandboxer

import (
	"sync"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// toolJudge returns the hook the file tools ask about every path a call's
// resolution passes through (tools.Env.Judge): the path as named and each
// symbolic link's target inside the workspace, each under the op's
// policy, the strictest verdict winning. An approval the op carries covers
// the paths the coordinator asked a person about, the ones the call names
// (and, for a git tool, what lies beneath a directory it names: see
// gate.Covering), and never a different path a link leads to (gate.Path).
// A policy that is
// missing or does not compile refuses everything. The verdict of the last
// refusal is left in *refused, for the observation's record. g is what
// the call's tool declares it acts on, for a tool that is not a built-in.
func toolJudge(op *protocol.SandboxOp, g *protocol.ToolGate, refused *policy.Verdict) func(act, rel string) error {
	pol, err := compilePolicy(orEmpty(op.Policy))
	if op.Policy == nil || err != nil {
		return func(act, rel string) error {
			return protocol.Errorf(protocol.CodeRefused, "[%s refused] %q: no policy verdict covers this operation", act, rel)
		}
	}
	var named []string
	tool := ""
	if op.Call != nil {
		named, tool = gate.NamedOf(op.Call, g), op.Call.Name
	}
	approved := op.Approval != ""
	return func(act, rel string) error {
		a := policy.Read
		if act == tools.ActWrite {
			a = policy.Write
		}
		// The named path rel is judged as, if any covers it; else the
		// first, so that an ask on a link's target says to name it.
		n := gate.Covering(tool, named, rel)
		if n == "" && len(named) > 0 {
			n = named[0]
		}
		v, why := gate.Path(pol, a, rel, n, approved)
		if why == "" {
			return nil
		}
		*refused = v
		return protocol.Errorf(protocol.CodeRefused, "%s", why)
	}
}

// verifyJudge is the hook a verification's file_contains or file_equals
// reads through:
// every path of the resolution must be explicitly allowed to be read
// (gate.Reads), since nobody can be asked during a check.
func verifyJudge(pol *policy.Policy) func(act, rel string) error {
	return func(act, rel string) error {
		if why := gate.Reads(pol, rel); why != "" {
			return protocol.Errorf(protocol.CodeRefused, "%s", why)
		}
		return nil
	}
}

// orEmpty is p, or an empty policy (which allows nothing) for none.
func orEmpty(p *protocol.Policy) *protocol.Policy {
	if p == nil {
		return &protocol.Policy{}
	}
	return p
}

// opPolicies holds, while an op is served, the policy it carries,
// compiled once: a tool call's policy is asked for its verdict, by its
// environment's judge and by the call's own judge, and compiling it each
// time cost more than the read it judged. Keyed by the op's own policy
// value, which the entry keeps alive, so no other op's can match it.
var opPolicies sync.Map // *protocol.Policy -> *policy.Policy

// holdPolicy compiles op's policy for the time op is served; release
// forgets it. An op without a policy, or with one that does not compile,
// holds nothing: each use compiles it and says why it cannot.
func holdPolicy(op *protocol.SandboxOp) (release func()) {
	if op.Policy == nil {
		return func() {}
	}
	pol, err := policy.FromProtocol(op.Policy)
	if err != nil {
		return func() {}
	}
	opPolicies.Store(op.Policy, pol)
	return func() { opPolicies.Delete(op.Policy) }
}

// compilePolicy is policy.FromProtocol(p), the compiled policy held for
// the op being served when p is its policy.
func compilePolicy(p *protocol.Policy) (*policy.Policy, error) {
	if pol, ok := opPolicies.Load(p); ok {
		return pol.(*policy.Policy), nil
	}
	return policy.FromProtocol(p)
}
