//go:build !linux

package documents

import "syscall"

// childAttr is empty where the kernel has no parent-death signal: the
// child ends with its operation's time limit.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// hideChild does nothing where there is no prctl.
func hideChild() {}
