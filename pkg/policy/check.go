package policy

import (
	"fmt"
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
	return fmt.Sprintf("%s %s %q by %s", v.Effect, v.Act, v.Target, v.attribution())
}

func (v Verdict) attribution() string {
	switch {
	case v.Rule == "":
		return "the default"
	case v.Layer == "":
		return "built-in rule " + v.Rule
	default:
		return fmt.Sprintf("rule %q in layer %q", v.Rule, v.Layer)
	}
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
		fmt.Fprintf(&b, "denied by rule %q in layer %q.", v.Rule, v.Layer)
	default:
		fmt.Fprintf(&b, "rule %q in layer %q requires a person's approval, and none was given.", v.Rule, v.Layer)
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
// dot is ignored ("example.com." is "example.com") and leading zeros of the
// port are dropped. An empty host is refused (RuleEmptyTarget).
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
// normalised target, and bare, the host alone when whole has a port (or the
// address inside the brackets of an IPv6 literal), else "". ok is false when
// the target names no host. A target that does not parse as host or
// host:port is matched whole, as io-harness does.
func netForms(target string) (whole, bare string, ok bool) {
	t := lowerASCII(target)
	host, port := t, ""
	if strings.HasPrefix(t, "[") {
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
		host, bare = t[:end+1], t[1:end]
		if bare == "" {
			return "", "", false
		}
	} else if i := strings.IndexByte(t, ':'); i >= 0 && strings.IndexByte(t[i+1:], ':') < 0 {
		// One colon: host:port when the port is all digits. Two or more
		// colons without brackets is an IPv6 address, which has no port.
		if p := t[i+1:]; p != "" && allDigits(p) {
			host, port = t[:i], p
		}
	}
	changed := false
	if h := strings.TrimSuffix(host, "."); len(h) < len(host) {
		host, changed = h, true
	}
	if host == "" {
		return "", "", false
	}
	if port == "" {
		return host, bare, true
	}
	if q := strings.TrimLeft(port, "0"); len(q) < len(port) {
		if q == "" {
			q = "0"
		}
		port, changed = q, true
	}
	whole = t
	if changed {
		whole = host + ":" + port
	}
	if bare == "" {
		bare = host
	}
	return whole, bare, true
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
func (p *Policy) eval(act Act, target, f1, f2 string) Verdict {
	for _, e := range [...]Effect{Deny, Ask, Allow} {
		rules := p.rules[act][e]
		for i := range rules {
			r := &rules[i]
			if glob.Match(r.match, f1) || f2 != "" && glob.Match(r.match, f2) {
				return Verdict{Effect: e, Rule: r.rule, Layer: r.layer, Act: act, Target: target}
			}
		}
	}
	return Verdict{Effect: p.defaults[act], Act: act, Target: target}
}

func builtin(act Act, target, rule string) Verdict {
	return Verdict{Effect: Deny, Rule: rule, Act: act, Target: target}
}
