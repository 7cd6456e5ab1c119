//go:build !linux

package procguard

// Protect does nothing on this system: it has no dumpable flag to clear
// and no /proc to hide an environment from. See the Linux version.
func Protect() error { return nil }
