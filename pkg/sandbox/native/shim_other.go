//go:build !linux || !(amd64 || arm64)

package native

// RunShimIfRequested does nothing here: the native backend, which
// re-executes the program as a sandbox's init, needs Linux on amd64 or
// arm64. Programs call it first thing in main on every system.
func RunShimIfRequested() {}
