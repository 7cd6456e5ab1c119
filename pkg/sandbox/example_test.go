//go:build linux

package sandbox_test

import (
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/sandbox"
)

func ExampleMinimalEnv() {
	os.Setenv("OPENAI_API_KEY", "sk-example") // a secret in the sandboxer's environment
	defer os.Unsetenv("OPENAI_API_KEY")
	for _, kv := range sandbox.MinimalEnv("GOFLAGS=-mod=mod") {
		if kv == "GOFLAGS=-mod=mod" || kv == "OPENAI_API_KEY=sk-example" {
			fmt.Println(kv)
		}
	}
	// Output:
	// GOFLAGS=-mod=mod
}
