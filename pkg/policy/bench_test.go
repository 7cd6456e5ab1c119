package policy

import (
	"fmt"
	"testing"
)

// bench100 is a 100-rule, 5-layer policy shaped like a real one: each layer
// has 6 read, 6 write, 6 exec and 2 net rules, mixing effects, basename
// globs, directory globs and command prefixes.
func bench100() *Policy {
	var layers []Layer
	for i := range 5 {
		l := Layer{Name: fmt.Sprintf("layer-%d", i)}
		add := func(act Act, e Effect, format string) {
			l.Rules = append(l.Rules, Rule{Act: act, Effect: e, Pattern: fmt.Sprintf(format, i)})
		}
		add(Read, Deny, "private%d/*")
		add(Read, Deny, "*.secret%d")
		add(Read, Ask, "data%d/*.csv")
		add(Read, Allow, "src%d/*")
		add(Read, Allow, "docs%d/*.md")
		add(Read, Allow, "pkg/*/testdata%d/*")
		add(Write, Deny, "vendor%d/*")
		add(Write, Deny, "*.lock%d")
		add(Write, Ask, "migrations%d/*")
		add(Write, Allow, "src/*/gen%d/*")
		add(Write, Allow, "docs%d/*")
		add(Write, Allow, "internal%d/*.go")
		add(Exec, Deny, "npm publish%d*")
		add(Exec, Deny, "curl%d")
		add(Exec, Ask, "git push%d*")
		add(Exec, Allow, "go%d *")
		add(Exec, Allow, "make%d*")
		add(Exec, Allow, "npm run test%d*")
		add(Net, Deny, "*.internal%d")
		add(Net, Allow, "api%d.example.com")
		layers = append(layers, l)
	}
	return New(Defaults{}, layers...)
}

// benchTargets are realistic targets, most of which match nothing and so
// walk every rule of their act in all three passes before the default.
var benchTargets = []struct {
	act    Act
	target string
}{
	{Read, "src/github.com/ioharness/harness/pkg/policy/check.go"},
	{Read, "docs/guide/getting-started.md"},
	{Read, "pkg/coordinator/testdata3/run.json"},
	{Write, "pkg/policy/check.go"},
	{Write, "internal2/glob/glob.go"},
	{Exec, "go test -race ./pkg/policy/..."},
	{Exec, "npm run build"},
	{Exec, "git status --porcelain"},
}

func BenchmarkCheck100Rules5Layers(b *testing.B) {
	p := bench100()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := benchTargets[i%len(benchTargets)]
		p.Check(q.act, q.target)
		i++
	}
}

func BenchmarkCheckExec(b *testing.B) {
	p := bench100()
	argv := []string{"/usr/local/go/bin/go", "test", "-race", "./pkg/policy/..."}
	b.ReportAllocs()
	for b.Loop() {
		p.CheckExec(argv)
	}
}
