package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		bad  string
	}{
		{"zero value", Config{}, ""},
		{"a pool that is no subject token", Config{Pools: []string{"gpu.large"}}, "pool"},
		{"an id that is no subject token", Config{ID: "w 1"}, "id"},
		{"negative concurrency", Config{Concurrency: -1}, "Concurrency"},
	} {
		err := tt.cfg.Validate()
		if (err != nil) != (tt.bad != "") || (err != nil && !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("%s: Validate() = %v, want an error about %q", tt.name, err, tt.bad)
		}
	}
	if _, err := New(nil, nil, Config{}); err == nil {
		t.Error("New without a provider succeeded")
	}
}

// endpointProvider is a provider that dials one endpoint and is never
// called here.
type endpointProvider struct{ endpoint string }

func (endpointProvider) Name() string { return "endpoint" }
func (endpointProvider) Complete(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
	return nil, errors.New("not called")
}
func (p endpointProvider) Endpoints() []string { return []string{p.endpoint} }

// TestEgress checks the provider's endpoint against the run's policy: the
// net default does not refuse it, a deny rule does, and an ask rule is
// reported for the coordinator to put to a person, unless a person's
// remembered allow answers it. Each policy is checked twice on its own
// worker, and every policy on the endpoint with a port on one worker in
// turn, twice round: the policy kept from an earlier task is the one
// whose JSON the task carries, never another's.
func TestEgress(t *testing.T) {
	base := policy.Default()
	askRule := policy.Rule{Act: policy.Net, Effect: policy.Ask, Pattern: "*.example.com"}
	type egressCase struct {
		name     string
		endpoint string
		pol      *policy.Policy
		want     string // the refusal's effect, "" for none
	}
	cases := []egressCase{
		{"the default does not refuse the provider", "api.example.com:443", base, ""},
		{"a deny rule refuses", "api.example.com:443", base.WithLayer("egress", policy.Rule{Act: policy.Net, Effect: policy.Deny, Pattern: "*.example.com"}), "deny"},
		{"an ask rule asks", "api.example.com:443", base.WithLayer("egress", askRule), "ask"},
		{"an ask rule on a host without a port asks", "api.example.com", base.WithLayer("egress", askRule), "ask"},
		{"a remembered approval answers the ask", "api.example.com:443",
			base.WithLayer("egress", askRule).Remember(policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: "api.example.com:443"}), ""},
	}
	check := func(w *Worker, tt egressCase) {
		t.Helper()
		raw, err := json.Marshal(tt.pol.Protocol())
		if err != nil {
			t.Fatal(err)
		}
		res := &protocol.TurnResult{}
		refused := w.egress(raw, res)
		switch {
		case tt.want == "" && (refused != nil || res.Refused != nil):
			t.Errorf("%s: egress = %v, %+v; want the call let through", tt.name, refused, res.Refused)
		case tt.want != "" && (!errors.Is(refused, protocol.ErrRefused) || res.Refused == nil || res.Refused.Effect != tt.want || res.Refused.Target != tt.endpoint):
			t.Errorf("%s: egress = %v, %+v; want refused with effect %s on %s", tt.name, refused, res.Refused, tt.want, tt.endpoint)
		}
	}
	shared := &Worker{p: endpointProvider{"api.example.com:443"}}
	for _, tt := range cases {
		w := &Worker{p: endpointProvider{tt.endpoint}}
		check(w, tt)
		check(w, tt)
	}
	for range 2 {
		for _, tt := range cases {
			if tt.endpoint == "api.example.com:443" {
				check(shared, tt)
			}
		}
	}
	if n, _ := shared.policies.cache.Len(); n != 4 {
		t.Errorf("the shared worker keeps %d policies, want the 4 it was given", n)
	}
	// A policy that does not decode as one refuses the call, every time.
	for range 2 {
		res := &protocol.TurnResult{}
		if err := shared.egress([]byte(`{"layers":"none"}`), res); !errors.Is(err, protocol.ErrRefused) || !strings.Contains(err.Error(), "does not compile") {
			t.Errorf("egress with a policy that does not decode = %v, want refused: it does not compile", err)
		}
	}
}

// TestTooLarge replaces a turn the bus cannot carry with a small typed
// failure that keeps what the call cost.
func TestTooLarge(t *testing.T) {
	res := &protocol.TurnResult{Run: "r", Step: 2, Attempt: 1, Worker: "w", Deliveries: 3,
		Turn: &protocol.Turn{Text: strings.Repeat("x", 1<<20), Model: "m", Usage: protocol.Usage{InputTokens: 7, OutputTokens: 9}}}
	small, data := tooLarge(res, 9<<20, 8<<20)
	if len(data) > 2048 || small.Turn != nil || !errors.Is(small.Error, protocol.ErrTooLarge) {
		t.Fatalf("tooLarge = %d bytes, turn %v, error %v; want a small too_large failure", len(data), small.Turn != nil, small.Error)
	}
	if small.Usage == nil || small.Usage.Total() != 16 || small.Model != "m" || small.Deliveries != 3 || small.Step != 2 {
		t.Errorf("tooLarge = %+v, want the call's usage, model and deliveries kept", small)
	}
	if !isTooLarge(nats.ErrMaxPayload) || !isTooLarge(fmt.Errorf("publish: %w", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum})) || isTooLarge(errors.New("other")) {
		t.Error("isTooLarge does not tell a message over the limit from other failures")
	}
}

// TestPoliciesBounded keeps the worker's policies within their bytes: one
// larger than the bound is used and not kept, and one that would take the
// kept past it starts them again.
func TestPoliciesBounded(t *testing.T) {
	big := func(n int, c string) []byte {
		return []byte(`{"layers":[{"name":"big","rules":[{"act":"read","effect":"deny","pattern":"` + strings.Repeat(c, n) + `"}]}]}`)
	}
	var c policies
	if e := c.of(big(policyCacheBytes, "a"), nil); e == nil {
		t.Fatal("no policy for a large one")
	}
	if n, b := c.cache.Len(); n != 0 || b != 0 {
		t.Errorf("a policy over the bound was kept: %d policies, %d bytes", n, b)
	}
	first, second := big(policyCacheBytes/2, "b"), big(policyCacheBytes/2, "c")
	c.of(first, nil)
	c.of(first, nil)
	if n, b := c.cache.Len(); n != 1 || b != len(first) {
		t.Errorf("after one policy twice: %d policies, %d bytes; want 1 and %d", n, b, len(first))
	}
	c.of(second, nil)
	if n, b := c.cache.Len(); n != 1 || b != len(second) {
		t.Errorf("after a second that passes the bound: %d policies, %d bytes; want 1 and %d", n, b, len(second))
	}
}
