package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// query is one check: argv set means CheckExec, host set means CheckNet,
// otherwise Check(act, target).
type query struct {
	act        Act
	target     string
	argv       []string
	host, port string
}

func (q query) run(p *Policy) Verdict {
	switch {
	case q.argv != nil:
		return p.CheckExec(q.argv)
	case q.host != "" || q.port != "":
		return p.CheckNet(q.host, q.port)
	}
	return p.Check(q.act, q.target)
}

func (q query) String() string {
	switch {
	case q.argv != nil:
		return "CheckExec(" + strings.Join(q.argv, "|") + ")"
	case q.host != "" || q.port != "":
		return "CheckNet(" + q.host + ", " + q.port + ")"
	}
	return "Check(" + q.act.String() + ", " + q.target + ")"
}

// want is the part of a verdict a row asserts; Act and Target are checked
// separately by TestVerdictCarriesActAndTarget.
type want struct {
	Effect Effect
	Rule   string
	Layer  string
}

func got(v Verdict) want { return want{v.Effect, v.Rule, v.Layer} }

func layer(name string, rules ...Rule) Layer { return Layer{Name: name, Rules: rules} }

func r(act Act, e Effect, pattern string) Rule { return Rule{Act: act, Effect: e, Pattern: pattern} }

func runRows(t *testing.T, rows []checkRow) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.q.run(tt.p)
			if diff := cmp.Diff(tt.want, got(v)); diff != "" {
				t.Errorf("%v = %v, want %+v (-want +got):\n%s", tt.q, v, tt.want, diff)
			}
		})
	}
}

type checkRow struct {
	name string
	p    *Policy
	q    query
	want want
}

func TestEvaluationOrder(t *testing.T) {
	narrowAllowBroadDeny := New(Defaults{}, layer("l",
		r(Write, Allow, "src/main.go"),
		r(Write, Deny, "src/*")))
	denyFirstInRuleOrder := New(Defaults{}, layer("l",
		r(Write, Deny, "src/*"),
		r(Write, Allow, "src/main.go")))
	askBeatsAllow := New(Defaults{Write: Allow}, layer("l",
		r(Write, Allow, "*"),
		r(Write, Ask, "*.go")))
	stacked := New(Defaults{},
		layer("base", r(Read, Deny, "secrets/*"), r(Write, Allow, "src/*")),
		layer("app", r(Read, Allow, "secrets/ok.txt"), r(Write, Allow, "docs/*"), r(Write, Deny, "src/gen/*")))
	twoDenies := New(Defaults{},
		layer("first", r(Exec, Deny, "rm*")),
		layer("second", r(Exec, Deny, "rm -rf*")))
	laterAskBeatsEarlierAllow := New(Defaults{},
		layer("base", r(Write, Allow, "*")),
		layer("app", r(Write, Ask, "Makefile")))
	zeroEffect := New(Defaults{Read: Allow}, layer("l", Rule{Act: Read, Pattern: "private/*"}))
	actsAreSeparate := New(Defaults{Read: Allow, Write: Allow}, layer("l", r(Write, Deny, "*")))

	runRows(t, []checkRow{
		{"a broad deny beats a narrow allow", narrowAllowBroadDeny,
			query{act: Write, target: "src/main.go"}, want{Deny, "src/*", "l"}},
		{"a deny listed first wins the same way", denyFirstInRuleOrder,
			query{act: Write, target: "src/main.go"}, want{Deny, "src/*", "l"}},
		{"ask beats allow", askBeatsAllow,
			query{act: Write, target: "pkg/a.go"}, want{Ask, "*.go", "l"}},
		{"allow where no ask matches", askBeatsAllow,
			query{act: Write, target: "README.md"}, want{Allow, "*", "l"}},
		{"a later layer cannot re-allow a deny", stacked,
			query{act: Read, target: "secrets/ok.txt"}, want{Deny, "secrets/*", "base"}},
		{"a later layer can add an allow", stacked,
			query{act: Write, target: "docs/guide.md"}, want{Allow, "docs/*", "app"}},
		{"a later layer can add a deny over an earlier allow", stacked,
			query{act: Write, target: "src/gen/x.go"}, want{Deny, "src/gen/*", "app"}},
		{"earlier layer allow attributed", stacked,
			query{act: Write, target: "src/a.go"}, want{Allow, "src/*", "base"}},
		{"no rule: the default decides", stacked,
			query{act: Write, target: "elsewhere/x"}, want{Ask, "", ""}},
		{"first matching rule in stacking order is attributed", twoDenies,
			query{act: Exec, target: "rm -rf /"}, want{Deny, "rm*", "first"}},
		{"a later ask beats an earlier allow", laterAskBeatsEarlierAllow,
			query{act: Write, target: "Makefile"}, want{Ask, "Makefile", "app"}},
		{"a rule without an effect denies", zeroEffect,
			query{act: Read, target: "private/k"}, want{Deny, "private/*", "l"}},
		{"a rule binds only its own act", actsAreSeparate,
			query{act: Read, target: "a"}, want{Allow, "", ""}},
	})
}

func TestPathTargets(t *testing.T) {
	def := Default()
	p := New(Defaults{Read: Allow, Write: Ask},
		layer("l", r(Read, Deny, "secrets/*"), r(Write, Allow, "vendor/*"), r(Read, Deny, "*.log")))

	runRows(t, []checkRow{
		{".env denied at the root", def, query{act: Read, target: ".env"}, want{Deny, ".env", SecretsLayer}},
		{".env denied at any depth by basename", def, query{act: Read, target: "config/prod/.env"}, want{Deny, ".env", SecretsLayer}},
		{".envrc is not .env", def, query{act: Read, target: "config/.envrc"}, want{Allow, "", ""}},
		{"*.pem by basename", def, query{act: Write, target: "certs/deep/a.pem"}, want{Deny, "*.pem", SecretsLayer}},
		{"id_rsa by basename", def, query{act: Read, target: "home/.ssh/id_rsa"}, want{Deny, "id_rsa", SecretsLayer}},
		{"id_ed25519 write", def, query{act: Write, target: "id_ed25519"}, want{Deny, "id_ed25519", SecretsLayer}},
		{"*.key", def, query{act: Read, target: "tls/server.key"}, want{Deny, "*.key", SecretsLayer}},
		{"star crosses slashes", p, query{act: Write, target: "vendor/lib/src/main.rs"}, want{Allow, "vendor/*", "l"}},
		{"a pattern with a slash is not a basename", p, query{act: Read, target: "app/secrets/x"}, want{Allow, "", ""}},
		{"a basename glob at depth", p, query{act: Read, target: "var/log/app.log"}, want{Deny, "*.log", "l"}},
		{"dot segment cleaned", p, query{act: Read, target: "./secrets/x"}, want{Deny, "secrets/*", "l"}},
		{"double slash cleaned", p, query{act: Read, target: "secrets//x"}, want{Deny, "secrets/*", "l"}},
		{"dot-dot inside cleaned", p, query{act: Read, target: "src/../secrets/x"}, want{Deny, "secrets/*", "l"}},
		{"trailing slash cleaned", p, query{act: Read, target: "secrets/x/"}, want{Deny, "secrets/*", "l"}},
		{"climbing out refused", p, query{act: Read, target: "../x"}, want{Deny, RuleOutsideWorkspace, ""}},
		{"climbing out through a dir refused", p, query{act: Write, target: "vendor/../../x"}, want{Deny, RuleOutsideWorkspace, ""}},
		{"dot-dot alone refused", p, query{act: Read, target: ".."}, want{Deny, RuleOutsideWorkspace, ""}},
		{"absolute refused", p, query{act: Read, target: "/etc/passwd"}, want{Deny, RuleOutsideWorkspace, ""}},
		{"empty refused", p, query{act: Read, target: ""}, want{Deny, RuleEmptyTarget, ""}},
		{"a name starting with dots is not climbing", p, query{act: Read, target: "..hidden"}, want{Allow, "", ""}},
		{"the root itself", p, query{act: Read, target: "."}, want{Allow, "", ""}},
	})
}

// TestBuiltinLayers checks every pattern of the built-in layers at the root
// and at depth, in other cases, and against names they must not catch.
func TestBuiltinLayers(t *testing.T) {
	def := Default()
	// A user's rule keeps case-sensitive matching, even in a layer that
	// takes a built-in layer's name.
	user := New(Defaults{Read: Allow, Write: Allow},
		layer("app", r(Read, Deny, "*.secret")),
		layer(SecretsLayer, r(Read, Deny, "private.txt")))
	contract, err := FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "app", Rules: []protocol.Rule{
		{Act: "read", Effect: "allow", Pattern: "*"}, {Act: "write", Effect: "allow", Pattern: "*"},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(pattern string) want { return want{Deny, pattern, SecretsLayer} }
	git := func(pattern string) want { return want{Deny, pattern, GitLayer} }

	rows := []checkRow{
		{".env.local", def, query{act: Read, target: ".env.local"}, secret(".env.*")},
		{".env.production at depth", def, query{act: Write, target: "app/.env.production"}, secret(".env.*")},
		{".envrc is not an env file", def, query{act: Read, target: ".envrc"}, want{Allow, "", ""}},
		{"env.local without the dot is not", def, query{act: Read, target: "env.local"}, want{Allow, "", ""}},
		{"upper-case .ENV", def, query{act: Read, target: ".ENV"}, secret(".env")},
		{"mixed-case .Env.Local at depth", def, query{act: Write, target: "a/.Env.Local"}, secret(".env.*")},
		{"upper-case ID_RSA", def, query{act: Read, target: "home/.ssh/ID_RSA"}, secret("id_rsa")},
		{"Server.PEM", def, query{act: Read, target: "certs/Server.PEM"}, secret("*.pem")},
		{"id_ecdsa", def, query{act: Read, target: "home/.ssh/id_ecdsa"}, secret("id_ecdsa")},
		{"id_dsa", def, query{act: Write, target: "id_dsa"}, secret("id_dsa")},
		{"id_ed25519_sk", def, query{act: Read, target: ".ssh/id_ed25519_sk"}, secret("id_ed25519_sk")},
		{"a public key is not a secret", def, query{act: Read, target: ".ssh/id_rsa.pub"}, want{Allow, "", ""}},
		{"*.p12", def, query{act: Read, target: "certs/client.p12"}, secret("*.p12")},
		{"*.PFX", def, query{act: Read, target: "certs/client.PFX"}, secret("*.pfx")},
		{".git-credentials", def, query{act: Read, target: "home/.git-credentials"}, secret(".git-credentials")},
		{".netrc", def, query{act: Read, target: ".netrc"}, secret(".netrc")},
		{".npmrc at depth", def, query{act: Read, target: "web/.npmrc"}, secret(".npmrc")},
		{".aws/credentials", def, query{act: Read, target: ".aws/credentials"}, secret(".aws/credentials")},
		{".aws/credentials at depth", def, query{act: Read, target: "home/me/.aws/credentials"}, secret("*/.aws/credentials")},
		{"another credentials file is not", def, query{act: Read, target: "docs/credentials"}, want{Allow, "", ""}},
		{".git/config read", def, query{act: Read, target: ".git/config"}, secret(".git/config")},
		{".git/config read at depth", def, query{act: Read, target: "vendor/x/.git/config"}, secret("*/.git/config")},
		{"upper-case .GIT/CONFIG", def, query{act: Read, target: ".GIT/CONFIG"}, secret(".git/config")},
		{"other git files stay readable", def, query{act: Read, target: ".git/HEAD"}, want{Allow, "", ""}},

		{"write .git itself", def, query{act: Write, target: ".git"}, git(".git")},
		{"write .git with a slash", def, query{act: Write, target: ".git/"}, git(".git")},
		{"write a hook", def, query{act: Write, target: ".git/hooks/pre-commit"}, git(".git/*")},
		{"write .git/info/attributes", def, query{act: Write, target: "./.git/info/attributes"}, git(".git/*")},
		{"write a nested repository's hook", def, query{act: Write, target: "sub/.git/hooks/pre-commit"}, git("*/.git/*")},
		{"write deep under a nested .git", def, query{act: Write, target: "a/b/.git/modules/c/config"}, git("*/.git/*")},
		{"write a .git file at depth", def, query{act: Write, target: "sub/.git"}, git(".git")},
		{"write .GIT in upper case", def, query{act: Write, target: ".GIT/hooks/post-checkout"}, git(".git/*")},
		{"write .git/config is a secret first", def, query{act: Write, target: ".git/config"}, secret(".git/config")},
		{".gitignore is not .git", def, query{act: Write, target: ".gitignore"}, want{Ask, "", ""}},
		{".gitattributes is not .git", def, query{act: Write, target: "sub/.gitattributes"}, want{Ask, "", ""}},
		{".github is not .git", def, query{act: Write, target: ".github/workflows/ci.yml"}, want{Ask, "", ""}},
		{"foo.git is not .git", def, query{act: Write, target: "repos/foo.git/config"}, want{Ask, "", ""}},
		{"reading under .git is the policy's", def, query{act: Read, target: ".git/hooks/pre-commit"}, want{Allow, "", ""}},

		{"a contract's allow cannot reopen .ENV", contract, query{act: Read, target: "A/.ENV"}, secret(".env")},
		{"a contract's allow cannot open .git", contract, query{act: Write, target: ".git/hooks/pre-push"}, git(".git/*")},
		{"a user rule keeps its case", user, query{act: Read, target: "a.SECRET"}, want{Allow, "", ""}},
		{"a user rule matches its case", user, query{act: Read, target: "a.secret"}, want{Deny, "*.secret", "app"}},
		{"a user layer named like the built-in one keeps its case", user, query{act: Read, target: "PRIVATE.TXT"}, want{Allow, "", ""}},
		{"New adds no built-in layer", user, query{act: Read, target: ".env"}, want{Allow, "", ""}},
	}
	// Every documented pattern denies its own name, in upper case too.
	for _, pat := range SecretPatterns() {
		name := strings.ReplaceAll(pat, "*", "x")
		rows = append(rows,
			checkRow{"secret " + pat, def, query{act: Read, target: name}, secret(pat)},
			checkRow{"secret " + pat + " upper case", def, query{act: Write, target: strings.ToUpper(name)}, secret(pat)})
	}
	for _, pat := range GitPatterns() {
		name := strings.ReplaceAll(pat, "*", "x")
		rows = append(rows, checkRow{"git " + pat, def, query{act: Write, target: name}, git(pat)})
	}
	runRows(t, rows)
}

func TestExecTargets(t *testing.T) {
	cargo := New(Defaults{}, layer("l",
		r(Exec, Allow, "cargo"),
		r(Exec, Allow, "cargo test*"),
		r(Exec, Deny, "cargo publish*")))
	goSpace := New(Defaults{}, layer("l", r(Exec, Allow, "go *")))
	goStar := New(Defaults{}, layer("l", r(Exec, Allow, "go*")))
	curl := New(Defaults{Exec: Allow}, layer("l", r(Exec, Deny, "curl"), r(Exec, Deny, "curl *")))
	askProgram := New(Defaults{}, layer("l", r(Exec, Ask, "git"), r(Exec, Allow, "git status*")))
	npm := New(Defaults{}, layer("l", r(Exec, Allow, "npm*"), r(Exec, Deny, "npm publish*")))
	byPath := New(Defaults{Exec: Allow}, layer("l", r(Exec, Deny, "/usr/bin/curl")))
	tool := New(Defaults{}, layer("l", r(Exec, Allow, "mcp__docs__*")))

	runRows(t, []checkRow{
		// Both forms allow; on a tie the program form is attributed.
		{"program allowed and argv allowed", cargo, query{argv: []string{"cargo", "test", "--all"}}, want{Allow, "cargo", "l"}},
		{"argv deny binds though the program is allowed", cargo, query{argv: []string{"cargo", "publish"}}, want{Deny, "cargo publish*", "l"}},
		{"argv no rule: default though the program is allowed", cargo, query{argv: []string{"cargo", "build"}}, want{Ask, "", ""}},
		{"program alone", cargo, query{argv: []string{"cargo"}}, want{Allow, "cargo", "l"}},
		// io-harness semantics: "go *" does not match the program "go", so
		// the program form falls to the default and the stricter ask wins.
		{"an allow of 'go *' does not cover the program", goSpace, query{argv: []string{"go", "test", "./..."}}, want{Ask, "", ""}},
		{"an allow of 'go*' covers both forms", goStar, query{argv: []string{"go", "test", "./..."}}, want{Allow, "go*", "l"}},
		{"a program deny binds whatever the arguments", curl, query{argv: []string{"curl", "-s", "https://x"}}, want{Deny, "curl", "l"}},
		{"on a tie the program form is attributed", curl, query{argv: []string{"curl", "x"}}, want{Deny, "curl", "l"}},
		{"an ask on the program beats an allow on argv", askProgram, query{argv: []string{"git", "status"}}, want{Ask, "git", "l"}},
		{"exec by path: program basename", curl, query{argv: []string{"/usr/bin/curl", "https://x"}}, want{Deny, "curl", "l"}},
		{"exec by ./path: program basename", curl, query{argv: []string{"./curl"}}, want{Deny, "curl", "l"}},
		{"exec by path: argv with basename", npm, query{argv: []string{"/usr/bin/npm", "publish"}}, want{Deny, "npm publish*", "l"}},
		{"exec by ./path: argv with basename", npm, query{argv: []string{"./npm", "publish", "--tag", "x"}}, want{Deny, "npm publish*", "l"}},
		// The path form matches no allow, so it falls to the default: a
		// program by path is never more allowed than by name.
		{"a program by path is no more allowed than by name", npm, query{argv: []string{"/usr/bin/npm", "install"}}, want{Ask, "", ""}},
		{"by name it is allowed", npm, query{argv: []string{"npm", "install"}}, want{Allow, "npm*", "l"}},
		{"a rule naming the path binds the path", byPath, query{argv: []string{"/usr/bin/curl", "x"}}, want{Deny, "/usr/bin/curl", "l"}},
		{"a rule naming the path does not bind the name", byPath, query{argv: []string{"curl", "x"}}, want{Allow, "", ""}},
		{"Check takes a command line", npm, query{act: Exec, target: "/usr/bin/npm publish"}, want{Deny, "npm publish*", "l"}},
		{"Check takes a tool name", tool, query{act: Exec, target: "mcp__docs__search"}, want{Allow, "mcp__docs__*", "l"}},
		{"Check of another tool falls to the default", tool, query{act: Exec, target: "mcp__shell__run"}, want{Ask, "", ""}},
		{"empty argv refused", npm, query{argv: []string{}}, want{Deny, RuleEmptyTarget, ""}},
		{"empty program refused", npm, query{argv: []string{"", "publish"}}, want{Deny, RuleEmptyTarget, ""}},
		{"empty command line refused", npm, query{act: Exec, target: ""}, want{Deny, RuleEmptyTarget, ""}},
		{"a program that is a directory path has no basename form", npm, query{argv: []string{"npm/"}}, want{Allow, "npm*", "l"}},
	})
}

func TestNetTargets(t *testing.T) {
	bare := New(Defaults{}, layer("egress", r(Net, Allow, "api.example.com")))
	ported := New(Defaults{}, layer("egress", r(Net, Allow, "api.example.com:443")))
	wild := New(Defaults{}, layer("egress", r(Net, Allow, "*.example.com")))
	deny := New(Defaults{Net: Allow}, layer("lockdown", r(Net, Deny, "evil.example.com")))
	upper := New(Defaults{}, layer("egress", r(Net, Allow, "API.Example.com")))
	v6 := New(Defaults{}, layer("egress", r(Net, Allow, "::1"), r(Net, Allow, "[fe80::1]:8080")))
	named := New(Defaults{}, layer("egress", r(Net, Allow, "h:https")))

	runRows(t, []checkRow{
		{"bare host rule covers 443", bare, query{host: "api.example.com", port: "443"}, want{Allow, "api.example.com", "egress"}},
		{"bare host rule covers 8080", bare, query{host: "api.example.com", port: "8080"}, want{Allow, "api.example.com", "egress"}},
		{"bare host rule covers no port", bare, query{host: "api.example.com"}, want{Allow, "api.example.com", "egress"}},
		{"another host falls to deny", bare, query{host: "evil.example.com", port: "443"}, want{Deny, "", ""}},
		{"ported rule covers its port", ported, query{host: "api.example.com", port: "443"}, want{Allow, "api.example.com:443", "egress"}},
		{"ported rule does not cover another port", ported, query{host: "api.example.com", port: "8080"}, want{Deny, "", ""}},
		{"ported rule does not cover no port", ported, query{act: Net, target: "api.example.com"}, want{Deny, "", ""}},
		{"wildcard host", wild, query{act: Net, target: "api.example.com:443"}, want{Allow, "*.example.com", "egress"}},
		{"wildcard does not cover another domain", wild, query{act: Net, target: "example.org:443"}, want{Deny, "", ""}},
		{"deny by bare host at any port", deny, query{act: Net, target: "evil.example.com:8443"}, want{Deny, "evil.example.com", "lockdown"}},
		{"host case ignored", deny, query{act: Net, target: "EVIL.Example.COM:443"}, want{Deny, "evil.example.com", "lockdown"}},
		{"rule case ignored", upper, query{act: Net, target: "api.example.com:443"}, want{Allow, "API.Example.com", "egress"}},
		{"trailing dot ignored", deny, query{act: Net, target: "evil.example.com.:443"}, want{Deny, "evil.example.com", "lockdown"}},
		{"trailing dot without port", deny, query{host: "evil.example.com."}, want{Deny, "evil.example.com", "lockdown"}},
		{"port leading zeros dropped", ported, query{host: "api.example.com", port: "0443"}, want{Allow, "api.example.com:443", "egress"}},
		{"IPv6 with port by CheckNet", v6, query{host: "::1", port: "443"}, want{Allow, "::1", "egress"}},
		{"IPv6 bracketed with port", v6, query{act: Net, target: "[::1]:443"}, want{Allow, "::1", "egress"}},
		{"IPv6 without port", v6, query{act: Net, target: "::1"}, want{Allow, "::1", "egress"}},
		{"IPv6 ported rule", v6, query{act: Net, target: "[fe80::1]:8080"}, want{Allow, "[fe80::1]:8080", "egress"}},
		{"IPv6 ported rule other port", v6, query{act: Net, target: "[fe80::1]:80"}, want{Deny, "", ""}},
		{"IPv6 ported rule by another spelling", v6, query{act: Net, target: "[FE80:0::0001]:08080"}, want{Allow, "[fe80::1]:8080", "egress"}},
		{"a port that is not digits is matched whole", named, query{act: Net, target: "h:https"}, want{Allow, "h:https", "egress"}},
		{"bare host rule does not cover a named port", bare, query{act: Net, target: "api.example.com:https"}, want{Deny, "", ""}},
		{"empty host refused", bare, query{act: Net, target: ":443"}, want{Deny, RuleEmptyTarget, ""}},
		{"empty target refused", bare, query{act: Net, target: ""}, want{Deny, RuleEmptyTarget, ""}},
		{"empty brackets refused", bare, query{act: Net, target: "[]:443"}, want{Deny, RuleEmptyTarget, ""}},
	})
}

// TestIPv6Forms checks that an IPv6 address in a rule matches the address
// in a target whatever the spelling of either: with or without brackets,
// with or without a port, in any case, with zeros elided or not.
func TestIPv6Forms(t *testing.T) {
	rules := []string{"[::1]", "::1", "0:0:0:0:0:0:0:1", "[0::1]"}
	targets := []query{
		{act: Net, target: "[::1]:8080"},
		{act: Net, target: "[::1]:443"},
		{act: Net, target: "[::1]"},
		{act: Net, target: "::1"},
		{act: Net, target: "[0:0:0:0:0:0:0:1]:22"},
		{act: Net, target: "0:0::1"},
		{host: "::1", port: "8080"},
		{host: "[::1]", port: "8080"},
		{host: "::1"},
	}
	var rows []checkRow
	for _, pat := range rules {
		deny := New(Defaults{Net: Allow}, layer("l", r(Net, Deny, pat)))
		allow := New(Defaults{}, layer("l", r(Net, Allow, pat)))
		for _, q := range targets {
			rows = append(rows,
				checkRow{"deny " + pat + " stops " + q.String(), deny, q, want{Deny, pat, "l"}},
				checkRow{"allow " + pat + " lets " + q.String(), allow, q, want{Allow, pat, "l"}})
		}
		other := query{act: Net, target: "[::2]:8080"}
		rows = append(rows, checkRow{"deny " + pat + " leaves " + other.String(), deny, other, want{Allow, "", ""}})
	}

	ported := New(Defaults{Net: Allow}, layer("l", r(Net, Deny, "[::1]:8080")))
	glob6 := New(Defaults{Net: Allow}, layer("l", r(Net, Deny, "[fe80::*]")))
	v4 := New(Defaults{Net: Allow}, layer("l", r(Net, Deny, "127.0.0.1")))
	rows = append(rows,
		checkRow{"a ported rule covers its port", ported, query{act: Net, target: "[::1]:8080"}, want{Deny, "[::1]:8080", "l"}},
		checkRow{"a ported rule by CheckNet", ported, query{host: "::1", port: "8080"}, want{Deny, "[::1]:8080", "l"}},
		checkRow{"a ported rule leaves another port", ported, query{act: Net, target: "[::1]:8081"}, want{Allow, "", ""}},
		checkRow{"a ported rule leaves no port", ported, query{act: Net, target: "::1"}, want{Allow, "", ""}},
		checkRow{"a bracketed glob covers every port", glob6, query{act: Net, target: "[fe80::1]:8080"}, want{Deny, "[fe80::*]", "l"}},
		checkRow{"a bracketed glob covers no port", glob6, query{act: Net, target: "fe80::2"}, want{Deny, "[fe80::*]", "l"}},
		checkRow{"a bracketed glob leaves other addresses", glob6, query{act: Net, target: "[fe81::1]:80"}, want{Allow, "", ""}},
		// An IPv4-mapped IPv6 address reaches the IPv4 address.
		checkRow{"IPv4-mapped with port", v4, query{act: Net, target: "[::ffff:127.0.0.1]:80"}, want{Deny, "127.0.0.1", "l"}},
		checkRow{"IPv4-mapped by CheckNet", v4, query{host: "::ffff:127.0.0.1", port: "80"}, want{Deny, "127.0.0.1", "l"}},
		checkRow{"IPv4 itself", v4, query{act: Net, target: "127.0.0.1:80"}, want{Deny, "127.0.0.1", "l"}},
	)
	runRows(t, rows)

	// The verdict carries the target as given, not its normalised form.
	if v := New(Defaults{}, layer("l", r(Net, Deny, "[::1]"))).Check(Net, "[0::1]:8080"); v.Target != "[0::1]:8080" {
		t.Errorf("Check(net, [0::1]:8080).Target = %q, want the target as given", v.Target)
	}
}

func TestDefaults(t *testing.T) {
	builtin := New(Defaults{})
	custom := New(Defaults{Read: Deny, Exec: Allow})
	invalid := New(Defaults{Read: Effect(9)})

	runRows(t, []checkRow{
		{"read allows by default", builtin, query{act: Read, target: "a"}, want{Allow, "", ""}},
		{"write asks by default", builtin, query{act: Write, target: "a"}, want{Ask, "", ""}},
		{"exec asks by default", builtin, query{argv: []string{"make"}}, want{Ask, "", ""}},
		{"net denies by default", builtin, query{host: "example.com", port: "443"}, want{Deny, "", ""}},
		{"a set default applies", custom, query{act: Read, target: "a"}, want{Deny, "", ""}},
		{"an unset default is the built-in", custom, query{act: Write, target: "a"}, want{Ask, "", ""}},
		{"another set default", custom, query{argv: []string{"make"}}, want{Allow, "", ""}},
		{"an unknown default denies", invalid, query{act: Read, target: "a"}, want{Deny, "", ""}},
		{"permissive read", Permissive(), query{act: Read, target: ".env"}, want{Allow, "", ""}},
		{"permissive write", Permissive(), query{act: Write, target: "a"}, want{Allow, "", ""}},
		{"permissive exec", Permissive(), query{argv: []string{"rm", "-rf", "/"}}, want{Allow, "", ""}},
		{"permissive net", Permissive(), query{act: Net, target: "example.com:443"}, want{Allow, "", ""}},
		{"nil policy denies read", nil, query{act: Read, target: "a"}, want{Deny, "", ""}},
		{"nil policy denies net", nil, query{act: Net, target: "example.com:443"}, want{Deny, "", ""}},
		{"unknown act refused", Permissive(), query{act: Act(0), target: "a"}, want{Deny, RuleUnknownAct, ""}},
		{"unknown act 9 refused", Permissive(), query{act: Act(9), target: "a"}, want{Deny, RuleUnknownAct, ""}},
	})

	if got, want := builtin.Defaults(), (Defaults{Read: Allow, Write: Ask, Exec: Ask, Net: Deny}); got != want {
		t.Errorf("New(Defaults{}).Defaults() = %+v, want %+v", got, want)
	}
	if v := Permissive().CheckPath(Exec, "a"); v.Rule != RuleUnknownAct || v.Effect != Deny {
		t.Errorf("CheckPath(Exec, a) = %v, want a refusal by %s", v, RuleUnknownAct)
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := Default()
	// Spelled out, not derived from SecretPatterns and GitPatterns, so that
	// a change to the built-in layers is a change to this test too.
	var secrets []Rule
	for _, pat := range []string{
		".env", ".env.*",
		"*.pem", "*.key", "*.p12", "*.pfx",
		"id_rsa", "id_dsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk",
		".git-credentials", ".netrc", ".npmrc",
		".aws/credentials", "*/.aws/credentials",
		".git/config", "*/.git/config",
	} {
		secrets = append(secrets, Rule{Read, Deny, pat}, Rule{Write, Deny, pat})
	}
	want := []Layer{
		{Name: SecretsLayer, Rules: secrets},
		{Name: GitLayer, Rules: []Rule{{Write, Deny, ".git"}, {Write, Deny, ".git/*"}, {Write, Deny, "*/.git/*"}}},
	}
	if diff := cmp.Diff(want, p.Layers()); diff != "" {
		t.Errorf("Default().Layers() (-want +got):\n%s", diff)
	}
	if got, want := p.Defaults(), (Defaults{Read: Allow, Write: Ask, Exec: Ask, Net: Deny}); got != want {
		t.Errorf("Default().Defaults() = %+v, want %+v", got, want)
	}
	if p.IsPermissive() {
		t.Errorf("Default().IsPermissive() = true, want false")
	}
	if !Permissive().IsPermissive() {
		t.Errorf("Permissive().IsPermissive() = false, want true")
	}
	if New(Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Allow}, layer("empty")).IsPermissive() != true {
		t.Errorf("a policy of empty layers and allow defaults is not permissive")
	}
}

func TestVerdictCarriesActAndTarget(t *testing.T) {
	p := Default()
	tests := []struct {
		name string
		q    query
		want Verdict
	}{
		{"path as given, not cleaned", query{act: Read, target: "./config/.env"},
			Verdict{Effect: Deny, Rule: ".env", Layer: SecretsLayer, Act: Read, Target: "./config/.env"}},
		{"argv joined", query{argv: []string{"go", "test", "./..."}},
			Verdict{Effect: Ask, Act: Exec, Target: "go test ./..."}},
		{"host and port joined", query{host: "Example.com", port: "443"},
			Verdict{Effect: Deny, Act: Net, Target: "Example.com:443"}},
		{"IPv6 bracketed", query{host: "::1", port: "443"},
			Verdict{Effect: Deny, Act: Net, Target: "[::1]:443"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.q.run(p)); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tt.q, diff)
			}
		})
	}
}

func TestNormalisationOfBuiltRules(t *testing.T) {
	rules := []Rule{
		{Act: Read, Effect: Deny, Pattern: "a"},
		{Act: Act(0), Effect: Deny, Pattern: "dropped: no act"},
		{Act: Act(7), Effect: Deny, Pattern: "dropped: unknown act"},
		{Act: Read, Effect: Deny, Pattern: ""},
		{Act: Write, Pattern: "zero effect"},
		{Act: Write, Effect: Effect(8), Pattern: "unknown effect"},
	}
	p := New(Defaults{}, Layer{Rules: rules})
	want := []Layer{{Name: "policy", Rules: []Rule{
		{Read, Deny, "a"},
		{Write, Deny, "zero effect"},
		{Write, Deny, "unknown effect"},
	}}}
	if diff := cmp.Diff(want, p.Layers()); diff != "" {
		t.Errorf("Layers() (-want +got):\n%s", diff)
	}
	// The policy is a copy: changing the caller's slice changes nothing.
	rules[0].Effect = Allow
	if v := p.Check(Read, "a"); v.Effect != Deny {
		t.Errorf("after changing the input, Check(read, a) = %v, want deny", v)
	}
	ls := p.Layers()
	ls[0].Rules[0].Effect = Allow
	ls[0].Name = "changed"
	if v := p.Check(Read, "a"); v.Effect != Deny || v.Layer != "policy" {
		t.Errorf("after changing Layers(), Check(read, a) = %v, want deny in layer policy", v)
	}
}

func TestConcurrentChecks(t *testing.T) {
	p := Merge(Default(), New(Defaults{}, layer("app", r(Write, Allow, "src/*"), r(Exec, Allow, "go*"))))
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 200 {
				p.Check(Read, "config/.env")
				p.CheckExec([]string{"go", "test"})
				p.CheckNet("example.com", "443")
				_ = p.Remember(r(Write, Allow, "docs/*"))
			}
		}()
	}
	for range 4 {
		<-done
	}
	if v := p.Check(Write, "docs/a"); v.Effect != Ask {
		t.Errorf("Remember changed the policy it was called on: Check(write, docs/a) = %v", v)
	}
}
