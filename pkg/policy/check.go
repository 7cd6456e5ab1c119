package policy

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/ioharness/harness/internal/glob"
)

// Rules of the built-in refusals. A verdict carrying one of these has
// Effect Deny and no Layer: the target was refused before any rule was
// tried, whatever the policy says.
const (
	// RuleOutsideWorkspace refuses a read or write whose path is absolute,
	// or climbs out of the workspace with "..", once cleaned.
	RuleOutsideWorkspace = "<outside the workspace>"
	// RuleEmptyTarget refuses an act that names nothing: an empty path, an
	// empty command or program, an empty host.
	RuleEmptyTarget = "<empty target>"
	// RuleUnknownAct refuses a check for an Act that is not one of the four,
	// or a path check for an act that does not take a path.
	RuleUnknownAct = "<unknown act>"
)

// Verdict is the answer to one check: the effect, and what decided it.
type Verdict struct {
	// Effect is what to do. A zero Verdict has no effect and allows nothing.
	Effect Effect
	// Rule is the pattern of the deciding rule, as written; "" when the
	// act's default decided. It may also be one of the built-in refusals
	// (RuleOutsideWorkspace, RuleEmptyTarget, RuleUnknownAct), with Layer "".
	Rule string
	// Layer is the name of the deciding rule's layer; "" for the default
	// and for a built-in refusal.
	Layer string
	// Act is the act that was checked.
	Act Act
	// Target is the target as the caller gave it: the path, the command
	// (argv joined with spaces) or the host:port. What was matched may be a
	// normalised form of it; see the package documentation.
	Target string
}

// ByDefault reports whether the act's default decided the verdict: no rule
// matched and no built-in refusal applied.
func (v Verdict) ByDefault() bool { return v.Rule == "" }

// String describes the verdict on one line for logs and test failures, such
// as `deny write "secrets/k" by rule "secrets/*" in layer "base"` or
// `ask exec "make" by the default`.
func (v Verdict) String() string {
	if v.Rule == "" {
		return fmt.Sprintf("%s %s %q by the default", v.Effect, v.Act, v.Target)
	}
	return fmt.Sprintf("%s %s %q by %s", v.Effect, v.Act, v.Target, v.DecidedBy())
}

// DecidedBy names what decided the verdict, for a message that says why an
// act was refused: `rule "secrets/*" in layer "base"`, `built-in rule
// <outside the workspace>`, or `the default for write`. It never names an
// empty rule or an empty layer: a verdict without a rule was decided by the
// default, and one whose rule has no layer (a built-in refusal, or a
// verdict put together by hand) is named without one.
func (v Verdict) DecidedBy() string {
	switch {
	case v.Rule == "":
		return "the default for " + v.Act.String()
	case isBuiltinRule(v.Rule):
		return "built-in rule " + v.Rule
	case v.Layer == "":
		return fmt.Sprintf("rule %q", v.Rule)
	default:
		return fmt.Sprintf("rule %q in layer %q", v.Rule, v.Layer)
	}
}

func isBuiltinRule(rule string) bool {
	return rule == RuleOutsideWorkspace || rule == RuleEmptyTarget || rule == RuleUnknownAct
}

// Refusal renders a verdict that stops an act as the observation the model
// reads: what was refused, what refused it (the rule and its layer, or the
// act's default), and what to do instead. It is meant for Deny verdicts, and
// for Ask verdicts where no approval can be had (an Ask the approver
// declines is reported with the approver's reason instead). For an Allow
// verdict, which refuses nothing, it returns "".
//
// The target and the rule are quoted, so a name holding a newline or other
// control characters stays on one line and reads as data.
func (v Verdict) Refusal() string {
	if v.Effect == Allow {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s refused] %q: ", v.Act, v.Target)
	switch {
	case v.Rule == RuleOutsideWorkspace:
		b.WriteString("the path is outside the workspace. Use a path relative to the workspace root, without \"..\" climbing out of it.")
		return b.String()
	case v.Rule == RuleEmptyTarget:
		b.WriteString("nothing was named. Name the path, command or host you mean.")
		return b.String()
	case v.Rule == RuleUnknownAct:
		b.WriteString("this kind of action is not one the policy knows, so it is refused.")
		return b.String()
	case v.Rule == "" && v.Effect == Deny:
		fmt.Fprintf(&b, "no rule allows it and the default for %s is deny.", v.Act)
	case v.Rule == "":
		fmt.Fprintf(&b, "no rule allows it and the default for %s is to ask a person, and no approval was given.", v.Act)
	case v.Effect == Deny:
		fmt.Fprintf(&b, "denied by %s.", v.DecidedBy())
	default:
		fmt.Fprintf(&b, "%s requires a person's approval, and none was given.", v.DecidedBy())
	}
	var advice string
	switch v.Act {
	case Read:
		advice = "work from files you are allowed to read."
	case Write:
		advice = "change a different file, or leave this one as it is and say in your final answer what it needs."
	case Exec:
		advice = "use a different command, or say in your final answer which command you needed and why."
	case Net:
		advice = "work without this host, or say in your final answer why you need it."
	}
	switch {
	case v.Effect == Deny && advice == "":
		b.WriteString(" The policy forbids this, so asking again will not help.")
	case v.Effect == Deny:
		b.WriteString(" The policy forbids this, so asking again will not help; ")
		b.WriteString(advice)
	case advice != "":
		b.WriteString(" ")
		b.WriteString(strings.ToUpper(advice[:1]))
		b.WriteString(advice[1:])
	}
	return b.String()
}

// Check evaluates act against target, normalising the target as the act
// requires: for Read and Write it is [Policy.CheckPath]; for Exec the target
// is a command line whose program is the text before the first space,
// checked as [Policy.CheckExec] checks argv; for Net it is a host or
// host:port, checked as [Policy.CheckNet] does. An act that is not one of
// the four is refused (RuleUnknownAct).
func (p *Policy) Check(act Act, target string) Verdict {
	p = p.orDenyAll()
	switch act {
	case Read, Write:
		return p.CheckPath(act, target)
	case Exec:
		program := target
		if i := strings.IndexByte(target, ' '); i >= 0 {
			program = target[:i]
		}
		return p.checkCommand(target, program, target)
	case Net:
		return p.checkNet(target)
	}
	return builtin(act, target, RuleUnknownAct)
}

// CheckPath evaluates a read or a write of relPath, a slash-separated path
// relative to the workspace root. The path is first cleaned lexically
// ("a/./b", "a//b" and "a/x/../b" all become "a/b"); an empty path is
// refused (RuleEmptyTarget), and so is one that is absolute or climbs out
// of the workspace once cleaned (RuleOutsideWorkspace). Each rule is then
// tried against the cleaned path whole and against its last element, so
// ".env" covers "config/.env" and "vendor/*" covers "vendor/a/b.go".
// Cleaning is lexical: symbolic links are the sandboxer's to resolve. An act
// other than Read or Write is refused (RuleUnknownAct).
func (p *Policy) CheckPath(act Act, relPath string) Verdict {
	p = p.orDenyAll()
	if act != Read && act != Write {
		return builtin(act, relPath, RuleUnknownAct)
	}
	if relPath == "" {
		return builtin(act, relPath, RuleEmptyTarget)
	}
	clean := path.Clean(relPath)
	if clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "/") {
		return builtin(act, relPath, RuleOutsideWorkspace)
	}
	base := clean
	if i := strings.LastIndexByte(clean, '/'); i >= 0 {
		base = clean[i+1:]
	}
	if base == clean {
		base = ""
	}
	return p.eval(act, relPath, clean, base)
}

// CheckExec evaluates running argv: program first, no shell. The verdict
// is the strictest of the program alone and the whole argv joined with
// spaces, so a rule naming a program ("curl") and a rule naming a command
// line ("cargo publish*") both bind; an allow must cover both forms, which
// "npm*" does and "npm *" does not. A program given by path ("/usr/bin/npm",
// "./npm") is checked both as given and by its last element, in the program
// and in the argv, so deny "npm publish*" catches "/usr/bin/npm publish".
// On a tie the first form checked decides: program, its last element, argv,
// argv with the last element. An empty argv or program is refused
// (RuleEmptyTarget). What argv patterns cannot express is in the package
// documentation.
func (p *Policy) CheckExec(argv []string) Verdict {
	p = p.orDenyAll()
	if len(argv) == 0 {
		return builtin(Exec, "", RuleEmptyTarget)
	}
	line := argv[0]
	if len(argv) > 1 {
		line = strings.Join(argv, " ")
	}
	return p.checkCommand(line, argv[0], line)
}

// checkCommand checks the forms of a command whose line starts with program.
func (p *Policy) checkCommand(target, program, line string) Verdict {
	if program == "" {
		return builtin(Exec, target, RuleEmptyTarget)
	}
	base := program
	if i := strings.LastIndexByte(program, '/'); i >= 0 {
		base = program[i+1:]
	}
	byName := base != program && base != ""
	// The forms in order; a deny ends the search, since nothing is stricter
	// and on a tie the earlier form decides.
	v := p.eval(Exec, target, program, "")
	if byName && v.Effect != Deny {
		v = strictest(v, p.eval(Exec, target, base, ""))
	}
	if line != program && v.Effect != Deny {
		v = strictest(v, p.eval(Exec, target, line, ""))
		if byName && v.Effect != Deny {
			// line begins with program, which ends with base.
			v = strictest(v, p.eval(Exec, target, line[len(program)-len(base):], ""))
		}
	}
	return v
}

// strictest returns b if it is stricter than a, else a.
func strictest(a, b Verdict) Verdict {
	if b.Effect > a.Effect {
		return b
	}
	return a
}

// CheckNet evaluates a connection to host on port ("" for no port). The
// target is host:port (an IPv6 host in brackets), and each rule is tried
// against it and, when the port is all digits, against the bare host: a
// rule naming the host covers every port, one naming host:port only that
// port. Host names are compared without regard to ASCII case, a trailing
// dot is ignored ("example.com." is "example.com"), leading zeros of the
// port are dropped, and an IP address compares in its canonical form, so
// host "::1", "[::1]" and "0:0::1" are the same host, which a rule naming
// "::1" or "[::1]" covers on every port. An empty host is refused
// (RuleEmptyTarget).
func (p *Policy) CheckNet(host, port string) Verdict {
	p = p.orDenyAll()
	target := host
	if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
		target = "[" + host + "]"
	}
	if port != "" {
		target += ":" + port
	}
	return p.checkNet(target)
}

// checkNet normalises a host or host:port and evaluates its forms.
func (p *Policy) checkNet(target string) Verdict {
	whole, bare, ok := netForms(target)
	if !ok {
		return builtin(Net, target, RuleEmptyTarget)
	}
	return p.eval(Net, target, whole, bare)
}

// netForms returns the forms a net target is matched in: whole, the
// normalised target, and bare, the host alone when whole has a port, else
// "". ok is false when the target names no host. A target that does not
// parse as host or host:port is matched whole, as io-harness does.
//
// Normalised means: lower case; no trailing dot on the host; no leading
// zeros on the port; an IP address in its canonical form (netip), an
// IPv4-mapped IPv6 address as the IPv4 address it reaches; and an IPv6
// address bracketed only when a port follows. So "[::1]", "::1" and
// "0:0:0:0:0:0:0:1" all have the whole form "::1", and "[::1]:8080" has the
// bare form "::1": a rule naming the address, with or without brackets
// (net rule patterns are normalised the same way, see netPattern), covers
// every port.
func netForms(target string) (whole, bare string, ok bool) {
	t := lowerASCII(target)
	host, port := t, ""
	bracketed := strings.HasPrefix(t, "[")
	if bracketed {
		end := strings.IndexByte(t, ']')
		if end < 0 {
			return t, "", true
		}
		switch rest := t[end+1:]; {
		case rest == "":
		case rest[0] == ':' && len(rest) > 1 && allDigits(rest[1:]):
			port = rest[1:]
		default:
			return t, "", true
		}
		host = t[1:end]
	} else if i := strings.IndexByte(t, ':'); i >= 0 && strings.IndexByte(t[i+1:], ':') < 0 {
		// One colon: host:port when the port is all digits. Two or more
		// colons without brackets is an IPv6 address, which has no port.
		if p := t[i+1:]; p != "" && allDigits(p) {
			host, port = t[:i], p
		}
	}
	// changed says whole differs from t, so that the common target, already
	// normal, is matched without allocating.
	changed := false
	if h := strings.TrimSuffix(host, "."); len(h) < len(host) {
		host, changed = h, true
	}
	if host == "" {
		return "", "", false
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if c := a.Unmap().String(); c != host {
			host, changed = c, true
		}
	}
	if port == "" {
		return host, "", true
	}
	if q := strings.TrimLeft(port, "0"); len(q) < len(port) {
		if q == "" {
			q = "0"
		}
		port, changed = q, true
	}
	v6 := strings.IndexByte(host, ':') >= 0
	switch {
	case !changed && v6 == bracketed:
		return t, host, true
	case v6:
		return "[" + host + "]:" + port, host, true
	}
	return host + ":" + port, host, true
}

// netPattern returns a net rule's pattern as it is matched, normalised as
// targets are (see netForms): a literal pattern ("[::1]", "Example.COM.",
// "[0:0::1]:0443") becomes the whole form of the same target ("::1",
// "example.com", "[::1]:443"), so it matches whatever spelling a target
// uses; a glob is only lower-cased and, when it is an IPv6 literal in
// brackets without a port ("[fe80::*]"), unbracketed to match the bare host.
func netPattern(pattern string) string {
	m := lowerASCII(pattern)
	if strings.ContainsAny(m, "*?") {
		if len(m) > 2 && m[0] == '[' && m[len(m)-1] == ']' && !strings.ContainsAny(m[1:len(m)-1], "[]") {
			return m[1 : len(m)-1]
		}
		return m
	}
	if whole, _, ok := netForms(m); ok {
		return whole
	}
	return m
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// eval is io-harness's explain: for each effect from strictest to most
// lenient, the first rule of the act with that effect matching either form
// (f2 may be "", meaning no second form) decides; else the act's default.
// One exception: an ask is answered by a matching allow of the remembered
// layer, which a person gave when asked (see [Policy.Remember]); a deny
// is never.
func (p *Policy) eval(act Act, target, f1, f2 string) Verdict {
	f := forms{f1: f1, f2: f2}
	for _, e := range [...]Effect{Deny, Ask, Allow} {
		rules := p.rules[act][e]
		for i := range rules {
			r := &rules[i]
			if f.match(r) {
				if e == Ask {
					if v, ok := p.remembered(act, target, &f); ok {
						return v
					}
				}
				return Verdict{Effect: e, Rule: r.rule, Layer: r.layer, Act: act, Target: target}
			}
		}
	}
	return Verdict{Effect: p.defaults[act], Act: act, Target: target}
}

// remembered returns the verdict of the first remembered allow matching
// either form, if one does.
func (p *Policy) remembered(act Act, target string, f *forms) (Verdict, bool) {
	rules := p.rules[act][Allow]
	for i := range rules {
		r := &rules[i]
		if r.layer == RememberedLayer && f.match(r) {
			return Verdict{Effect: Allow, Rule: r.rule, Layer: r.layer, Act: act, Target: target}, true
		}
	}
	return Verdict{}, false
}

// forms are the forms of one target a rule is tried against: f1, and f2
// unless it is "" (no second form). A rule that folds case (a built-in
// layer's) is tried against them lower-cased, computed once and only if
// such a rule is tried.
type forms struct {
	f1, f2  string
	l1, l2  string
	lowered bool
}

func (f *forms) match(r *compiled) bool {
	a, b := f.f1, f.f2
	if r.fold {
		if !f.lowered {
			f.l1, f.l2, f.lowered = lowerASCII(f.f1), lowerASCII(f.f2), true
		}
		a, b = f.l1, f.l2
	}
	return glob.Match(r.match, a) || b != "" && glob.Match(r.match, b)
}

func builtin(act Act, target, rule string) Verdict {
	return Verdict{Effect: Deny, Rule: rule, Act: act, Target: target}
}
