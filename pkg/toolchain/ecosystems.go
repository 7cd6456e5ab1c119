package toolchain

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Each detector returns its ecosystem's toolchain when its marker is in
// the root, else nil. A command is left out where the ecosystem has no
// convention for it, rather than guessed.

func rust(r root) *protocol.Toolchain {
	if !r.file("Cargo.toml") {
		return nil
	}
	return &protocol.Toolchain{
		Ecosystem: "rust", Marker: "Cargo.toml", Manager: "cargo",
		Install: argv("cargo", "fetch"),
		Build:   argv("cargo", "build"),
		Test:    argv("cargo", "test"),
		Lint:    argv("cargo", "clippy"),
		Format:  argv("cargo", "fmt"),
	}
}

func deno(r root) *protocol.Toolchain {
	// deno.jsonc may hold comments, which encoding/json does not read, so
	// its tasks are not looked at: the defaults are Deno's own commands.
	m := r.first("deno.json", "deno.jsonc")
	if m == "" {
		return nil
	}
	return &protocol.Toolchain{
		Ecosystem: "deno", Marker: m, Manager: "deno",
		Install: argv("deno", "install"),
		Test:    argv("deno", "test"),
		Lint:    argv("deno", "lint"),
		Format:  argv("deno", "fmt"),
	}
}

// scripts returns the names of the "scripts" object of the JSON file name
// (package.json, composer.json), or nil when it has none or cannot be read
// within MaxRead bytes.
func scripts(r root, name string) map[string]json.RawMessage {
	b, ok := r.read(name)
	if !ok {
		return nil
	}
	var f struct {
		Scripts map[string]json.RawMessage `json:"scripts"`
	}
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	return f.Scripts
}

func node(r root) *protocol.Toolchain {
	if !r.file("package.json") {
		return nil
	}
	t := &protocol.Toolchain{Ecosystem: "node", Marker: "package.json"}
	switch {
	case r.file("bun.lockb") || r.file("bun.lock"):
		t.Manager = "bun"
		t.Install = argv("bun", "install")
		t.Test = argv("bun", "test") // bun's own test runner, when no script says otherwise
	case r.file("pnpm-lock.yaml"):
		t.Manager = "pnpm"
		t.Install = argv("pnpm", "install")
	case r.file("yarn.lock"):
		t.Manager = "yarn"
		t.Install = argv("yarn", "install")
	default:
		t.Manager = "npm"
		t.Install = argv("npm", "install")
		if r.file("package-lock.json") {
			t.Install = argv("npm", "ci")
		}
	}
	// A script is run by name; its body, which may be anything, is never
	// read into a command. "<manager> run <name>" runs the script with
	// every one of the four managers (where "bun test", say, would not).
	s := scripts(r, "package.json")
	run := func(name string, dflt []string) []string {
		if _, ok := s[name]; ok {
			return argv(t.Manager, "run", name)
		}
		return dflt
	}
	t.Build = run("build", nil)
	t.Test = run("test", t.Test)
	t.Lint = run("lint", nil)
	t.Format = run("format", nil)
	t.Run = run("start", nil)
	return t
}

func golang(r root) *protocol.Toolchain {
	if !r.file("go.mod") {
		return nil
	}
	return &protocol.Toolchain{
		Ecosystem: "go", Marker: "go.mod", Manager: "go",
		Install: argv("go", "mod", "download"),
		Build:   argv("go", "build", "./..."),
		Test:    argv("go", "test", "./..."),
		Lint:    argv("go", "vet", "./..."),
		Format:  argv("gofmt", "-l", "."),
	}
}

func python(r root) *protocol.Toolchain {
	m := r.first("pyproject.toml", "requirements.txt")
	if m == "" {
		return nil
	}
	t := &protocol.Toolchain{Ecosystem: "python", Marker: m}
	// prefix runs a tool of the project's environment.
	var prefix []string
	switch {
	case r.file("uv.lock"):
		t.Manager, prefix = "uv", argv("uv", "run")
		t.Install = argv("uv", "sync")
	case r.file("poetry.lock"):
		t.Manager, prefix = "poetry", argv("poetry", "run")
		t.Install = argv("poetry", "install")
	default:
		t.Manager, prefix = "pip", argv("python", "-m")
		if m == "requirements.txt" {
			t.Install = argv("python", "-m", "pip", "install", "-r", "requirements.txt")
		} else {
			t.Install = argv("python", "-m", "pip", "install", "-e", ".")
		}
	}
	tool := func(words ...string) []string { return append(slices.Clone(prefix), words...) }
	t.Test = tool("pytest")
	// Linters and formatters are the project's choice: named only when its
	// configuration names them.
	var conf []byte
	if m == "pyproject.toml" {
		conf, _ = r.read(m)
	}
	switch {
	case bytes.Contains(conf, []byte("[tool.ruff")) || r.file("ruff.toml") || r.file(".ruff.toml"):
		t.Lint = tool("ruff", "check", ".")
		t.Format = tool("ruff", "format", ".")
	case bytes.Contains(conf, []byte("[tool.black")):
		t.Format = tool("black", ".")
	}
	return t
}

func maven(r root) *protocol.Toolchain {
	if !r.file("pom.xml") {
		return nil
	}
	mvn := "mvn"
	if r.file("mvnw") {
		mvn = "./mvnw"
	}
	return &protocol.Toolchain{
		Ecosystem: "java", Marker: "pom.xml", Manager: "maven",
		Build: argv(mvn, "compile"),
		Test:  argv(mvn, "test"),
	}
}

func gradle(r root) *protocol.Toolchain {
	m := r.first("build.gradle", "build.gradle.kts")
	if m == "" {
		return nil
	}
	g := "gradle"
	if r.file("gradlew") {
		g = "./gradlew"
	}
	return &protocol.Toolchain{
		Ecosystem: "java", Marker: m, Manager: "gradle",
		Build: argv(g, "assemble"),
		Test:  argv(g, "test"),
	}
}

func elixir(r root) *protocol.Toolchain {
	if !r.file("mix.exs") {
		return nil
	}
	return &protocol.Toolchain{
		Ecosystem: "elixir", Marker: "mix.exs", Manager: "mix",
		Install: argv("mix", "deps.get"),
		Build:   argv("mix", "compile"),
		Test:    argv("mix", "test"),
		Format:  argv("mix", "format"),
	}
}

func ruby(r root) *protocol.Toolchain {
	if !r.file("Gemfile") {
		return nil
	}
	t := &protocol.Toolchain{
		Ecosystem: "ruby", Marker: "Gemfile", Manager: "bundler",
		Install: argv("bundle", "install"),
	}
	switch {
	case r.dir("spec") || r.file(".rspec"):
		t.Test = argv("bundle", "exec", "rspec")
	case r.file("Rakefile"):
		t.Test = argv("bundle", "exec", "rake", "test")
	}
	if r.file(".rubocop.yml") {
		t.Lint = argv("bundle", "exec", "rubocop")
	}
	return t
}

func php(r root) *protocol.Toolchain {
	if !r.file("composer.json") {
		return nil
	}
	t := &protocol.Toolchain{
		Ecosystem: "php", Marker: "composer.json", Manager: "composer",
		Install: argv("composer", "install"),
	}
	if r.file("phpunit.xml") || r.file("phpunit.xml.dist") {
		t.Test = argv("vendor/bin/phpunit")
	}
	s := scripts(r, "composer.json")
	for name, field := range map[string]*[]string{"test": &t.Test, "lint": &t.Lint, "format": &t.Format} {
		if _, ok := s[name]; ok {
			*field = argv("composer", "run-script", name)
		}
	}
	return t
}

func swift(r root) *protocol.Toolchain {
	if !r.file("Package.swift") {
		return nil
	}
	return &protocol.Toolchain{
		Ecosystem: "swift", Marker: "Package.swift", Manager: "swiftpm",
		Install: argv("swift", "package", "resolve"),
		Build:   argv("swift", "build"),
		Test:    argv("swift", "test"),
	}
}

func cmake(r root) *protocol.Toolchain {
	if !r.file("CMakeLists.txt") {
		return nil
	}
	// Install is the configure step: what comes before the first build.
	return &protocol.Toolchain{
		Ecosystem: "cmake", Marker: "CMakeLists.txt", Manager: "cmake",
		Install: argv("cmake", "-S", ".", "-B", "build"),
		Build:   argv("cmake", "--build", "build"),
		Test:    argv("ctest", "--test-dir", "build"),
	}
}

func dotnet(r root) *protocol.Toolchain {
	var m string
	for _, suffix := range []string{".csproj", ".fsproj", ".sln"} {
		if names := r.withSuffix(suffix); len(names) > 0 {
			m = names[0]
			break
		}
	}
	if m == "" {
		return nil
	}
	// The project is named in each command: with more than one project or
	// solution file in a directory, dotnet refuses to pick.
	return &protocol.Toolchain{
		Ecosystem: "dotnet", Marker: m, Manager: "dotnet",
		Install: argv("dotnet", "restore", m),
		Build:   argv("dotnet", "build", m),
		Test:    argv("dotnet", "test", m),
		Format:  argv("dotnet", "format", m),
	}
}

func gnuMake(r root) *protocol.Toolchain {
	// GNU make's own order of the names it reads.
	m := r.first("GNUmakefile", "makefile", "Makefile")
	if m == "" {
		return nil
	}
	t := &protocol.Toolchain{Ecosystem: "make", Marker: m, Manager: "make", Build: argv("make")}
	b, _ := r.read(m)
	targets := makeTargets(b)
	target := func(names ...string) []string {
		for _, n := range names {
			if targets[n] {
				return argv("make", n)
			}
		}
		return nil
	}
	t.Test = target("test", "check")
	t.Lint = target("lint")
	t.Format = target("format", "fmt")
	return t
}

// makeTargets returns the targets a Makefile's rules name, as far as a
// line-by-line reading finds them: a line that starts a rule ("a b: deps",
// "a::"), not a recipe, a comment or a variable assignment.
func makeTargets(b []byte) map[string]bool {
	targets := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if line == "" || line[0] == '\t' || line[0] == '#' {
			continue
		}
		before, after, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(after, "=") || strings.HasPrefix(after, ":=") || strings.ContainsAny(before, "=$%") {
			continue
		}
		for _, f := range strings.Fields(before) {
			targets[f] = true
		}
	}
	return targets
}
