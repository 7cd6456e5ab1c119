package harness_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const modPrefix = "github.com/ioharness/harness/"

// TestDependenciesPointDown checks ARCHITECTURE's layering: protocol
// imports nothing of ours and no NATS, Redis, Docker or provider SDK; the
// building blocks import nothing of ours but protocol (and private
// helpers); policy does no I/O. It reads the real import graph.
func TestDependenciesPointDown(t *testing.T) {
	rules := []struct {
		pkg      string
		ours     []string // packages of ours it may reach
		modules  []string // third-party module prefixes it may reach
		noDirect []string // standard packages it must not import itself
	}{
		{pkg: "pkg/protocol"},
		{pkg: "pkg/policy", ours: []string{"pkg/protocol", "internal/glob"}, noDirect: []string{"os", "os/exec", "net", "net/http", "syscall", "time"}},
		{pkg: "internal/glob"},
		{pkg: "internal/fault"},
		{pkg: "pkg/sandbox", ours: []string{"pkg/protocol"}},
		{pkg: "pkg/sandbox/floor", ours: sandboxBackend},
		{pkg: "pkg/sandbox/native", ours: sandboxBackend},
		{pkg: "pkg/sandbox/docker", ours: sandboxBackend, modules: dockerClient},
		{pkg: "pkg/tools", ours: []string{"pkg/protocol", "pkg/sandbox", "internal/glob"}},
		{pkg: "pkg/provider", ours: []string{"pkg/protocol", "pkg/retry"}, modules: []string{"github.com/sashabaranov/go-openai"}},
		{pkg: "pkg/retry", ours: []string{"pkg/protocol"}, noDirect: []string{"os", "net", "net/http"}},
		{pkg: "pkg/trace", ours: []string{"pkg/protocol"}, modules: natsClient},
		{pkg: "pkg/snapshot", ours: []string{"pkg/protocol"}, noDirect: []string{"os/exec", "net", "net/http"}},
	}
	for _, r := range rules {
		for _, dep := range goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./"+r.pkg) {
			if dep == modPrefix+r.pkg {
				continue
			}
			if rel, ok := strings.CutPrefix(dep, modPrefix); ok {
				if !slices.Contains(r.ours, rel) {
					t.Errorf("%s depends on %s", r.pkg, rel)
				}
				continue
			}
			if !slices.ContainsFunc(r.modules, func(m string) bool { return strings.HasPrefix(dep, m) }) {
				t.Errorf("%s depends on the module of %s", r.pkg, dep)
			}
		}
		for _, imp := range goList(t, "-f", `{{join .Imports "\n"}}`, "./"+r.pkg) {
			if slices.Contains(r.noDirect, imp) {
				t.Errorf("%s imports %s", r.pkg, imp)
			}
		}
	}
}

// sandboxBackend is what a sandbox backend may reach of ours: the protocol,
// the interface package and the helpers the backends share.
var sandboxBackend = []string{"pkg/protocol", "pkg/sandbox", "pkg/sandbox/internal/process"}

// TestDockerClientStaysInItsBackend checks that only the docker backend,
// and what chooses among the backends, links the Docker Engine's client
// (some thirty packages): the interface package, the other backends, the
// tools that run commands through them and the sandboxer that serves them
// do not.
func TestDockerClientStaysInItsBackend(t *testing.T) {
	for _, pkg := range []string{"pkg/sandbox", "pkg/sandbox/floor", "pkg/sandbox/native", "pkg/tools", "pkg/sandboxer"} {
		for _, dep := range goList(t, "-deps", "./"+pkg) {
			if strings.HasPrefix(dep, "github.com/moby/") || strings.HasPrefix(dep, "github.com/docker/") {
				t.Errorf("%s links the Docker client (%s); only pkg/sandbox/docker may", pkg, dep)
			}
		}
	}
	if deps := goList(t, "-deps", "./pkg/sandbox/docker"); !slices.Contains(deps, "github.com/moby/moby/client") {
		t.Errorf("pkg/sandbox/docker does not link github.com/moby/moby/client; the rule above tests nothing")
	}
}

// TestCoordinatorHoldsNoProviderSDK checks the role that never holds a
// provider key links no provider's SDK nor the provider package: it
// decides when a failed turn is tried again from pkg/retry alone.
func TestCoordinatorHoldsNoProviderSDK(t *testing.T) {
	deps := goList(t, "-deps", "./pkg/coordinator")
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/sashabaranov/") || strings.Contains(dep, "openai") || strings.Contains(dep, "anthropic") || dep == modPrefix+"pkg/provider" {
			t.Errorf("pkg/coordinator links %s", dep)
		}
	}
	if !slices.Contains(deps, modPrefix+"pkg/retry") {
		t.Errorf("pkg/coordinator does not link pkg/retry; the rule above tests nothing")
	}
}

// dockerClient is the Docker Engine's Go client (moby/moby/client, for the
// docker sandbox backend) and what it brings with it.
var dockerClient = []string{"github.com/moby/", "github.com/containerd/", "github.com/distribution/", "github.com/docker/",
	"github.com/opencontainers/", "github.com/felixge/httpsnoop", "github.com/go-logr/", "go.opentelemetry.io/", "golang.org/x/sys"}

// natsClient is nats.go and what it brings with it.
var natsClient = []string{"github.com/nats-io/nats.go", "github.com/nats-io/nkeys", "github.com/nats-io/nuid",
	"github.com/klauspost/compress", "golang.org/x/crypto", "golang.org/x/sys", "golang.org/x/text"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestEveryPackageIsDocumented checks each package of ours has a doc
// comment.
func TestEveryPackageIsDocumented(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Doc}}", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, doc, _ := strings.Cut(line, "\t")
		if strings.TrimSpace(doc) == "" {
			t.Errorf("package %s has no doc comment", path)
		}
	}
}
