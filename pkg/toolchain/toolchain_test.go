package toolchain_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/toolchain"
)

// tree makes a workspace root of files: a name ending in "/" is a
// directory, any other a file holding its value.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// detect runs Detect on dir through both file systems a caller may give:
// os.DirFS and an os.Root's, and fails when they disagree.
func detect(t *testing.T, dir string) *protocol.Toolchain {
	t.Helper()
	viaDir := toolchain.Detect(os.DirFS(dir))
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	viaRoot := toolchain.Detect(r.FS())
	if d := cmp.Diff(viaDir, viaRoot); d != "" {
		t.Errorf("Detect(os.DirFS) and Detect(os.Root.FS) differ (-dirfs +root):\n%s", d)
	}
	return viaRoot
}

func cmd(words ...string) []string { return words }

func TestDetect(t *testing.T) {
	goMod := &protocol.Toolchain{
		Ecosystem: "go", Marker: "go.mod", Manager: "go",
		Install: cmd("go", "mod", "download"),
		Build:   cmd("go", "build", "./..."),
		Test:    cmd("go", "test", "./..."),
		Lint:    cmd("go", "vet", "./..."),
		Format:  cmd("gofmt", "-l", "."),
	}
	npm := func(t protocol.Toolchain) *protocol.Toolchain {
		t.Ecosystem, t.Marker = "node", "package.json"
		if t.Manager == "" {
			t.Manager = "npm"
		}
		if t.Install == nil {
			t.Install = cmd("npm", "install")
		}
		return &t
	}
	allScripts := `{"scripts":{"build":"tsc","test":"vitest","lint":"eslint .","format":"prettier -w .","start":"node .","dev":"vite"}}`
	tests := []struct {
		name  string
		files map[string]string
		want  *protocol.Toolchain
	}{
		{name: "no marker", files: map[string]string{"README.md": "hi", "src/": ""}, want: nil},
		{name: "a directory named as a marker", files: map[string]string{"go.mod/": ""}, want: nil},
		{name: "Cargo.toml", files: map[string]string{"Cargo.toml": "[package]"}, want: &protocol.Toolchain{
			Ecosystem: "rust", Marker: "Cargo.toml", Manager: "cargo",
			Install: cmd("cargo", "fetch"), Build: cmd("cargo", "build"), Test: cmd("cargo", "test"),
			Lint: cmd("cargo", "clippy"), Format: cmd("cargo", "fmt"),
		}},
		{name: "Cargo.toml before every other", files: map[string]string{"Cargo.toml": "", "deno.json": "{}", "package.json": "{}", "go.mod": "", "Makefile": "test:\n"}, want: &protocol.Toolchain{
			Ecosystem: "rust", Marker: "Cargo.toml", Manager: "cargo",
			Install: cmd("cargo", "fetch"), Build: cmd("cargo", "build"), Test: cmd("cargo", "test"),
			Lint: cmd("cargo", "clippy"), Format: cmd("cargo", "fmt"),
		}},
		{name: "deno.json", files: map[string]string{"deno.json": "{}"}, want: &protocol.Toolchain{
			Ecosystem: "deno", Marker: "deno.json", Manager: "deno",
			Install: cmd("deno", "install"), Test: cmd("deno", "test"), Lint: cmd("deno", "lint"), Format: cmd("deno", "fmt"),
		}},
		{name: "deno.jsonc before package.json", files: map[string]string{"deno.jsonc": "// c\n{}", "package.json": allScripts}, want: &protocol.Toolchain{
			Ecosystem: "deno", Marker: "deno.jsonc", Manager: "deno",
			Install: cmd("deno", "install"), Test: cmd("deno", "test"), Lint: cmd("deno", "lint"), Format: cmd("deno", "fmt"),
		}},
		{name: "package.json without lockfile or scripts", files: map[string]string{"package.json": `{"name":"x"}`}, want: npm(protocol.Toolchain{})},
		{name: "package.json with package-lock.json", files: map[string]string{"package.json": `{}`, "package-lock.json": "{}"}, want: npm(protocol.Toolchain{Install: cmd("npm", "ci")})},
		{name: "package.json scripts", files: map[string]string{"package.json": allScripts}, want: npm(protocol.Toolchain{
			Build: cmd("npm", "run", "build"), Test: cmd("npm", "run", "test"), Lint: cmd("npm", "run", "lint"),
			Format: cmd("npm", "run", "format"), Run: cmd("npm", "run", "start"),
		})},
		{name: "package.json names only the scripts it has", files: map[string]string{"package.json": `{"scripts":{"test":"jest","fmt":"prettier"}}`}, want: npm(protocol.Toolchain{Test: cmd("npm", "run", "test")})},
		{name: "undecodable package.json", files: map[string]string{"package.json": `{"scripts":{"test":`}, want: npm(protocol.Toolchain{})},
		{name: "bun.lockb", files: map[string]string{"package.json": `{}`, "bun.lockb": "", "yarn.lock": "", "pnpm-lock.yaml": ""}, want: npm(protocol.Toolchain{
			Manager: "bun", Install: cmd("bun", "install"), Test: cmd("bun", "test"),
		})},
		{name: "bun.lock with a test script", files: map[string]string{"package.json": `{"scripts":{"test":"vitest","build":"x"}}`, "bun.lock": ""}, want: npm(protocol.Toolchain{
			Manager: "bun", Install: cmd("bun", "install"), Build: cmd("bun", "run", "build"), Test: cmd("bun", "run", "test"),
		})},
		{name: "pnpm-lock.yaml before yarn.lock", files: map[string]string{"package.json": `{"scripts":{"lint":"eslint"}}`, "pnpm-lock.yaml": "", "yarn.lock": "", "package-lock.json": ""}, want: npm(protocol.Toolchain{
			Manager: "pnpm", Install: cmd("pnpm", "install"), Lint: cmd("pnpm", "run", "lint"),
		})},
		{name: "yarn.lock", files: map[string]string{"package.json": `{"scripts":{"format":"prettier"}}`, "yarn.lock": "", "package-lock.json": ""}, want: npm(protocol.Toolchain{
			Manager: "yarn", Install: cmd("yarn", "install"), Format: cmd("yarn", "run", "format"),
		})},
		{name: "package.json before go.mod", files: map[string]string{"package.json": "{}", "go.mod": ""}, want: npm(protocol.Toolchain{})},
		{name: "go.mod", files: map[string]string{"go.mod": "module x\n"}, want: goMod},
		{name: "go.mod before Makefile", files: map[string]string{"go.mod": "module x\n", "Makefile": "test:\n\tgo test\n"}, want: goMod},
		{name: "pyproject.toml with pip", files: map[string]string{"pyproject.toml": "[project]\n", "requirements.txt": ""}, want: &protocol.Toolchain{
			Ecosystem: "python", Marker: "pyproject.toml", Manager: "pip",
			Install: cmd("python", "-m", "pip", "install", "-e", "."), Test: cmd("python", "-m", "pytest"),
		}},
		{name: "requirements.txt", files: map[string]string{"requirements.txt": "requests\n", "ruff.toml": ""}, want: &protocol.Toolchain{
			Ecosystem: "python", Marker: "requirements.txt", Manager: "pip",
			Install: cmd("python", "-m", "pip", "install", "-r", "requirements.txt"), Test: cmd("python", "-m", "pytest"),
			Lint: cmd("python", "-m", "ruff", "check", "."), Format: cmd("python", "-m", "ruff", "format", "."),
		}},
		{name: "uv.lock with ruff", files: map[string]string{"pyproject.toml": "[tool.ruff.lint]\nselect = []\n", "uv.lock": "", "poetry.lock": ""}, want: &protocol.Toolchain{
			Ecosystem: "python", Marker: "pyproject.toml", Manager: "uv",
			Install: cmd("uv", "sync"), Test: cmd("uv", "run", "pytest"),
			Lint: cmd("uv", "run", "ruff", "check", "."), Format: cmd("uv", "run", "ruff", "format", "."),
		}},
		{name: "poetry.lock with black", files: map[string]string{"pyproject.toml": "[tool.black]\n", "poetry.lock": ""}, want: &protocol.Toolchain{
			Ecosystem: "python", Marker: "pyproject.toml", Manager: "poetry",
			Install: cmd("poetry", "install"), Test: cmd("poetry", "run", "pytest"), Format: cmd("poetry", "run", "black", "."),
		}},
		{name: "pom.xml", files: map[string]string{"pom.xml": "<project/>", "build.gradle": ""}, want: &protocol.Toolchain{
			Ecosystem: "java", Marker: "pom.xml", Manager: "maven", Build: cmd("mvn", "compile"), Test: cmd("mvn", "test"),
		}},
		{name: "pom.xml with mvnw", files: map[string]string{"pom.xml": "<project/>", "mvnw": "#!/bin/sh"}, want: &protocol.Toolchain{
			Ecosystem: "java", Marker: "pom.xml", Manager: "maven", Build: cmd("./mvnw", "compile"), Test: cmd("./mvnw", "test"),
		}},
		{name: "build.gradle", files: map[string]string{"build.gradle": ""}, want: &protocol.Toolchain{
			Ecosystem: "java", Marker: "build.gradle", Manager: "gradle", Build: cmd("gradle", "assemble"), Test: cmd("gradle", "test"),
		}},
		{name: "build.gradle.kts with gradlew", files: map[string]string{"build.gradle.kts": "", "gradlew": ""}, want: &protocol.Toolchain{
			Ecosystem: "java", Marker: "build.gradle.kts", Manager: "gradle", Build: cmd("./gradlew", "assemble"), Test: cmd("./gradlew", "test"),
		}},
		{name: "mix.exs", files: map[string]string{"mix.exs": "", "Makefile": ""}, want: &protocol.Toolchain{
			Ecosystem: "elixir", Marker: "mix.exs", Manager: "mix",
			Install: cmd("mix", "deps.get"), Build: cmd("mix", "compile"), Test: cmd("mix", "test"), Format: cmd("mix", "format"),
		}},
		{name: "Gemfile with spec and rubocop", files: map[string]string{"Gemfile": "", "spec/": "", "Rakefile": "", ".rubocop.yml": ""}, want: &protocol.Toolchain{
			Ecosystem: "ruby", Marker: "Gemfile", Manager: "bundler",
			Install: cmd("bundle", "install"), Test: cmd("bundle", "exec", "rspec"), Lint: cmd("bundle", "exec", "rubocop"),
		}},
		{name: "Gemfile with Rakefile", files: map[string]string{"Gemfile": "", "Rakefile": ""}, want: &protocol.Toolchain{
			Ecosystem: "ruby", Marker: "Gemfile", Manager: "bundler",
			Install: cmd("bundle", "install"), Test: cmd("bundle", "exec", "rake", "test"),
		}},
		{name: "composer.json", files: map[string]string{"composer.json": `{"scripts":{"lint":"phpstan"}}`, "phpunit.xml.dist": ""}, want: &protocol.Toolchain{
			Ecosystem: "php", Marker: "composer.json", Manager: "composer",
			Install: cmd("composer", "install"), Test: cmd("vendor/bin/phpunit"), Lint: cmd("composer", "run-script", "lint"),
		}},
		{name: "composer.json test script", files: map[string]string{"composer.json": `{"scripts":{"test":"phpunit","format":"php-cs-fixer fix"}}`, "phpunit.xml": ""}, want: &protocol.Toolchain{
			Ecosystem: "php", Marker: "composer.json", Manager: "composer",
			Install: cmd("composer", "install"), Test: cmd("composer", "run-script", "test"), Format: cmd("composer", "run-script", "format"),
		}},
		{name: "Package.swift", files: map[string]string{"Package.swift": ""}, want: &protocol.Toolchain{
			Ecosystem: "swift", Marker: "Package.swift", Manager: "swiftpm",
			Install: cmd("swift", "package", "resolve"), Build: cmd("swift", "build"), Test: cmd("swift", "test"),
		}},
		{name: "CMakeLists.txt before Makefile", files: map[string]string{"CMakeLists.txt": "", "Makefile": "test:\n", "App.csproj": ""}, want: &protocol.Toolchain{
			Ecosystem: "cmake", Marker: "CMakeLists.txt", Manager: "cmake",
			Install: cmd("cmake", "-S", ".", "-B", "build"), Build: cmd("cmake", "--build", "build"), Test: cmd("ctest", "--test-dir", "build"),
		}},
		{name: "csproj before sln, first by name", files: map[string]string{"Zed.csproj": "", "App.csproj": "", "All.sln": "", "-x.csproj": "", "Lib.fsproj": "", "Makefile": ""}, want: &protocol.Toolchain{
			Ecosystem: "dotnet", Marker: "App.csproj", Manager: "dotnet",
			Install: cmd("dotnet", "restore", "App.csproj"), Build: cmd("dotnet", "build", "App.csproj"),
			Test: cmd("dotnet", "test", "App.csproj"), Format: cmd("dotnet", "format", "App.csproj"),
		}},
		{name: "fsproj", files: map[string]string{"Lib.fsproj": "", "All.sln": ""}, want: &protocol.Toolchain{
			Ecosystem: "dotnet", Marker: "Lib.fsproj", Manager: "dotnet",
			Install: cmd("dotnet", "restore", "Lib.fsproj"), Build: cmd("dotnet", "build", "Lib.fsproj"),
			Test: cmd("dotnet", "test", "Lib.fsproj"), Format: cmd("dotnet", "format", "Lib.fsproj"),
		}},
		{name: "sln", files: map[string]string{"My App.sln": "", ".sln": "", "sln/": ""}, want: &protocol.Toolchain{
			Ecosystem: "dotnet", Marker: "My App.sln", Manager: "dotnet",
			Install: cmd("dotnet", "restore", "My App.sln"), Build: cmd("dotnet", "build", "My App.sln"),
			Test: cmd("dotnet", "test", "My App.sln"), Format: cmd("dotnet", "format", "My App.sln"),
		}},
		{name: "Makefile without a test target", files: map[string]string{"Makefile": "all:\n\tcc x.c\ntest := no\nA = b:c\n\ttest: recipe\n# test:\n"}, want: &protocol.Toolchain{
			Ecosystem: "make", Marker: "Makefile", Manager: "make", Build: cmd("make"),
		}},
		{name: "Makefile with test, lint and fmt targets", files: map[string]string{"Makefile": ".PHONY: all test\nall: x\nbuild test: x\n\tgo test\nlint::\nfmt:\n"}, want: &protocol.Toolchain{
			Ecosystem: "make", Marker: "Makefile", Manager: "make", Build: cmd("make"),
			Test: cmd("make", "test"), Lint: cmd("make", "lint"), Format: cmd("make", "fmt"),
		}},
		{name: "GNUmakefile with check", files: map[string]string{"GNUmakefile": "check:\r\n", "Makefile": "test:\n"}, want: &protocol.Toolchain{
			Ecosystem: "make", Marker: "GNUmakefile", Manager: "make", Build: cmd("make"), Test: cmd("make", "check"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := detect(t, tree(t, tt.files))
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Detect(%v) differs (-want +got):\n%s", keys(tt.files), d)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestDetectIgnoresSymlinkedMarkers: a marker that is a symbolic link, to a
// file outside the root or inside it, counts as absent, and the next
// marker in order is taken.
func TestDetectIgnoresSymlinkedMarkers(t *testing.T) {
	outside := tree(t, map[string]string{"package.json": `{"scripts":{"test":"steal"}}`, "Cargo.toml": ""})
	tests := []struct {
		name  string
		links map[string]string // name in the root -> target
		files map[string]string
		want  *protocol.Toolchain
	}{
		{
			name:  "only marker links outside",
			links: map[string]string{"package.json": filepath.Join(outside, "package.json")},
			want:  nil,
		},
		{
			name:  "linked marker skipped for the next",
			links: map[string]string{"Cargo.toml": filepath.Join(outside, "Cargo.toml")},
			files: map[string]string{"Makefile": "all:\n"},
			want:  &protocol.Toolchain{Ecosystem: "make", Marker: "Makefile", Manager: "make", Build: cmd("make")},
		},
		{
			name:  "link inside the root",
			links: map[string]string{"go.mod": "real.mod", "Backend.csproj": "real.mod"},
			files: map[string]string{"real.mod": "module x\n"},
			want:  nil,
		},
		{
			name:  "linked lockfile and wrapper not counted",
			links: map[string]string{"pnpm-lock.yaml": filepath.Join(outside, "package.json"), "mvnw": filepath.Join(outside, "Cargo.toml")},
			files: map[string]string{"package.json": "{}"},
			want:  &protocol.Toolchain{Ecosystem: "node", Marker: "package.json", Manager: "npm", Install: cmd("npm", "install")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tree(t, tt.files)
			for name, target := range tt.links {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Skipf("no symbolic links here: %v", err)
				}
			}
			if d := cmp.Diff(tt.want, detect(t, dir)); d != "" {
				t.Errorf("Detect with links %v differs (-want +got):\n%s", tt.links, d)
			}
		})
	}
}

// TestDetectBoundsReads: a file over toolchain.MaxRead still marks its
// ecosystem, and nothing in it is read; one just within the bound is.
func TestDetectBoundsReads(t *testing.T) {
	pad := func(total int, prefix, suffix string) string {
		return prefix + strings.Repeat(" ", total-len(prefix)-len(suffix)) + suffix
	}
	tests := []struct {
		name  string
		files map[string]string
		want  *protocol.Toolchain
	}{
		{
			name:  "package.json at the bound",
			files: map[string]string{"package.json": pad(toolchain.MaxRead, `{"scripts":{"test":"jest"}`, `}`)},
			want:  &protocol.Toolchain{Ecosystem: "node", Marker: "package.json", Manager: "npm", Install: cmd("npm", "install"), Test: cmd("npm", "run", "test")},
		},
		{
			name:  "package.json over the bound",
			files: map[string]string{"package.json": pad(toolchain.MaxRead+1, `{"scripts":{"test":"jest"}`, `}`)},
			want:  &protocol.Toolchain{Ecosystem: "node", Marker: "package.json", Manager: "npm", Install: cmd("npm", "install")},
		},
		{
			name:  "Makefile over the bound",
			files: map[string]string{"Makefile": pad(4*toolchain.MaxRead, "test:\n", "\n")},
			want:  &protocol.Toolchain{Ecosystem: "make", Marker: "Makefile", Manager: "make", Build: cmd("make")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, detect(t, tree(t, tt.files))); d != "" {
				t.Errorf("Detect differs (-want +got):\n%s", d)
			}
		})
	}
}

// TestDetectUnreadableRoot: a file system whose root cannot be read has no
// markers.
func TestDetectUnreadableRoot(t *testing.T) {
	if got := toolchain.Detect(os.DirFS(filepath.Join(t.TempDir(), "missing"))); got != nil {
		t.Errorf("Detect(missing dir) = %+v, want nil", got)
	}
	var empty fs.FS = os.DirFS(t.TempDir())
	if got := toolchain.Detect(empty); got != nil {
		t.Errorf("Detect(empty dir) = %+v, want nil", got)
	}
}
