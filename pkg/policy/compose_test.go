package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// base allows the source tree and denies a secrets tree.
func base() *Policy {
	return Default().WithLayer("base",
		r(Read, Allow, "src/*"), r(Write, Allow, "src/*"),
		r(Read, Deny, "secrets/*"), r(Write, Deny, "secrets/*"))
}

func TestMergeDefaults(t *testing.T) {
	all := func(e Effect) Defaults { return Defaults{e, e, e, e} }
	tests := []struct {
		name string
		a, b Defaults
		want Defaults
	}{
		{"allow and deny give deny", all(Allow), all(Deny), all(Deny)},
		{"deny and allow give deny", all(Deny), all(Allow), all(Deny)},
		{"ask and allow give ask", all(Ask), all(Allow), all(Ask)},
		{"per act", Defaults{Allow, Deny, Ask, Allow}, Defaults{Ask, Allow, Allow, Deny}, Defaults{Ask, Deny, Ask, Deny}},
		{"unset fields are the built-ins", Defaults{}, all(Allow), Defaults{Allow, Ask, Ask, Deny}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, compose := range []struct {
				name string
				f    func(a, b *Policy) *Policy
			}{{"Merge", Merge}, {"Contain", Contain}} {
				got := compose.f(New(tt.a), New(tt.b)).Defaults()
				if got != tt.want {
					t.Errorf("%s(%+v, %+v).Defaults() = %+v, want %+v", compose.name, tt.a, tt.b, got, tt.want)
				}
			}
		})
	}
}

func TestMerge(t *testing.T) {
	merged := Merge(base(), New(Defaults{Read: Allow, Write: Allow},
		layer("app", r(Write, Allow, "secrets/*"), r(Write, Allow, "docs/*"))))

	runRows(t, []checkRow{
		{"an overlay cannot re-allow a base deny", merged, query{act: Write, target: "secrets/k.txt"}, want{Deny, "secrets/*", "base"}},
		{"an overlay allow grants what the base lacked", merged, query{act: Write, target: "docs/x.md"}, want{Allow, "docs/*", "app"}},
		{"the base rules survive", merged, query{act: Write, target: "src/a.go"}, want{Allow, "src/*", "base"}},
		{"the overlay cannot loosen the write default", merged, query{act: Write, target: "other/x"}, want{Ask, "", ""}},
		{"secrets stay denied", merged, query{act: Read, target: "deep/.env"}, want{Deny, ".env", SecretsLayer}},
	})

	names := func(p *Policy) []string {
		var out []string
		for _, l := range p.Layers() {
			out = append(out, l.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{SecretsLayer, GitLayer, "base", "app"}, names(merged)); diff != "" {
		t.Errorf("Merge layers (-want +got):\n%s", diff)
	}
	// Merging a policy with itself repeats no layer.
	if diff := cmp.Diff(base().Layers(), Merge(base(), base()).Layers()); diff != "" {
		t.Errorf("Merge(base, base) layers (-want +got):\n%s", diff)
	}
	// A nil side is the deny-all policy: its defaults win.
	if got := Merge(Permissive(), nil).Defaults(); got != (Defaults{Deny, Deny, Deny, Deny}) {
		t.Errorf("Merge(Permissive(), nil).Defaults() = %+v, want all deny", got)
	}
}

func TestContain(t *testing.T) {
	parent := Default().WithLayer("parent", r(Write, Allow, "src/*"), r(Net, Allow, "api.example.com"))
	child := Permissive().WithLayer("child",
		r(Write, Allow, "docs/*"),         // an allow: dropped
		r(Write, Deny, "src/generated/*"), // a deny: binds
		r(Net, Allow, "evil.example.com"), // an allow: dropped
		r(Read, Allow, ".env"))            // cannot reopen a secret either
	grandchild := Permissive().WithLayer("grandchild",
		r(Write, Allow, "secrets/*"),
		r(Write, Allow, "docs/*"),
		r(Write, Deny, "src/vendor/*"))
	c := Contain(parent, child)
	gc := Contain(c, grandchild)

	runRows(t, []checkRow{
		{"a child allow cannot widen a parent default", c, query{act: Write, target: "docs/x.md"}, want{Ask, "", ""}},
		{"merge, by contrast, widens", Merge(parent, child), query{act: Write, target: "docs/x.md"}, want{Allow, "docs/*", "child"}},
		{"a child deny narrows", c, query{act: Write, target: "src/generated/x.go"}, want{Deny, "src/generated/*", "child"}},
		{"the parent allow stands elsewhere", c, query{act: Write, target: "src/a.go"}, want{Allow, "src/*", "parent"}},
		{"a child net allow grants nothing", c, query{host: "evil.example.com", port: "443"}, want{Deny, "", ""}},
		{"a child cannot reopen a secret", c, query{act: Read, target: ".env"}, want{Deny, ".env", SecretsLayer}},
		{"grandchild: a root default stays", gc, query{act: Write, target: "docs/x.md"}, want{Ask, "", ""}},
		{"grandchild: an allow the root lacked is dropped", gc, query{act: Write, target: "secrets/k"}, want{Ask, "", ""}},
		{"grandchild: the child's deny holds", gc, query{act: Write, target: "src/generated/x.go"}, want{Deny, "src/generated/*", "child"}},
		{"grandchild: its own deny binds", gc, query{act: Write, target: "src/vendor/x.go"}, want{Deny, "src/vendor/*", "grandchild"}},
		{"grandchild: the root allow stands", gc, query{act: Write, target: "src/a.go"}, want{Allow, "src/*", "parent"}},
		{"grandchild: the root net allow stands", gc, query{host: "api.example.com", port: "443"}, want{Allow, "api.example.com", "parent"}},
	})

	// The child's layer keeps only its non-allow rule.
	var childLayer []Rule
	for _, l := range c.Layers() {
		if l.Name == "child" {
			childLayer = l.Rules
		}
	}
	if diff := cmp.Diff([]Rule{{Write, Deny, "src/generated/*"}}, childLayer); diff != "" {
		t.Errorf("contained child layer (-want +got):\n%s", diff)
	}
	// A child compiled from a contract brings the built-in layers again;
	// they are not repeated.
	n := map[string]int{}
	for _, l := range Contain(Default(), Default()).Layers() {
		n[l.Name]++
	}
	if n[SecretsLayer] != 1 || n[GitLayer] != 1 {
		t.Errorf("Contain(Default(), Default()) has %d secrets and %d git layers, want 1 of each", n[SecretsLayer], n[GitLayer])
	}
}

// TestContainKeepsChildAsks documents a property inherited from io-harness:
// a child's ask rule is tried before the defaults, so where the parent has no
// rule and its default is deny, the child's ask turns a refusal into a
// question for the approver. It never turns one into an allow.
func TestContainKeepsChildAsks(t *testing.T) {
	parent := Default() // net default deny
	child := Permissive().WithLayer("child", r(Net, Ask, "example.org"))
	c := Contain(parent, child)
	if v := parent.Check(Net, "example.org:443"); v.Effect != Deny {
		t.Fatalf("parent: %v, want deny", v)
	}
	if v := c.Check(Net, "example.org:443"); v.Effect != Ask || v.Layer != "child" {
		t.Errorf("contained: %v, want ask by the child's rule", v)
	}
}

func TestRemember(t *testing.T) {
	p := base()
	rem := p.Remember(r(Write, Allow, "docs/*"), r(Write, Allow, "secrets/*"), r(Exec, Allow, "make*"))

	runRows(t, []checkRow{
		{"a remembered allow grants", rem, query{act: Write, target: "docs/a.md"}, want{Allow, "docs/*", RememberedLayer}},
		{"a remembered allow cannot override a deny", rem, query{act: Write, target: "secrets/k"}, want{Deny, "secrets/*", "base"}},
		{"a remembered exec", rem, query{argv: []string{"make", "test"}}, want{Allow, "make*", RememberedLayer}},
		{"the original is unchanged", p, query{act: Write, target: "docs/a.md"}, want{Ask, "", ""}},
	})

	again := rem.Remember(r(Write, Allow, "docs/*"), r(Read, Deny, "private/*"))
	ls := again.Layers()
	top := ls[len(ls)-1]
	want := Layer{Name: RememberedLayer, Rules: []Rule{
		{Write, Allow, "docs/*"}, {Write, Allow, "secrets/*"}, {Exec, Allow, "make*"}, {Read, Deny, "private/*"},
	}}
	if diff := cmp.Diff(want, top); diff != "" {
		t.Errorf("top layer after a second Remember (-want +got):\n%s", diff)
	}
	if len(ls) != len(rem.Layers()) {
		t.Errorf("a second Remember added a layer: %d layers, want %d", len(ls), len(rem.Layers()))
	}
	if p.Remember() != p {
		t.Errorf("Remember() with no rules returned a new policy")
	}
}

func TestWithLayer(t *testing.T) {
	p := Default()
	q := p.WithLayer("", r(Exec, Allow, "go*"))
	if v := q.CheckExec([]string{"go", "vet"}); v.Effect != Allow || v.Layer != "policy" {
		t.Errorf("WithLayer with no name: %v, want allow in layer policy", v)
	}
	if v := p.CheckExec([]string{"go", "vet"}); v.Effect != Ask {
		t.Errorf("WithLayer changed its receiver: %v", v)
	}
	if got := q.Defaults(); got != p.Defaults() {
		t.Errorf("WithLayer defaults = %+v, want %+v", got, p.Defaults())
	}
}
