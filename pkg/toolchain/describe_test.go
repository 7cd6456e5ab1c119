package toolchain_test

import (
	"slices"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/toolchain"
)

func TestDescribe(t *testing.T) {
	goMod := &protocol.Toolchain{
		Ecosystem: "go", Marker: "go.mod", Manager: "go",
		Install: cmd("go", "mod", "download"),
		Build:   cmd("go", "build", "./..."),
		Test:    cmd("go", "test", "./..."),
		Lint:    cmd("go", "vet", "./..."),
		Format:  cmd("gofmt", "-l", "."),
	}
	all := func([]string) bool { return true }
	program := func(names ...string) func([]string) bool {
		return func(argv []string) bool { return slices.Contains(names, argv[0]) }
	}
	tests := []struct {
		name    string
		t       *protocol.Toolchain
		allowed func([]string) bool
		want    string
	}{
		{name: "nil toolchain", t: nil, allowed: all, want: ""},
		{name: "nil check allows nothing", t: goMod, allowed: nil, want: ""},
		{name: "nothing allowed", t: goMod, allowed: func([]string) bool { return false }, want: ""},
		{
			name: "everything allowed", t: goMod, allowed: all,
			want: "The workspace looks like a Go module (go.mod). Conventional commands, defaults not instructions: " +
				"install `go mod download`; build `go build ./...`; test `go test ./...`; lint `go vet ./...`; format `gofmt -l .`.",
		},
		{
			name: "only what the policy allows", t: goMod,
			allowed: func(argv []string) bool { return argv[0] == "go" && argv[1] != "mod" },
			want: "The workspace looks like a Go module (go.mod). Conventional commands, defaults not instructions: " +
				"build `go build ./...`; test `go test ./...`; lint `go vet ./...`.",
		},
		{
			name: "node names its manager",
			t: &protocol.Toolchain{Ecosystem: "node", Marker: "package.json", Manager: "pnpm",
				Install: cmd("pnpm", "install"), Test: cmd("pnpm", "run", "test"), Run: cmd("pnpm", "run", "start")},
			allowed: program("pnpm"),
			want: "The workspace looks like a Node.js package (package.json, managed with pnpm). Conventional commands, defaults not instructions: " +
				"install `pnpm install`; test `pnpm run test`; run `pnpm run start`.",
		},
		{
			name: "words quoted as a shell would read them",
			t: &protocol.Toolchain{Ecosystem: "dotnet", Marker: "My App.sln", Manager: "dotnet",
				Build: cmd("dotnet", "build", "My App.sln"), Test: cmd("dotnet", "test", "it's.sln")},
			allowed: all,
			want: "The workspace looks like a .NET project (My App.sln). Conventional commands, defaults not instructions: " +
				"build `dotnet build 'My App.sln'`; test `dotnet test 'it'\\''s.sln'`.",
		},
		{
			name: "cmake configures",
			t: &protocol.Toolchain{Ecosystem: "cmake", Marker: "CMakeLists.txt", Manager: "cmake",
				Install: cmd("cmake", "-S", ".", "-B", "build"), Build: cmd("cmake", "--build", "build")},
			allowed: program("cmake"),
			want: "The workspace looks like a CMake project (CMakeLists.txt). Conventional commands, defaults not instructions: " +
				"configure `cmake -S . -B build`; build `cmake --build build`.",
		},
		{
			name:    "words that cannot be shown are left out, with an odd marker",
			t:       &protocol.Toolchain{Ecosystem: "weird eco", Marker: "a`b", Build: cmd("make", "x`rm -rf`"), Test: cmd("make", "a\nb"), Lint: cmd("make", "lint")},
			allowed: all,
			want:    "The workspace looks like a project. Conventional commands, defaults not instructions: lint `make lint`.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toolchain.Describe(tt.t, tt.allowed); got != tt.want {
				t.Errorf("Describe(%+v) =\n%q\nwant\n%q", tt.t, got, tt.want)
			}
		})
	}
}

// TestDescribeKeepsItsCommands: the check is given a copy; what it does to
// it changes neither the toolchain nor the text.
func TestDescribeKeepsItsCommands(t *testing.T) {
	tc := &protocol.Toolchain{Ecosystem: "go", Marker: "go.mod", Build: cmd("go", "build", "./...")}
	got := toolchain.Describe(tc, func(argv []string) bool {
		argv[0] = "rm"
		return true
	})
	if want := "The workspace looks like a Go module (go.mod). Conventional commands, defaults not instructions: build `go build ./...`."; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if tc.Build[0] != "go" {
		t.Errorf("Describe let the check change the toolchain: Build = %q", tc.Build)
	}
}
