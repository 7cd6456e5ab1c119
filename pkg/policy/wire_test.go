package policy

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestFromProtocol(t *testing.T) {
	contract := &protocol.Policy{
		Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
			{Act: "read", Effect: "allow", Pattern: "*"},
			{Act: "write", Effect: "allow", Pattern: "src/*"},
			{Act: "exec", Effect: "ask", Pattern: "git push*"},
		}}},
		Defaults: &protocol.Defaults{Write: "deny"},
	}
	p, err := FromProtocol(contract)
	if err != nil {
		t.Fatalf("FromProtocol: %v", err)
	}
	want := []Layer{
		Default().Layers()[0],
		Default().Layers()[1],
		{Name: "app", Rules: []Rule{{Read, Allow, "*"}, {Write, Allow, "src/*"}, {Exec, Ask, "git push*"}}},
	}
	if diff := cmp.Diff(want, p.Layers()); diff != "" {
		t.Errorf("FromProtocol layers (-want +got):\n%s", diff)
	}
	if got, want := p.Defaults(), (Defaults{Read: Allow, Write: Deny, Exec: Ask, Net: Deny}); got != want {
		t.Errorf("FromProtocol defaults = %+v, want %+v (missing ones from Default)", got, want)
	}
	// The contract allows reading everything; the secrets layer still wins.
	if v := p.Check(Read, "config/.env"); v.Effect != Deny || v.Layer != SecretsLayer {
		t.Errorf("Check(read, config/.env) = %v, want deny by %s", v, SecretsLayer)
	}

	t.Run("nil is Default", func(t *testing.T) {
		p, err := FromProtocol(nil)
		if err != nil {
			t.Fatalf("FromProtocol(nil): %v", err)
		}
		if diff := cmp.Diff(Default().Protocol(), p.Protocol()); diff != "" {
			t.Errorf("FromProtocol(nil) (-Default +got):\n%s", diff)
		}
	})
	t.Run("no defaults at all", func(t *testing.T) {
		p, err := FromProtocol(&protocol.Policy{})
		if err != nil {
			t.Fatalf("FromProtocol: %v", err)
		}
		if got, want := p.Defaults(), Default().Defaults(); got != want {
			t.Errorf("defaults = %+v, want %+v", got, want)
		}
	})
	t.Run("permissive defaults keep the secrets layer", func(t *testing.T) {
		p, err := FromProtocol(&protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "allow", Net: "allow"}})
		if err != nil {
			t.Fatalf("FromProtocol: %v", err)
		}
		if v := p.Check(Write, "id_rsa"); v.Effect != Deny {
			t.Errorf("Check(write, id_rsa) = %v, want deny", v)
		}
		if p.IsPermissive() {
			t.Errorf("a contract's policy is permissive")
		}
	})
}

// TestFromProtocolBuiltinsOnce checks that the built-in layers are put
// first exactly once: not repeated when the contract already holds them (a
// policy written by Protocol), and added above an older version of the
// secrets layer, which stays and binds as any layer does.
func TestFromProtocolBuiltinsOnce(t *testing.T) {
	names := func(p *Policy) []string {
		var out []string
		for _, l := range p.Layers() {
			out = append(out, l.Name)
		}
		return out
	}
	again, err := FromProtocol(Default().WithLayer("app", r(Write, Allow, "src/*")).Protocol())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{SecretsLayer, GitLayer, "app"}, names(again)); diff != "" {
		t.Errorf("FromProtocol(Protocol()) layers (-want +got):\n%s", diff)
	}
	old := &protocol.Policy{Layers: []protocol.Layer{{Name: SecretsLayer, Rules: []protocol.Rule{
		{Act: "read", Effect: "deny", Pattern: ".env"}, {Act: "read", Effect: "deny", Pattern: "legacy.txt"},
	}}}}
	p, err := FromProtocol(old)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{SecretsLayer, GitLayer, SecretsLayer}, names(p)); diff != "" {
		t.Errorf("FromProtocol(an older secrets layer) layers (-want +got):\n%s", diff)
	}
	if v := p.Check(Read, "a/.ENV.local"); v.Effect != Deny || v.Rule != ".env.*" {
		t.Errorf("Check(read, a/.ENV.local) = %v, want deny by the current builtin-secrets", v)
	}
	if v := p.Check(Read, "legacy.txt"); v.Effect != Deny {
		t.Errorf("Check(read, legacy.txt) = %v, want the older layer's deny kept", v)
	}
}

func TestFromProtocolErrors(t *testing.T) {
	tests := []struct {
		name  string
		p     *protocol.Policy
		want  error
		field string
	}{
		{"unknown act", &protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{{Act: "delete", Effect: "deny", Pattern: "*"}}}}},
			protocol.ErrInvalidField, "policy.layers[0].rules[0].act"},
		{"unknown effect", &protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{{Act: "read", Effect: "maybe", Pattern: "*"}}}}},
			protocol.ErrInvalidField, "policy.layers[0].rules[0].effect"},
		{"empty pattern", &protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{{Act: "read", Effect: "deny"}}}}},
			protocol.ErrMissingField, "policy.layers[0].rules[0].pattern"},
		{"unnamed layer", &protocol.Policy{Layers: []protocol.Layer{{Rules: nil}}},
			protocol.ErrMissingField, "policy.layers[0].name"},
		{"unknown default", &protocol.Policy{Defaults: &protocol.Defaults{Net: "sometimes"}},
			protocol.ErrInvalidField, "policy.defaults.net"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, f := range map[string]func(*protocol.Policy) (*Policy, error){"FromProtocol": FromProtocol, "Restore": Restore} {
				p, err := f(tt.p)
				if !errors.Is(err, tt.want) || p != nil {
					t.Fatalf("%s = %v, %v, want nil, %v", name, p, err, tt.want)
				}
				if got := protocol.AsError(err).Field; got != tt.field {
					t.Errorf("%s error field = %q, want %q", name, got, tt.field)
				}
			}
		})
	}
	if _, err := Restore(nil); !errors.Is(err, protocol.ErrMissingField) {
		t.Errorf("Restore(nil) error = %v, want %v", err, protocol.ErrMissingField)
	}
}

func TestRoundTrip(t *testing.T) {
	contract, err := FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
		{Act: "net", Effect: "allow", Pattern: "API.example.com"},
		{Act: "exec", Effect: "deny", Pattern: "npm publish*"},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    *Policy
		// fromProtocol says FromProtocol reads Protocol's output back
		// exactly, as it does when the secrets layer comes first.
		fromProtocol bool
	}{
		{"Default", Default(), true},
		{"contract", contract, true},
		{"merged and remembered", Merge(contract, base()).Remember(r(Write, Allow, "docs/*")), true},
		{"contained", Contain(contract, base()), true},
		{"Permissive", Permissive(), false},
		{"New without secrets", New(Defaults{Exec: Deny}, layer("x", r(Read, Ask, "a"))), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := tt.p.Protocol()
			// Through JSON, as storage does.
			b, err := json.Marshal(wire)
			if err != nil {
				t.Fatal(err)
			}
			var back protocol.Policy
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			restored, err := Restore(&back)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if diff := cmp.Diff(wire, restored.Protocol()); diff != "" {
				t.Errorf("Restore(Protocol()) (-want +got):\n%s", diff)
			}
			fp, err := FromProtocol(&back)
			if err != nil {
				t.Fatalf("FromProtocol: %v", err)
			}
			if same := cmp.Equal(wire, fp.Protocol()); same != tt.fromProtocol {
				t.Errorf("FromProtocol(Protocol()) equal = %v, want %v:\n%s", same, tt.fromProtocol, cmp.Diff(wire, fp.Protocol()))
			}
		})
	}
}

func TestActAndEffectNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		act  Act
	}{{"read", Read}, {"write", Write}, {"exec", Exec}, {"net", Net}} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.act.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			a, err := ParseAct(tt.name)
			if err != nil || a != tt.act {
				t.Errorf("ParseAct(%q) = %v, %v, want %v", tt.name, a, err, tt.act)
			}
			b, err := json.Marshal(tt.act)
			if err != nil || string(b) != `"`+tt.name+`"` {
				t.Errorf("json.Marshal(%v) = %s, %v", tt.act, b, err)
			}
			var back Act
			if err := json.Unmarshal(b, &back); err != nil || back != tt.act {
				t.Errorf("json.Unmarshal(%s) = %v, %v", b, back, err)
			}
		})
	}
	for _, tt := range []struct {
		name string
		eff  Effect
	}{{"allow", Allow}, {"ask", Ask}, {"deny", Deny}} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.eff.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			e, err := ParseEffect(tt.name)
			if err != nil || e != tt.eff {
				t.Errorf("ParseEffect(%q) = %v, %v, want %v", tt.name, e, err, tt.eff)
			}
			b, err := json.Marshal(tt.eff)
			if err != nil || string(b) != `"`+tt.name+`"` {
				t.Errorf("json.Marshal(%v) = %s, %v", tt.eff, b, err)
			}
			var back Effect
			if err := json.Unmarshal(b, &back); err != nil || back != tt.eff {
				t.Errorf("json.Unmarshal(%s) = %v, %v", b, back, err)
			}
		})
	}
	if !(Allow < Ask && Ask < Deny) {
		t.Errorf("effects are not ordered allow < ask < deny")
	}
	for _, tt := range []struct {
		name string
		got  string
		want string
	}{
		{"zero act", Act(0).String(), "act(0)"},
		{"unknown act", Act(9).String(), "act(9)"},
		{"zero effect", Effect(0).String(), "effect(0)"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: String() = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	for _, s := range []string{"", "Read", "delete"} {
		if _, err := ParseAct(s); !errors.Is(err, protocol.ErrInvalidField) {
			t.Errorf("ParseAct(%q) error = %v, want %v", s, err, protocol.ErrInvalidField)
		}
	}
	for _, s := range []string{"", "Allow", "maybe"} {
		if _, err := ParseEffect(s); !errors.Is(err, protocol.ErrInvalidField) {
			t.Errorf("ParseEffect(%q) error = %v, want %v", s, err, protocol.ErrInvalidField)
		}
	}
	if _, err := json.Marshal(Act(0)); err == nil {
		t.Errorf("json.Marshal(Act(0)) succeeded")
	}
	if _, err := json.Marshal(Effect(0)); err == nil {
		t.Errorf("json.Marshal(Effect(0)) succeeded")
	}
}

func TestParseRule(t *testing.T) {
	tests := []struct {
		name    string
		in      protocol.Rule
		want    Rule
		wantErr error
	}{
		{"valid", protocol.Rule{Act: "write", Effect: "allow", Pattern: "docs/*"}, Rule{Write, Allow, "docs/*"}, nil},
		{"bad act", protocol.Rule{Act: "rm", Effect: "allow", Pattern: "*"}, Rule{}, protocol.ErrInvalidField},
		{"bad effect", protocol.Rule{Act: "read", Effect: "yes", Pattern: "*"}, Rule{}, protocol.ErrInvalidField},
		{"no pattern", protocol.Rule{Act: "read", Effect: "deny"}, Rule{}, protocol.ErrMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRule(tt.in)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("ParseRule(%+v) error = %v, want %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseRule(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
			if err == nil && got.Protocol() != tt.in {
				t.Errorf("ParseRule(%+v).Protocol() = %+v", tt.in, got.Protocol())
			}
		})
	}
}
