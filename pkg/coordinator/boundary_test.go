package coordinator

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestEffectivePolicyFromTheTrace rebuilds a sub-agent: its policy is the
// one its started record holds, not its contract's, and a policy record
// replaces it; its driver compiles that policy, so a write the contract
// allows and the recorded policy denies is refused.
func TestEffectivePolicyFromTheTrace(t *testing.T) {
	wide := &protocol.Policy{Layers: []protocol.Layer{{Name: "wide", Rules: []protocol.Rule{{Act: "write", Effect: "allow", Pattern: "*"}}}}}
	narrow := policy.Contain(policy.Default(), mustCompile(t, wide)).Protocol()
	c := contract(func(c *protocol.Contract) { c.Policy, c.Parent = wide, "p" })
	rec := started(c)
	rec.Policy, rec.ParentPolicy = narrow, policy.Default().Protocol()
	s, err := newRunState("r", []protocol.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{s: s}
	if err := d.compilePolicy(); err != nil {
		t.Fatal(err)
	}
	if v := d.pol.CheckPath(policy.Write, "a.go"); v.Effect != policy.Ask {
		t.Errorf("rebuilt sub-agent: write a.go = %v, want the parent's ask, not its contract's allow", v)
	}
	if s.parentPolicy == nil {
		t.Errorf("rebuilt sub-agent lost its parent's policy")
	}
	frozen := policy.Default().WithLayer("frozen", policy.Rule{Act: policy.Write, Effect: policy.Deny, Pattern: "*"}).Protocol()
	if err := s.apply(&protocol.Record{Kind: protocol.RecordPolicy, Step: 1, Policy: frozen}); err != nil {
		t.Fatal(err)
	}
	if err := d.compilePolicy(); err != nil {
		t.Fatal(err)
	}
	if v := d.pol.CheckPath(policy.Write, "a.go"); v.Effect != policy.Deny || v.Layer != "frozen" {
		t.Errorf("after a policy record: write a.go = %v, want deny by layer frozen", v)
	}
}

func mustCompile(t *testing.T, p *protocol.Policy) *policy.Policy {
	t.Helper()
	pol, err := policy.FromProtocol(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestProviderApprovalsAreNumbered counts the decided approvals of the
// provider's endpoint from the trace, so the next one has an id of its own
// and never one of a tool call.
func TestProviderApprovalsAreNumbered(t *testing.T) {
	first := protocol.ProviderApprovalID("r", 0)
	s, err := newRunState("r", []protocol.Record{started(contract(nil)),
		{Kind: protocol.RecordPaused, Approval: first},
		{Kind: protocol.RecordDecision, Approval: first, Decision: &protocol.Decision{Approve: true}, Remember: []protocol.Rule{hostRule("api.example.com:443")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := hostPendingOf(s, 0, &protocol.Refusal{Act: "net", Target: "other.example.com:443", Effect: "ask"})
	if id := pendingID("r", p); id != protocol.ProviderApprovalID("r", 1) || p.Tool != "" {
		t.Errorf("the second provider approval is %s (tool %q), want %s", id, p.Tool, protocol.ProviderApprovalID("r", 1))
	}
	// An approver's answer at once counts too, once its step commits.
	s1 := step(1, 10, 0, nil)
	s1.Decided = []protocol.Decided{{Approval: protocol.ProviderApprovalID("r", 1), Decision: &protocol.Decision{Approve: true, By: "terminal"}}}
	if err := s.apply(&s1); err != nil {
		t.Fatal(err)
	}
	if p := hostPendingOf(s, 1, &protocol.Refusal{Target: "third.example.com:443"}); pendingID("r", p) != protocol.ProviderApprovalID("r", 3) {
		t.Errorf("after two committed provider approvals and one in hand, the next is %s, want %s", pendingID("r", p), protocol.ProviderApprovalID("r", 3))
	}
	if id := pendingID("r", &protocol.Pending{Tool: "write_file", Step: 0, Call: 1}); id != "r.0.1" {
		t.Errorf("a tool call's approval id = %s", id)
	}
	if len(s.remembered) != 1 || s.remembered[0].Pattern != "api.example.com:443" {
		t.Errorf("remembered = %v, want the approved endpoint", s.remembered)
	}
}

// TestReservedLayers refuses a contract's layer named as the one a
// person's remembered approvals live in.
func TestReservedLayers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		layers []protocol.Layer
		ok     bool
	}{
		{"no policy", nil, true},
		{"ordinary names", []protocol.Layer{{Name: "app"}, {Name: "spawn"}}, true},
		{"remembered", []protocol.Layer{{Name: "app"}, {Name: policy.RememberedLayer}}, false},
	} {
		var p *protocol.Policy
		if tt.layers != nil {
			p = &protocol.Policy{Layers: tt.layers}
		}
		err := reservedLayers(p)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, protocol.ErrInvalidField) {
			t.Errorf("%s: reservedLayers = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestDecider names who decided: the server's word on the connection
// first, then the decider's own.
func TestDecider(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header string
		stated string
		want   string
	}{
		{"the server names the user", `{"acc":"PEOPLE","user":"alice"}`, "mallory", "nats:alice@PEOPLE"},
		{"the decider states", "", "bob", "bob"},
		{"nobody says", "", " ", "nats"},
		{"a header without a user", `{"acc":"PEOPLE"}`, "carol", "carol"},
	} {
		h := micro.Headers{}
		if tt.header != "" {
			h[requestInfoHeader] = []string{tt.header}
		}
		if got := decider(h, tt.stated); got != tt.want {
			t.Errorf("%s: decider = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestExceeds words a draw that does not fit as the ledger does.
func TestExceeds(t *testing.T) {
	caps := ledger.Limits{Tokens: 100}
	if r := exceeds(caps, ledger.Usage{InputTokens: 90}, ledger.Usage{InputTokens: 20}); r == nil || r.Dimension != ledger.DimTokens || r.Remaining != 10 || r.Asked != 20 {
		t.Errorf("exceeds = %+v, want tokens with 10 left and 20 asked", r)
	}
	if r := exceeds(caps, ledger.Usage{InputTokens: 50}, ledger.Usage{InputTokens: 50}); r != nil {
		t.Errorf("a draw that fits exactly: %v", r)
	}
	if r := exceeds(ledger.Limits{}, ledger.Usage{InputTokens: 1 << 40}, ledger.Usage{InputTokens: 1}); r != nil {
		t.Errorf("no cap refused: %v", r)
	}
}
