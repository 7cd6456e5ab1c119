package policy

import (
	"github.com/ioharness/harness/pkg/protocol"
)

// FromProtocol compiles the policy a contract carries. A nil policy (the
// contract brought none) is [Default].
//
// The built-in layers are always included, first, even when the contract
// brings layers of its own: builtin-secrets ([SecretPatterns]), then
// builtin-git ([GitPatterns]). A contract can add rules and defaults but
// cannot reopen a secret or write under .git, because a deny in any layer
// beats an allow in every layer. (A layer identical to one already present,
// such as a built-in layer in a policy written by [Policy.Protocol], is not
// kept a second time: it could never decide a verdict.) An embedder that
// really means to let an agent at those files builds its policy with [New]
// instead. A default the contract leaves out takes [Default]'s value: read
// allow, write ask, exec ask, net deny.
//
// The policy is validated first; an invalid one returns the
// *protocol.Error of [protocol.Policy.Validate] (CodeMissingField or
// CodeInvalidField, naming the field) and a nil Policy.
func FromProtocol(p *protocol.Policy) (*Policy, error) {
	if p == nil {
		return Default(), nil
	}
	d, layers, err := fromWire(p)
	if err != nil {
		return nil, err
	}
	all := builtinLayers()
	for _, l := range layers {
		all = appendLayer(all, l)
	}
	return build(d, all), nil
}

// Restore compiles exactly the policy p describes, adding nothing: it reads
// back what [Policy.Protocol] wrote, so Restore(q.Protocol()) evaluates
// every check as q does, for every q (a [Permissive] policy included). A
// default p leaves out takes Default's value, as in FromProtocol. Use it for
// a policy stored with a run; use FromProtocol for a contract's.
//
// A nil p returns a *protocol.Error of CodeMissingField (nothing was stored,
// and guessing a policy would be wrong either way); an invalid one the
// error of [protocol.Policy.Validate]. The Policy is nil on error.
func Restore(p *protocol.Policy) (*Policy, error) {
	if p == nil {
		return nil, protocol.FieldError(protocol.CodeMissingField, "policy",
			"store the run's policy when it starts (Policy.Protocol)", "no policy to restore")
	}
	d, layers, err := fromWire(p)
	if err != nil {
		return nil, err
	}
	return build(d, layers), nil
}

func fromWire(p *protocol.Policy) (Defaults, []Layer, error) {
	if err := p.Validate(); err != nil {
		return Defaults{}, nil, err
	}
	layers := make([]Layer, 0, len(p.Layers))
	for _, wl := range p.Layers {
		l := Layer{Name: wl.Name, Rules: make([]Rule, 0, len(wl.Rules))}
		for _, wr := range wl.Rules {
			r, err := ParseRule(wr)
			if err != nil { // unreachable after Validate; kept for safety
				return Defaults{}, nil, err
			}
			l.Rules = append(l.Rules, r)
		}
		layers = append(layers, l)
	}
	var d Defaults
	if wd := p.Defaults; wd != nil {
		// Validate accepted every non-empty value; "" parses to the zero
		// Effect, which means the built-in default.
		d.Read, _ = parseEffect(wd.Read)
		d.Write, _ = parseEffect(wd.Write)
		d.Exec, _ = parseEffect(wd.Exec)
		d.Net, _ = parseEffect(wd.Net)
	}
	return d, layers, nil
}

// Protocol returns the policy in its wire form, for a contract or for
// storage: every layer in order, and all four defaults written out.
// [Restore] reads it back exactly; [FromProtocol] reads it back exactly
// when the policy's first layers are the built-in ones (builtin-secrets,
// then builtin-git), as for every policy compiled from a contract.
func (p *Policy) Protocol() *protocol.Policy {
	p = p.orDenyAll()
	out := &protocol.Policy{
		Layers: make([]protocol.Layer, len(p.layers)),
		Defaults: &protocol.Defaults{
			Read:  p.defaults[Read].String(),
			Write: p.defaults[Write].String(),
			Exec:  p.defaults[Exec].String(),
			Net:   p.defaults[Net].String(),
		},
	}
	for i, l := range p.layers {
		wl := protocol.Layer{Name: l.Name, Rules: make([]protocol.Rule, len(l.Rules))}
		for j, r := range l.Rules {
			wl.Rules[j] = r.Protocol()
		}
		out.Layers[i] = wl
	}
	return out
}

// Protocol returns the rule in its wire form.
func (r Rule) Protocol() protocol.Rule {
	return protocol.Rule{Act: r.Act.String(), Effect: r.Effect.String(), Pattern: r.Pattern}
}

// ParseRule converts a rule from its wire form, such as one an approver
// asks to remember. An unknown act or effect returns a *protocol.Error of
// CodeInvalidField naming "act" or "effect", and an empty pattern one of
// CodeMissingField naming "pattern".
func ParseRule(r protocol.Rule) (Rule, error) {
	act, err := ParseAct(r.Act)
	if err != nil {
		return Rule{}, err
	}
	eff, err := ParseEffect(r.Effect)
	if err != nil {
		return Rule{}, err
	}
	if r.Pattern == "" {
		return Rule{}, protocol.FieldError(protocol.CodeMissingField, "pattern",
			`give a glob; "*" matches everything`, "rule has no pattern")
	}
	return Rule{Act: act, Effect: eff, Pattern: r.Pattern}, nil
}

// ParseAct returns the act named s: "read", "write", "exec" or "net".
// Anything else returns a *protocol.Error of CodeInvalidField naming "act".
func ParseAct(s string) (Act, error) {
	for a := Read; a <= Net; a++ {
		if actNames[a] == s {
			return a, nil
		}
	}
	return 0, protocol.FieldError(protocol.CodeInvalidField, "act",
		`use "read", "write", "exec" or "net"`, "unknown act %q", s)
}

// ParseEffect returns the effect named s: "allow", "ask" or "deny".
// Anything else returns a *protocol.Error of CodeInvalidField naming
// "effect".
func ParseEffect(s string) (Effect, error) {
	if e, ok := parseEffect(s); ok && e != 0 {
		return e, nil
	}
	return 0, protocol.FieldError(protocol.CodeInvalidField, "effect",
		`use "allow", "ask" or "deny"`, "unknown effect %q", s)
}

// parseEffect maps "" to the zero Effect and reports whether s was known.
func parseEffect(s string) (Effect, bool) {
	if s == "" {
		return 0, true
	}
	for e := Allow; e <= Deny; e++ {
		if effectNames[e] == s {
			return e, true
		}
	}
	return 0, false
}

// MarshalText writes the act's wire name. An act that is not one of the four
// returns a *protocol.Error of CodeInvalidField.
func (a Act) MarshalText() ([]byte, error) {
	if !a.valid() {
		return nil, protocol.FieldError(protocol.CodeInvalidField, "act",
			`use "read", "write", "exec" or "net"`, "unknown act %d", uint8(a))
	}
	return []byte(actNames[a]), nil
}

// UnmarshalText reads an act's wire name; see [ParseAct] for the error.
func (a *Act) UnmarshalText(b []byte) error {
	v, err := ParseAct(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// MarshalText writes the effect's wire name. An effect that is not one of
// the three returns a *protocol.Error of CodeInvalidField.
func (e Effect) MarshalText() ([]byte, error) {
	if !e.valid() {
		return nil, protocol.FieldError(protocol.CodeInvalidField, "effect",
			`use "allow", "ask" or "deny"`, "unknown effect %d", uint8(e))
	}
	return []byte(effectNames[e]), nil
}

// UnmarshalText reads an effect's wire name; see [ParseEffect] for the
// error.
func (e *Effect) UnmarshalText(b []byte) error {
	v, err := ParseEffect(string(b))
	if err != nil {
		return err
	}
	*e = v
	return nil
}
