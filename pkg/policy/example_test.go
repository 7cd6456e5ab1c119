package policy_test

import (
	"fmt"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

func ExampleFromProtocol() {
	// The policy as a contract carries it.
	p, err := policy.FromProtocol(&protocol.Policy{
		Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
			{Act: "read", Effect: "allow", Pattern: "*"},
			{Act: "write", Effect: "allow", Pattern: "src/*"},
			{Act: "read", Effect: "deny", Pattern: "secrets/*"},
		}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.CheckPath(policy.Write, "src/main.go"))
	fmt.Println(p.CheckPath(policy.Read, "secrets/db.txt"))
	// The built-in layers come first, whatever the contract says: secrets,
	// in any case, and the repository's own files.
	fmt.Println(p.CheckPath(policy.Read, "config/.env"))
	fmt.Println(p.CheckPath(policy.Read, "certs/Server.PEM"))
	fmt.Println(p.CheckPath(policy.Write, ".git/hooks/pre-commit"))
	fmt.Println(p.CheckPath(policy.Write, "README.md"))
	// Output:
	// allow write "src/main.go" by rule "src/*" in layer "app"
	// deny read "secrets/db.txt" by rule "secrets/*" in layer "app"
	// deny read "config/.env" by rule ".env" in layer "builtin-secrets"
	// deny read "certs/Server.PEM" by rule "*.pem" in layer "builtin-secrets"
	// deny write ".git/hooks/pre-commit" by rule ".git/*" in layer "builtin-git"
	// ask write "README.md" by the default
}

func ExampleRestore() {
	stored := policy.Default().WithLayer("app", policy.Rule{Act: policy.Exec, Effect: policy.Allow, Pattern: "go*"}).Protocol()
	p, err := policy.Restore(stored)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.CheckExec([]string{"go", "test", "./..."}))
	// Output:
	// allow exec "go test ./..." by rule "go*" in layer "app"
}

func ExamplePolicy_CheckExec() {
	p := policy.Default().WithLayer("app",
		policy.Rule{Act: policy.Exec, Effect: policy.Allow, Pattern: "npm*"},
		policy.Rule{Act: policy.Exec, Effect: policy.Deny, Pattern: "npm publish*"},
	)
	fmt.Println(p.CheckExec([]string{"npm", "test"}))
	fmt.Println(p.CheckExec([]string{"/usr/bin/npm", "publish"}))
	fmt.Println(p.CheckExec([]string{"make"}))
	// Output:
	// allow exec "npm test" by rule "npm*" in layer "app"
	// deny exec "/usr/bin/npm publish" by rule "npm publish*" in layer "app"
	// ask exec "make" by the default
}

func ExamplePolicy_CheckNet() {
	p := policy.Default().WithLayer("egress",
		policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: "api.example.com"},
		policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: "registry.example.com:443"},
	)
	fmt.Println(p.CheckNet("api.example.com", "8080").Effect)
	fmt.Println(p.CheckNet("registry.example.com", "443").Effect)
	fmt.Println(p.CheckNet("registry.example.com", "80").Effect)
	// Output:
	// allow
	// allow
	// deny
}

func ExamplePolicy_Check() {
	// Check takes an (act, target) pair as stored, for instance with a
	// pending approval, and normalises the target as the act requires.
	p := policy.Default()
	fmt.Println(p.Check(policy.Read, "./config/../config/.env").Effect)
	fmt.Println(p.Check(policy.Exec, "go vet ./...").Effect)
	// Output:
	// deny
	// ask
}

func ExampleVerdict_Refusal() {
	p := policy.Default().WithLayer("base", policy.Rule{Act: policy.Write, Effect: policy.Deny, Pattern: "vendor/*"})
	fmt.Println(p.CheckPath(policy.Write, "vendor/lib/a.go").Refusal())
	// Output:
	// [write refused] "vendor/lib/a.go": denied by rule "vendor/*" in layer "base". The policy forbids this, so asking again will not help; change a different file, or leave this one as it is and say in your final answer what it needs.
}

func ExampleMerge() {
	base := policy.Default().WithLayer("base", policy.Rule{Act: policy.Write, Effect: policy.Deny, Pattern: "secrets/*"})
	overlay := policy.New(policy.Defaults{}, policy.Layer{Name: "app", Rules: []policy.Rule{
		{Act: policy.Write, Effect: policy.Allow, Pattern: "*"},
	}})
	m := policy.Merge(base, overlay)
	fmt.Println(m.CheckPath(policy.Write, "docs/a.md"))
	fmt.Println(m.CheckPath(policy.Write, "secrets/k"))
	// Output:
	// allow write "docs/a.md" by rule "*" in layer "app"
	// deny write "secrets/k" by rule "secrets/*" in layer "base"
}

func ExampleContain() {
	parent := policy.Default().WithLayer("parent", policy.Rule{Act: policy.Write, Effect: policy.Allow, Pattern: "src/*"})
	child := policy.Permissive().WithLayer("child",
		policy.Rule{Act: policy.Write, Effect: policy.Allow, Pattern: "docs/*"},         // dropped
		policy.Rule{Act: policy.Write, Effect: policy.Deny, Pattern: "src/generated/*"}, // kept
	)
	c := policy.Contain(parent, child)
	fmt.Println(c.CheckPath(policy.Write, "docs/a.md"))
	fmt.Println(c.CheckPath(policy.Write, "src/generated/x.go"))
	fmt.Println(c.CheckPath(policy.Write, "src/a.go"))
	// Output:
	// ask write "docs/a.md" by the default
	// deny write "src/generated/x.go" by rule "src/generated/*" in layer "child"
	// allow write "src/a.go" by rule "src/*" in layer "parent"
}

func ExamplePolicy_Remember() {
	p := policy.Default()
	// An approver approved a write and asked to remember the rule.
	p = p.Remember(policy.Rule{Act: policy.Write, Effect: policy.Allow, Pattern: "docs/*"})
	fmt.Println(p.CheckPath(policy.Write, "docs/a.md"))
	// A remembered allow cannot override a deny.
	p = p.Remember(policy.Rule{Act: policy.Write, Effect: policy.Allow, Pattern: "*.pem"})
	fmt.Println(p.CheckPath(policy.Write, "certs/a.pem"))
	// Output:
	// allow write "docs/a.md" by rule "docs/*" in layer "remembered"
	// deny write "certs/a.pem" by rule "*.pem" in layer "builtin-secrets"
}
