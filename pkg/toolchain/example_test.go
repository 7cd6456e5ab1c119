package toolchain_test

import (
	"fmt"
	"slices"
	"testing/fstest"

	"github.com/ioharness/harness/pkg/toolchain"
)

func ExampleDetect() {
	root := fstest.MapFS{
		"package.json":   {Data: []byte(`{"scripts": {"test": "vitest", "build": "tsc"}}`)},
		"pnpm-lock.yaml": {Data: []byte("lockfileVersion: '9.0'\n")},
	}
	t := toolchain.Detect(root)
	fmt.Println(t.Ecosystem, t.Manager, t.Test)
	// Output: node pnpm [pnpm run test]
}

func ExampleDescribe() {
	t := toolchain.Detect(fstest.MapFS{"go.mod": {Data: []byte("module example.com/m\n")}})
	// The run's policy lets only go itself run.
	allowed := func(argv []string) bool { return argv[0] == "go" && !slices.Contains(argv, "mod") }
	fmt.Println(toolchain.Describe(t, allowed))
	// Output: The workspace looks like a Go module (go.mod). Conventional commands, defaults not instructions: build `go build ./...`; test `go test ./...`; lint `go vet ./...`.
}
