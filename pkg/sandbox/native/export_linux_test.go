//go:build linux && (amd64 || arm64)

package native

// KillRest is killRest, for TestShimKillsOnlyAsPID1.
var KillRest = killRest
