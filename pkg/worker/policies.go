package worker

import (
	"sync"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// policies keeps the runs' policies as the egress check uses them, by
// their JSON: decoded, compiled, and with the provider's endpoints allowed
// in a layer of their own. Every task of a run carries the run's policy
// byte for byte, so it is decoded and compiled once, not at every turn
// (which cost the worker more than the rest of its own work). The
// provider's endpoints are the worker's, the same for every task. It
// holds at most policyCacheSize policies of policyCacheBytes in all; past
// either it starts again empty.
type policies struct {
	mu    sync.Mutex
	byRaw map[string]*egressPolicy
	bytes int // the JSON of those kept
}

// egressPolicy is one cached policy: compiled with the provider's layer,
// or why it does not compile.
type egressPolicy struct {
	pol *policy.Policy
	err error
}

// policyCacheSize and policyCacheBytes bound the policies a worker keeps:
// a few hundred runs' worth, a few kilobytes each, and no more than a few
// megabytes however large a task's policy.
const (
	policyCacheSize  = 256
	policyCacheBytes = 8 << 20
)

// of returns the policy whose JSON is raw, with endpoints allowed: cached,
// or decoded and compiled now and kept.
func (c *policies) of(raw []byte, endpoints []string) *egressPolicy {
	c.mu.Lock()
	e, ok := c.byRaw[string(raw)]
	c.mu.Unlock()
	if ok {
		return e
	}
	e = &egressPolicy{}
	var p protocol.Policy
	if e.err = wirejson.Unmarshal(raw, &p); e.err == nil {
		e.pol, e.err = policy.FromProtocol(&p)
	}
	if e.err == nil {
		allow := make([]policy.Rule, 0, len(endpoints))
		for _, ep := range endpoints {
			allow = append(allow, policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: ep})
		}
		e.pol = e.pol.WithLayer("provider", allow...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byRaw) >= policyCacheSize || c.bytes+len(raw) > policyCacheBytes {
		clear(c.byRaw)
		c.bytes = 0
	}
	if len(raw) > policyCacheBytes {
		return e // used once, kept by nobody
	}
	if c.byRaw == nil {
		c.byRaw = make(map[string]*egressPolicy)
	}
	if _, ok := c.byRaw[string(raw)]; !ok {
		c.bytes += len(raw)
	}
	c.byRaw[string(raw)] = e
	return e
}
