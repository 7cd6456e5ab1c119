package sandboxer

import (
	"sync"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/internal/jsoncache"
	"github.com/ioharness/harness/internal/wirejson"
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

// compiled holds the compiled form of every policy a sandboxer's cache
// of policies (policies) holds, by the cached policy's own value: an op
// decoded with a cached policy shares that value, and each of its
// verdicts (the environment's judge, the call's own judge) finds it here
// rather than compiling the policy again, which cost more than the read it
// judged. An op whose policy was dropped from the cache meanwhile, or was
// never in it, compiles it at each use.
var compiled sync.Map // *protocol.Policy -> *policy.Policy

// compilePolicy is policy.FromProtocol(p), the compiled policy of a cached
// one when p is.
func compilePolicy(p *protocol.Policy) (*policy.Policy, error) {
	if pol, ok := compiled.Load(p); ok {
		return pol.(*policy.Policy), nil
	}
	return policy.FromProtocol(p)
}

// policies caches the policies the ops a sandboxer serves carry, decoded
// and compiled, by their JSON: a run's ops all carry the run's policy, byte
// for byte, so each is decoded and compiled once rather than at every op.
// Its bounds are a worker's (a few hundred policies, a few megabytes);
// a policy it lets go leaves compiled with it.
type policies struct {
	once  sync.Once
	cache *jsoncache.Cache[*protocol.Policy]
}

// policyCacheSize and policyCacheBytes bound the policies a sandboxer
// keeps compiled: a few hundred runs' worth, a few kilobytes each, and no
// more than a few megabytes however large an op's policy.
const (
	policyCacheSize  = 256
	policyCacheBytes = 8 << 20
)

// decode returns the policy whose JSON is raw (nil for none): the cached
// one, or a new one decoded and compiled (kept, if it compiles and is
// within the bounds). Errors: raw is not a policy's JSON.
func (c *policies) decode(raw []byte) (*protocol.Policy, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	c.once.Do(func() {
		c.cache = jsoncache.New(policyCacheSize, policyCacheBytes, func(p *protocol.Policy) { compiled.Delete(p) })
	})
	if p, ok := c.cache.Get(raw); ok {
		return p, nil
	}
	p := new(protocol.Policy)
	if err := wirejson.Unmarshal(raw, p); err != nil {
		return nil, err
	}
	pol, err := policy.FromProtocol(p)
	if err != nil {
		return p, nil // each use says why it does not compile
	}
	// Compiled before it is kept, so that a drop by another op, which
	// may follow at once, finds it; taken out again if not kept.
	compiled.Store(p, pol)
	q, kept := c.cache.Keep(raw, p)
	if !kept {
		compiled.Delete(p)
	}
	return q, nil
}
