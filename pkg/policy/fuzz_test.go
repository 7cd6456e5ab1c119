package policy

import (
	"strings"
	"testing"
)

// FuzzCheck checks, for random patterns and targets, that no check panics,
// that every verdict is well formed, that a deny rule "*" for an act makes
// every verdict for that act a deny, that the built-in layers give a path
// the verdict of its lower-case spelling, and that Contain never yields an
// allow the parent lacks.
func FuzzCheck(f *testing.F) {
	for _, s := range []struct {
		pattern, target string
		act             uint8
	}{
		{"*", "src/main.go", 0},
		{"secrets/*", "./secrets/../secrets/x", 1},
		{"npm publish*", "/usr/bin/npm publish", 2},
		{"api.example.com", "API.example.com.:0443", 3},
		{"?", "[::1]:80", 3},
		{"", "", 0},
		{"a*b?c", "a/x/b/yc", 1},
		{"*", "..", 0},
		{"x", "[", 3},
		{"*.pem", "é/ü.pem", 0},
		{"[::1]", "[::1]:8080", 3},
		{"::1", "[0:0::1]", 3},
		{"x", "Sub/.GIT/Hooks/pre-commit", 1},
	} {
		f.Add(s.pattern, s.target, s.act)
	}
	f.Fuzz(func(t *testing.T, pattern, target string, a uint8) {
		if len(pattern) > 64 || len(target) > 256 {
			return
		}
		act := Act(a%4) + Read
		var rules []Rule
		for x := Read; x <= Net; x++ {
			for e := Allow; e <= Deny; e++ {
				rules = append(rules, Rule{Act: x, Effect: e, Pattern: pattern})
			}
		}
		loose := New(Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Allow}, Layer{Name: "fuzz", Rules: rules})
		allowOnly := New(Defaults{}, Layer{Name: "fuzz", Rules: []Rule{{Act: act, Effect: Allow, Pattern: pattern}}})
		walled := loose.WithLayer("wall", Rule{Act: act, Effect: Deny, Pattern: "*"})

		argv := strings.Split(target, " ")
		host, port, _ := strings.Cut(target, ":")
		for _, p := range []*Policy{loose, allowOnly, walled, Default(), Permissive(), nil} {
			for _, v := range []Verdict{
				p.Check(act, target),
				p.CheckPath(act, target),
				p.CheckExec(argv),
				p.CheckNet(host, port),
			} {
				wellFormed(t, p, v)
			}
		}

		want := func(v Verdict) {
			t.Helper()
			if v.Effect != Deny {
				t.Fatalf("with deny %q for %s: %v, want deny", "*", act, v)
			}
		}
		want(walled.Check(act, target))
		switch act {
		case Read, Write:
			want(walled.CheckPath(act, target))
		case Exec:
			want(walled.CheckExec(argv))
		case Net:
			want(walled.CheckNet(host, port))
		}

		// The built-in layers ignore ASCII case: a path and its lower-case
		// spelling get the same verdict from Default.
		for _, x := range []Act{Read, Write} {
			if v, lv := Default().CheckPath(x, target), Default().CheckPath(x, lowerASCII(target)); v.Effect != lv.Effect || v.Rule != lv.Rule {
				t.Fatalf("Default: %v but %v", v, lv)
			}
		}

		// Contain: the child brings every effect for the pattern; the
		// contained policy allows only what the parent allows.
		for _, parent := range []*Policy{allowOnly, Default(), Permissive()} {
			c := Contain(parent, loose)
			if v := c.Check(act, target); v.Effect == Allow {
				if pv := parent.Check(act, target); pv.Effect != Allow {
					t.Fatalf("Contain allows %s %q (%v) where the parent says %v", act, target, v, pv)
				}
			}
		}
	})
}

// wellFormed checks the invariants every verdict holds.
func wellFormed(t *testing.T, p *Policy, v Verdict) {
	t.Helper()
	if !v.Effect.valid() {
		t.Fatalf("%v: effect %d is not an effect", v, v.Effect)
	}
	switch {
	case v.Rule == "" && v.Layer != "":
		t.Fatalf("%v: a layer without a rule", v)
	case v.Rule == "" && v.Act.valid() && v.Effect != p.orDenyAll().defaults[v.Act]:
		t.Fatalf("%v: decided by the default, but the default for %s is %v", v, v.Act, p.orDenyAll().defaults[v.Act])
	case v.Rule != "" && v.Layer == "" && v.Effect != Deny:
		t.Fatalf("%v: a built-in rule that does not deny", v)
	}
	_ = v.String()
	if r := v.Refusal(); (r == "") != (v.Effect == Allow) {
		t.Fatalf("%v: Refusal() = %q", v, r)
	}
}
