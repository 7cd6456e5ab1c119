//go:build linux && (amd64 || arm64)

package native

import (
	"syscall"
	"unsafe"
)

// Classic BPF and seccomp constants (linux/filter.h, linux/seccomp.h).
const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK    = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK   = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	secRetAllw = 0x7fff0000
	secRetErr  = 0x00050000

	seccompSetModeFilter = 1

	// Offsets in struct seccomp_data.
	seccompNr    = 0
	seccompArch  = 4
	seccompArg0  = 16
	nsCloneFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC |
		syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET
)

// sysClone3 is clone3(2), the same number on every architecture.
const sysClone3 = 435

// seccompSupported reports whether this kernel and architecture take the
// filter.
func seccompSupported() bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prGetSeccomp, 0, 0)
	return e == 0
}

// seccompProgram assembles the filter.
func seccompProgram() []sockFilter {
	ret := func(v uint32) sockFilter { return sockFilter{code: bpfRetK, k: v} }
	p := []sockFilter{
		{code: bpfLdWAbs, k: seccompArch},
		{code: bpfJeqK, jt: 1, k: auditArch},
		ret(secRetErr | uint32(syscall.ENOSYS)), // another ABI (i386 on x86_64)
		{code: bpfLdWAbs, k: seccompNr},
	}
	if x32Bit != 0 {
		p = append(p, sockFilter{code: bpfJgeK, jf: 1, k: x32Bit}, ret(secRetErr|uint32(syscall.ENOSYS)))
	}
	for _, nr := range seccompDenied {
		p = append(p, sockFilter{code: bpfJeqK, jf: 1, k: nr}, ret(secRetErr|uint32(syscall.EPERM)))
	}
	p = append(p,
		sockFilter{code: bpfJeqK, jf: 1, k: sysClone3}, ret(secRetErr|uint32(syscall.ENOSYS)),
		sockFilter{code: bpfJeqK, jf: 3, k: sysClone},
		sockFilter{code: bpfLdWAbs, k: seccompArg0}, // low half of the flags
		sockFilter{code: bpfJsetK, jf: 1, k: nsCloneFlags},
		ret(secRetErr|uint32(syscall.EPERM)),
		ret(secRetAllw),
	)
	return p
}

// sockFilter is struct sock_filter.
type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompInstall installs the filter on the calling thread (not the
// others: no TSYNC). no_new_privs must already be set.
func seccompInstall() error {
	p := seccompProgram()
	prog := struct {
		n      uint16
		filter *sockFilter
	}{uint16(len(p)), &p[0]}
	if _, _, e := syscall.RawSyscall(seccompSyscall, seccompSetModeFilter, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return e
	}
	return nil
}
