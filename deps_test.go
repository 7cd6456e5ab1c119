package harness_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
		{pkg: "pkg/tools", ours: []string{"pkg/protocol", "pkg/sandbox", "internal/glob", "internal/git"}},
		{pkg: "internal/git", ours: []string{"pkg/protocol", "pkg/sandbox"}, noDirect: []string{"os/exec", "net", "net/http"}},
		{pkg: "pkg/provider", ours: []string{"pkg/protocol", "pkg/retry"}, modules: []string{"github.com/sashabaranov/go-openai"}},
		{pkg: "pkg/retry", ours: []string{"pkg/protocol"}, noDirect: []string{"os", "net", "net/http"}},
		// The trace's records are decoded by the hot path's decoder.
		{pkg: "internal/wirejson", ours: []string{"pkg/protocol"}, modules: segmentioJSON},
		{pkg: "pkg/trace", ours: []string{"pkg/protocol", "internal/wirejson"}, modules: append(natsClient, segmentioJSON...)},
		{pkg: "pkg/wire", ours: []string{"pkg/protocol", "pkg/trace", "internal/wirejson"}, modules: append(natsClient, segmentioJSON...)},
		{pkg: "pkg/snapshot", ours: []string{"pkg/protocol"}, noDirect: []string{"os/exec", "net", "net/http"}},
		// The context assembly is a pure function of the folded run state.
		{pkg: "pkg/assemble", ours: []string{"pkg/protocol"}, noDirect: []string{"os", "os/exec", "net", "net/http", "syscall", "time", "math/rand", "math/rand/v2"}},
		{pkg: "pkg/toolchain", ours: []string{"pkg/protocol"}, noDirect: []string{"os", "os/exec", "net", "net/http"}},
		// The skills catalogue reads through the fs.FS it is given.
		{pkg: "pkg/skills", ours: []string{"pkg/protocol"}, noDirect: []string{"os", "os/exec", "net", "net/http", "syscall"}},
		{pkg: "pkg/memory", ours: []string{"pkg/protocol"}, modules: natsClient, noDirect: []string{"os", "os/exec", "net/http"}},
		// The MCP client is the official SDK and what it brings, over a
		// sandbox backend's pipes or an HTTP client the sandboxer checks.
		{pkg: "pkg/mcptools", ours: []string{"pkg/protocol", "pkg/sandbox", "internal/version"}, modules: mcpSDK},
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

// segmentioJSON is the module the hot path's decoder is (internal/wirejson).
var segmentioJSON = []string{"github.com/segmentio/encoding/", "github.com/segmentio/asm/", "golang.org/x/sys/cpu"}

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

// TestMCPSDKStaysInTheSandboxer checks that the MCP SDK is linked where
// MCP servers are spoken to (pkg/mcptools, and the sandboxer that holds
// the sessions) and nowhere else of the roles: the coordinator, which only
// dispatches the calls, the worker, the protocol and the sandbox backends
// do not link it.
func TestMCPSDKStaysInTheSandboxer(t *testing.T) {
	for _, pkg := range []string{"pkg/protocol", "pkg/coordinator", "pkg/worker", "pkg/sandbox", "pkg/sandbox/native", "pkg/sandbox/floor", "pkg/tools", "internal/gate"} {
		for _, dep := range goList(t, "-deps", "./"+pkg) {
			if strings.HasPrefix(dep, "github.com/modelcontextprotocol/") {
				t.Errorf("%s links the MCP SDK (%s); only pkg/mcptools and the sandboxer may", pkg, dep)
			}
		}
	}
	if deps := goList(t, "-deps", "./pkg/sandboxer"); !slices.Contains(deps, "github.com/modelcontextprotocol/go-sdk/mcp") {
		t.Errorf("pkg/sandboxer does not link the MCP SDK; the rule above tests nothing")
	}
}

// mcpSDK is the MCP SDK (github.com/modelcontextprotocol/go-sdk, for
// pkg/mcptools) and what it brings with it.
var mcpSDK = []string{"github.com/modelcontextprotocol/go-sdk", "github.com/google/jsonschema-go", "github.com/segmentio/",
	"github.com/yosida95/uritemplate", "golang.org/x/oauth2", "golang.org/x/sync", "golang.org/x/time", "golang.org/x/sys"}

// TestBrowserIsTestOnly checks that chromedp, which the console's browser
// tests drive Chromium with, is linked by no package of the default build:
// the console serves pages, it drives no browser. And that the console,
// which shows runs to people, links no provider's SDK.
func TestBrowserIsTestOnly(t *testing.T) {
	for _, dep := range goList(t, "-deps", "./...") {
		if strings.HasPrefix(dep, "github.com/chromedp/") {
			t.Errorf("the default build links %s; chromedp is for tests only", dep)
		}
	}
	if deps := goList(t, "-deps", "-test", "./internal/console"); !slices.Contains(deps, "github.com/chromedp/chromedp") {
		t.Errorf("internal/console's tests do not link github.com/chromedp/chromedp; the rule above tests nothing")
	}
	for _, dep := range goList(t, "-deps", "./internal/console") {
		if strings.HasPrefix(dep, "github.com/sashabaranov/") || dep == modPrefix+"pkg/provider" {
			t.Errorf("internal/console links %s", dep)
		}
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

// TestNoExportedSignatureNamesInternal checks the roles can be embedded:
// no exported function, method, type, struct field, variable or constant
// of a package under pkg/ has a type that mentions a package under an
// internal/ directory, which no other module can name. It type-checks
// each package against the compiled export data of its imports.
func TestNoExportedSignatureNamesInternal(t *testing.T) {
	exports := map[string]string{}
	for _, line := range goListLines(t, "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}", "./pkg/...") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	checked := 0
	for _, line := range goListLines(t, "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", "./pkg/...") {
		f := strings.Split(line, "\t")
		path, dir := f[0], f[1]
		if isInternal(path) {
			continue
		}
		var files []*ast.File
		for _, name := range strings.Fields(f[2]) {
			af, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, af)
		}
		pkg, err := (&types.Config{Importer: imp}).Check(path, fset, files, nil)
		if err != nil {
			t.Fatalf("type-check %s: %v", path, err)
		}
		checked++
		for _, problem := range internalInExports(pkg) {
			t.Errorf("%s: %s", strings.TrimPrefix(path, modPrefix), problem)
		}
	}
	if checked == 0 {
		t.Fatal("checked no package under pkg/; the rule tests nothing")
	}
}

// TestRoleExampleImportsNothingInternal checks the example that embeds the
// roles uses only what another module could: its files (pkg/coordinator's
// example*_test.go) import no internal/ package. The package's other
// external tests, which run the roles' behaviour through the embedded
// cluster, may.
func TestRoleExampleImportsNothingInternal(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("pkg", "coordinator", "example*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var imports []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range f.Imports {
			imp, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", name, s.Path.Value, err)
			}
			imports = append(imports, imp)
		}
	}
	if !slices.Contains(imports, modPrefix+"pkg/worker") || !slices.Contains(imports, modPrefix+"pkg/sandboxer") {
		t.Fatalf("pkg/coordinator's example files %v import %v: the roles' example is not there; the rule tests nothing", files, imports)
	}
	for _, imp := range imports {
		if isInternal(imp) {
			t.Errorf("pkg/coordinator's example imports %s, which an embedder cannot", imp)
		}
	}
}

func isInternal(path string) bool {
	return strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// internalInExports names each exported object of pkg whose type mentions
// an internal package, walking into the exported fields and methods of the
// package's own named types.
func internalInExports(pkg *types.Package) []string {
	var problems []string
	seen := map[types.Type]bool{}
	var mentions func(t types.Type) string
	mentions = func(t types.Type) string {
		if seen[t] {
			return ""
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Alias:
			return mentions(types.Unalias(t))
		case *types.Named:
			obj := t.Obj()
			if obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
				return obj.Pkg().Path() + "." + obj.Name()
			}
			if args := t.TypeArgs(); args != nil {
				for i := range args.Len() {
					if m := mentions(args.At(i)); m != "" {
						return m
					}
				}
			}
			if obj.Pkg() != pkg {
				return "" // another package's type: its own rule holds, or it is not ours
			}
			for i := range t.NumMethods() {
				if m := t.Method(i); m.Exported() {
					if s := mentions(m.Type()); s != "" {
						return s
					}
				}
			}
			return mentions(t.Underlying())
		case *types.Pointer:
			return mentions(t.Elem())
		case *types.Slice:
			return mentions(t.Elem())
		case *types.Array:
			return mentions(t.Elem())
		case *types.Chan:
			return mentions(t.Elem())
		case *types.Map:
			if m := mentions(t.Key()); m != "" {
				return m
			}
			return mentions(t.Elem())
		case *types.Signature:
			for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
				for i := range tup.Len() {
					if m := mentions(tup.At(i).Type()); m != "" {
						return m
					}
				}
			}
		case *types.Struct:
			for i := range t.NumFields() {
				if f := t.Field(i); f.Exported() {
					if m := mentions(f.Type()); m != "" {
						return m
					}
				}
			}
		case *types.Interface:
			for i := range t.NumMethods() {
				if m := t.Method(i); m.Exported() {
					if s := mentions(m.Type()); s != "" {
						return s
					}
				}
			}
		}
		return ""
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		clear(seen)
		if m := mentions(obj.Type()); m != "" {
			problems = append(problems, name+" mentions "+m)
		}
	}
	return problems
}

func goListLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
