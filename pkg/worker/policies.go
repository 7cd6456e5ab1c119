package worker

import (
	"sync"

	"github.com/ioharness/harness/internal/jsoncache"
	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// policies keeps the runs' policies as the egress check uses them, by
// their JSON: decoded, compiled, and with the provider's endpoints allowed
// in a layer of their own. Every task of a run carries the run's policy
// byte for byte, so it is decoded and compiled once, not at every turn
// (which cost the worker more than the rest of its own work). The
// provider's endpoints are the worker's, the same for every task.
type policies struct {
	once  sync.Once
	cache *jsoncache.Cache[*egressPolicy]
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
	c.once.Do(func() { c.cache = jsoncache.New[*egressPolicy](policyCacheSize, policyCacheBytes, nil) })
	if e, ok := c.cache.Get(raw); ok {
		return e
	}
	e := &egressPolicy{}
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
	e, _ = c.cache.Keep(raw, e)
	return e
}
