//go:build !linux || !(amd64 || arm64)

package native

import (
	"fmt"
	"os"
)

// RunShimIfRequested does nothing here: the native backend, which
// re-executes the program as a sandbox's init, needs Linux on amd64 or
// arm64. Programs call it first thing in main on every system.
func RunShimIfRequested() {}

// InitMain says that a native sandbox needs Linux on amd64 or arm64, and
// exits 2: harness-sandbox-init has nothing to do here.
func InitMain() {
	fmt.Fprintln(os.Stderr, "harness-sandbox-init is the init of a native sandbox, which needs Linux on amd64 or arm64")
	os.Exit(2)
}
