//go:build linux && (amd64 || arm64)

package native

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Landlock system calls and constants (linux/landlock.h).
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446

	landlockCreateRulesetVersion = 1 << 0
	landlockRulePathBeneath      = 1

	llExecute    = 1 << 0
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llRemoveDir  = 1 << 4
	llRemoveFile = 1 << 5
	llMakeChar   = 1 << 6
	llMakeDir    = 1 << 7
	llMakeReg    = 1 << 8
	llMakeSock   = 1 << 9
	llMakeFifo   = 1 << 10
	llMakeBlock  = 1 << 11
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5

	llScopeAbstractUnixSocket = 1 << 0 // ABI 6
)

// landlockABI returns the Landlock ABI version the kernel offers, or 0.
func landlockABI() int {
	v, _, e := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, landlockCreateRulesetVersion)
	if e != 0 {
		return 0
	}
	return int(v)
}

// landlockHandled is every filesystem right Landlock ABI abi knows.
func landlockHandled(abi int) uint64 {
	r := uint64(llExecute | llWriteFile | llReadFile | llReadDir | llRemoveDir | llRemoveFile |
		llMakeChar | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym)
	if abi >= 2 {
		r |= llRefer
	}
	if abi >= 3 {
		r |= llTruncate
	}
	if abi >= 5 {
		r |= llIoctlDev
	}
	return r
}

// landlockRestrict confines the calling thread (and what it forks) with
// Landlock ABI abi: everything may be read and executed; the null devices
// may be written; the writable trees may be changed freely. With ABI 6 it
// also scopes abstract Unix sockets, so that the command cannot reach the
// host's when it shares the host's network namespace. no_new_privs must
// already be set.
func landlockRestrict(abi int, writable []string) error {
	handled := landlockHandled(abi)
	attr := struct{ fs, net, scoped uint64 }{fs: handled}
	size := unsafe.Sizeof(uint64(0)) // ABI 1-3: handled_access_fs only
	switch {
	case abi >= 6:
		attr.scoped = llScopeAbstractUnixSocket
		size = unsafe.Sizeof(attr)
	case abi >= 4:
		size = 2 * unsafe.Sizeof(uint64(0))
	}
	fd, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("create ruleset: %w", e)
	}
	defer syscall.Close(int(fd))
	read := uint64(llExecute | llReadFile | llReadDir)
	devices := read | llWriteFile | (handled & (llTruncate | llIoctlDev))
	rules := []struct {
		path   string
		access uint64
	}{{"/", read}, {"/dev", devices}}
	for _, w := range writable {
		rules = append(rules, struct {
			path   string
			access uint64
		}{w, handled})
	}
	for _, r := range rules {
		pfd, err := syscall.Open(r.path, oPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", r.path, err)
		}
		// struct landlock_path_beneath_attr is packed: u64 then s32.
		var rule [12]byte
		*(*uint64)(unsafe.Pointer(&rule[0])) = r.access
		*(*int32)(unsafe.Pointer(&rule[8])) = int32(pfd)
		_, _, e := syscall.Syscall6(sysLandlockAddRule, fd, landlockRulePathBeneath, uintptr(unsafe.Pointer(&rule[0])), 0, 0, 0)
		syscall.Close(pfd)
		if e != 0 {
			return fmt.Errorf("add the rule for %s: %w", r.path, e)
		}
	}
	if _, _, e := syscall.Syscall(sysLandlockRestrictSelf, fd, 0, 0); e != 0 {
		return fmt.Errorf("restrict: %w", e)
	}
	return nil
}
