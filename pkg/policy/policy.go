package policy

import (
	"fmt"
	"slices"
)

// Act is the kind of action a verdict is about. The zero Act is not an act:
// a check for it is refused.
type Act uint8

// The four acts. Read and Write name a slash-separated path relative to the
// workspace root, Exec a command (program, then arguments), Net a host,
// normally as host:port.
const (
	Read Act = iota + 1
	Write
	Exec
	Net
)

// numActs bounds the per-act tables; index 0 is the zero Act and stays empty.
const numActs = int(Net) + 1

var actNames = [numActs]string{Read: "read", Write: "write", Exec: "exec", Net: "net"}

// String returns the act's wire name ("read", "write", "exec", "net"), or
// "act(N)" for a value that is not one of the four.
func (a Act) String() string {
	if a.valid() {
		return actNames[a]
	}
	return fmt.Sprintf("act(%d)", uint8(a))
}

func (a Act) valid() bool { return a >= Read && a <= Net }

// Effect is what a rule or a default says about an act. Effects are ordered
// Allow < Ask < Deny, and combining two effects always keeps the stricter.
// The zero Effect is not an effect: a rule built with it counts as Deny, and
// a zero field of Defaults takes the built-in default (see [Defaults]).
type Effect uint8

// The three effects, in order of strictness.
const (
	// Allow lets the act proceed without asking anyone.
	Allow Effect = iota + 1
	// Ask lets the act proceed only once an approver approves it.
	Ask
	// Deny refuses the act. Nothing, not even an approval, moves an act
	// across a deny.
	Deny
)

var effectNames = [...]string{Allow: "allow", Ask: "ask", Deny: "deny"}

// String returns the effect's wire name ("allow", "ask", "deny"), or
// "effect(N)" for a value that is not one of the three.
func (e Effect) String() string {
	if e.valid() {
		return effectNames[e]
	}
	return fmt.Sprintf("effect(%d)", uint8(e))
}

func (e Effect) valid() bool { return e >= Allow && e <= Deny }

// stricter returns the stricter of a and b.
func stricter(a, b Effect) Effect { return max(a, b) }

// Rule gives Effect to every Act whose target matches Pattern.
//
// Pattern is a glob in the syntax of package internal/glob: '*' matches any
// run of characters including '/', '?' exactly one character, everything
// else itself. How a target is matched depends on the act; see the package
// documentation.
type Rule struct {
	// Act is the act the rule governs.
	Act Act
	// Effect is what the rule says when it matches.
	Effect Effect
	// Pattern is the glob a target is matched against.
	Pattern string
}

// Layer is a named list of rules. Verdicts name the layer their rule came
// from, so a refusal from a shared base is attributable to that base.
type Layer struct {
	// Name is reported in verdicts; an empty name becomes "policy".
	Name string
	// Rules are tried in order within each evaluation pass.
	Rules []Rule
}

// Defaults is the effect per act when no rule matches. A zero field means
// the built-in default for that act: read Allow, write Ask, exec Ask, net
// Deny, the values [Default] uses. So Defaults{} is those four. A field
// holding a value that is not an Effect means Deny.
type Defaults struct {
	Read  Effect // default for reads; zero means Allow
	Write Effect // default for writes; zero means Ask
	Exec  Effect // default for commands; zero means Ask
	Net   Effect // default for connections; zero means Deny
}

// builtinDefaults are the per-act defaults of [Default], also used for every
// default a caller leaves unset.
var builtinDefaults = [numActs]Effect{Read: Allow, Write: Ask, Exec: Ask, Net: Deny}

// table returns d indexed by act, with unset fields resolved to the built-in
// defaults and unknown effects to Deny.
func (d Defaults) table() [numActs]Effect {
	t := [numActs]Effect{Read: d.Read, Write: d.Write, Exec: d.Exec, Net: d.Net}
	for a := Read; a <= Net; a++ {
		switch {
		case t[a] == 0:
			t[a] = builtinDefaults[a]
		case !t[a].valid():
			t[a] = Deny
		}
	}
	return t
}

func defaultsOf(t [numActs]Effect) Defaults {
	return Defaults{Read: t[Read], Write: t[Write], Exec: t[Exec], Net: t[Net]}
}

// Layer names the package gives meaning to.
const (
	// SecretsLayer is the name of the built-in layer that denies reading and
	// writing secret-bearing files (see [SecretPatterns]); [Default] and
	// [FromProtocol] always include it.
	SecretsLayer = "builtin-secrets"
	// GitLayer is the name of the built-in layer that denies writing a
	// repository's own files (see [GitPatterns]); [Default] and
	// [FromProtocol] always include it, after [SecretsLayer].
	GitLayer = "builtin-git"
	// RememberedLayer is the name of the top layer [Policy.Remember] adds.
	RememberedLayer = "remembered"
	// unnamedLayer replaces an empty layer name, so that a verdict with a
	// rule always names a layer ("" means the default decided). io-harness
	// uses the same name for rules added without a layer.
	unnamedLayer = "policy"
)

// SecretPatterns returns the patterns of the builtin-secrets layer: the
// files it denies both to read and to write, at any depth, matched like
// every path pattern (whole and by last element) but without regard to
// ASCII case, so ".ENV", "ID_RSA" and "certs/Server.PEM" are denied too. A
// read allow list alone does not protect secrets that live inside the
// workspace, and nothing an agent legitimately does rewrites a private key.
//
//   - .env, .env.* (.env.local, .env.production, and .env.example too):
//     environment files, which hold API keys and passwords.
//   - *.pem, *.key, *.p12, *.pfx: private keys and certificate bundles.
//   - id_rsa, id_dsa, id_ecdsa, id_ecdsa_sk, id_ed25519, id_ed25519_sk:
//     SSH private keys under their default names.
//   - .git-credentials, .netrc, .npmrc: credential stores of git, of
//     curl/ftp/git over HTTP, and of npm (auth tokens).
//   - .aws/credentials, */.aws/credentials: the AWS CLI's keys, whose last
//     element alone ("credentials") is too common a name to deny.
//   - .git/config, */.git/config: a repository's configuration, which may
//     hold credentials in remote URLs (https://user:token@host/...).
//
// io-harness 0.17 denies the first five only (.env, *.pem, id_rsa,
// id_ed25519, *.key), and matches them with case.
func SecretPatterns() []string {
	return []string{
		".env", ".env.*",
		"*.pem", "*.key", "*.p12", "*.pfx",
		"id_rsa", "id_dsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk",
		".git-credentials", ".netrc", ".npmrc",
		".aws/credentials", "*/.aws/credentials",
		".git/config", "*/.git/config",
	}
}

// GitPatterns returns the patterns of the builtin-git layer: the paths it
// denies to write, matched without regard to ASCII case. Together they
// cover a directory named .git at any depth, the directory itself and
// everything under it, and a .git file (the "gitdir:" pointer of a
// worktree or submodule):
//
//   - .git: the name itself, at the root and, by last element, at any depth
//     ("sub/.git").
//   - .git/*: everything under the root's .git (".git/config",
//     ".git/hooks/pre-commit").
//   - */.git/*: everything under a .git below the root
//     ("sub/.git/hooks/pre-commit"); '*' crosses '/', so any depth.
//
// A repository's files are configuration that runs commands (hooks,
// filters, fsmonitor, pagers, editors): a file tool that could write them
// would let an agent whose exec is denied run whatever git runs next. The
// harness's own git ignores them too (package sandboxer commits through a
// git directory of its own); this layer keeps the agent from planting them
// for anyone else's git, such as the person who later opens the workspace.
// Reading is left to the policy (and .git/config to [SecretPatterns]).
func GitPatterns() []string {
	return []string{".git", ".git/*", "*/.git/*"}
}

func secretsLayer() Layer {
	pats := SecretPatterns()
	l := Layer{Name: SecretsLayer, Rules: make([]Rule, 0, 2*len(pats))}
	for _, p := range pats {
		l.Rules = append(l.Rules, Rule{Act: Read, Effect: Deny, Pattern: p}, Rule{Act: Write, Effect: Deny, Pattern: p})
	}
	return l
}

func gitLayer() Layer {
	pats := GitPatterns()
	l := Layer{Name: GitLayer, Rules: make([]Rule, 0, len(pats))}
	for _, p := range pats {
		l.Rules = append(l.Rules, Rule{Act: Write, Effect: Deny, Pattern: p})
	}
	return l
}

// builtinLayers are the layers [Default] and [FromProtocol] put first, in
// this order.
func builtinLayers() []Layer { return []Layer{secretsLayer(), gitLayer()} }

// isBuiltin reports whether l is exactly one of the built-in layers. Only
// those match without regard to case: a layer a user writes, even one
// named "builtin-secrets", keeps case-sensitive matching, and a built-in
// layer stored by an older version (other rules) matches as it did then.
// Folding is sound for these layers because they hold only denies, whose
// patterns are lower case: it can only refuse more.
func isBuiltin(l Layer) bool {
	for _, b := range builtinLayers() {
		if sameLayer(l, b) {
			return true
		}
	}
	return false
}

// Policy is a compiled permission policy: named layers of rules in stacking
// order, plus a default effect per act. A Policy is immutable once built;
// every method that seems to change one returns a new Policy. It is safe for
// concurrent use.
//
// A nil *Policy denies every act: methods called on nil behave as a policy
// with no layers whose defaults are all Deny.
type Policy struct {
	layers   []Layer
	defaults [numActs]Effect
	// rules holds every rule by act and effect, in stacking order (layer by
	// layer, rule by rule), so an evaluation pass for one act and one effect
	// walks exactly the rules io-harness would have tested, in its order.
	rules [numActs][Deny + 1][]compiled
}

// compiled is a rule ready for matching, with its attribution.
type compiled struct {
	match string // the pattern as matched (normalised for net; lower-cased when fold)
	rule  string // the pattern as written, reported in verdicts
	layer string
	// fold says the target is matched lower-cased: the rules of the
	// built-in layers (see isBuiltin).
	fold bool
}

// denyAll stands in for a nil *Policy. It is never modified.
var denyAll = build(Defaults{Read: Deny, Write: Deny, Exec: Deny, Net: Deny}, nil)

func (p *Policy) orDenyAll() *Policy {
	if p == nil {
		return denyAll
	}
	return p
}

// New returns a policy of the given layers, in stacking order, and
// defaults; a zero field of d takes the built-in default for its act (see
// [Defaults]). New adds no layer of its own: in particular not the
// builtin-secrets and builtin-git layers, which [Default] and
// [FromProtocol] include.
//
// The rules are copied and normalised, failing closed: a rule whose Effect
// is not Allow, Ask or Deny (the zero Effect included) becomes a Deny; a
// rule whose Act is not one of the four, or whose Pattern is empty, governs
// nothing and is dropped (an empty target is refused before any rule is
// tried); an empty layer name becomes "policy". New never fails.
func New(d Defaults, layers ...Layer) *Policy {
	return build(d, layers)
}

// Default returns the policy a contract gets when it brings none: the
// builtin-secrets layer, denying read and write of the files of
// [SecretPatterns] at any depth, the builtin-git layer, denying write of
// .git and everything under it at any depth ([GitPatterns]), and the
// defaults read Allow, write Ask, exec Ask, net Deny.
//
// io-harness 0.17's default also carries a "builtin-exec" layer allowing the
// programs rustc and <test-binary>, so that its Rust verification gate works
// out of the box. That layer is Rust-specific and is deliberately left out
// here: a verification command is an exec like any other and runs only where
// the contract's policy allows it.
func Default() *Policy {
	return build(Defaults{}, builtinLayers())
}

// Permissive returns a policy that enforces nothing: no layers, every
// default Allow. It is for embedders that opt out of the boundary; a contract
// never gets it (see [FromProtocol]).
func Permissive() *Policy {
	return build(Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Allow}, nil)
}

// build copies, normalises and compiles; see New for the normalisation.
func build(d Defaults, layers []Layer) *Policy {
	p := &Policy{defaults: d.table(), layers: make([]Layer, 0, len(layers))}
	for _, l := range layers {
		nl := Layer{Name: l.Name, Rules: make([]Rule, 0, len(l.Rules))}
		if nl.Name == "" {
			nl.Name = unnamedLayer
		}
		for _, r := range l.Rules {
			if r, ok := normalise(r); ok {
				nl.Rules = append(nl.Rules, r)
			}
		}
		fold := isBuiltin(nl)
		for _, r := range nl.Rules {
			m := r.Pattern
			switch {
			case r.Act == Net:
				m = netPattern(m)
			case fold:
				m = lowerASCII(m)
			}
			p.rules[r.Act][r.Effect] = append(p.rules[r.Act][r.Effect], compiled{match: m, rule: r.Pattern, layer: nl.Name, fold: fold})
		}
		p.layers = append(p.layers, nl)
	}
	return p
}

// normalise returns r as a policy holds it, failing closed: an unknown
// effect becomes Deny. ok is false for a rule that governs nothing: an
// unknown act or an empty pattern.
func normalise(r Rule) (_ Rule, ok bool) {
	if !r.Act.valid() || r.Pattern == "" {
		return Rule{}, false
	}
	if !r.Effect.valid() {
		r.Effect = Deny
	}
	return r, true
}

// Layers returns a copy of the policy's layers in stacking order, as
// normalised when the policy was built.
func (p *Policy) Layers() []Layer {
	p = p.orDenyAll()
	out := make([]Layer, len(p.layers))
	for i, l := range p.layers {
		out[i] = Layer{Name: l.Name, Rules: slices.Clone(l.Rules)}
	}
	return out
}

// Defaults returns the policy's default effect per act, every field set.
func (p *Policy) Defaults() Defaults {
	return defaultsOf(p.orDenyAll().defaults)
}

// IsPermissive reports whether the policy enforces nothing: no rules in any
// layer and every default Allow, as [Permissive] returns.
func (p *Policy) IsPermissive() bool {
	p = p.orDenyAll()
	for _, l := range p.layers {
		if len(l.Rules) > 0 {
			return false
		}
	}
	for a := Read; a <= Net; a++ {
		if p.defaults[a] != Allow {
			return false
		}
	}
	return true
}

// WithLayer returns a new policy: p with a layer of the given name and rules
// stacked on top (evaluated after p's layers; since every deny in any layer
// is tried before any allow, the new layer can add allows but never re-allow
// what p denies). The defaults are p's. Rules are normalised as by [New].
func (p *Policy) WithLayer(name string, rules ...Rule) *Policy {
	p = p.orDenyAll()
	layers := append(slices.Clip(p.layers), Layer{Name: name, Rules: rules})
	return build(defaultsOf(p.defaults), layers)
}

// Remember returns a new policy: p with rules an approver asked to remember
// for the rest of the run, in a top layer named "remembered". If p's top
// layer already is that layer, the rules are appended to it (rules it already
// holds are not repeated); otherwise the layer is added. A remembered allow
// is what a person approved when asked, so it is consulted before the ask
// rules: an ask rule that matches a remembered target asks no more. Like any
// layer merged on top, remembered rules cannot override a deny. With no
// rules, Remember returns p.
func (p *Policy) Remember(rules ...Rule) *Policy {
	p = p.orDenyAll()
	if len(rules) == 0 {
		return p
	}
	layers := slices.Clone(p.layers)
	var top []Rule
	if n := len(layers); n > 0 && layers[n-1].Name == RememberedLayer {
		top = slices.Clone(layers[n-1].Rules)
		layers = layers[:n-1]
	}
	for _, r := range rules {
		if r, ok := normalise(r); ok && !slices.Contains(top, r) {
			top = append(top, r)
		}
	}
	layers = append(layers, Layer{Name: RememberedLayer, Rules: top})
	return build(defaultsOf(p.defaults), layers)
}

// Merge stacks b on a, as peers: a's layers, then b's, and each default the
// stricter of the two. A layer of b identical to one already present (same
// name, same rules in the same order) is not repeated, which changes no
// verdict. The merge can add allows (b's allow rules stand) but cannot
// re-allow a deny or loosen a default. A nil argument is the deny-all
// policy.
func Merge(a, b *Policy) *Policy {
	a, b = a.orDenyAll(), b.orDenyAll()
	layers := slices.Clone(a.layers)
	for _, l := range b.layers {
		layers = appendLayer(layers, l)
	}
	return build(stricterDefaults(a, b), layers)
}

// Contain derives a child's effective policy from its parent's: the
// parent's layers, then the child's rules that are not allows (each child
// layer keeps its name; a layer left with no rules is dropped, and one
// identical to a layer already present is not repeated), and each default
// the stricter of the two. The child can narrow but never widen: an allow in
// the contained policy is an allow in the parent, so by induction no
// descendant at any depth holds an allow its root lacked. A nil argument is
// the deny-all policy.
//
// As in io-harness, a child's ask rule is kept, and it is tried before the
// defaults: where the parent has no rule for a target and its default is
// deny, a child's matching ask rule turns that refusal into a question for
// the approver.
func Contain(parent, child *Policy) *Policy {
	parent, child = parent.orDenyAll(), child.orDenyAll()
	layers := slices.Clone(parent.layers)
	for _, l := range child.layers {
		kept := Layer{Name: l.Name}
		for _, r := range l.Rules {
			if r.Effect != Allow {
				kept.Rules = append(kept.Rules, r)
			}
		}
		if len(kept.Rules) > 0 {
			layers = appendLayer(layers, kept)
		}
	}
	return build(stricterDefaults(parent, child), layers)
}

func stricterDefaults(a, b *Policy) Defaults {
	var t [numActs]Effect
	for act := Read; act <= Net; act++ {
		t[act] = stricter(a.defaults[act], b.defaults[act])
	}
	return defaultsOf(t)
}

// appendLayer appends l unless an identical layer is already present. An
// identical layer further down the stack can never decide a verdict: its
// twin above is tried first for every effect.
func appendLayer(layers []Layer, l Layer) []Layer {
	for _, have := range layers {
		if sameLayer(have, l) {
			return layers
		}
	}
	return append(layers, l)
}

func sameLayer(a, b Layer) bool {
	return a.Name == b.Name && slices.Equal(a.Rules, b.Rules)
}

// lowerASCII lower-cases ASCII letters; it returns s itself, without
// allocating, when there is nothing to change.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
