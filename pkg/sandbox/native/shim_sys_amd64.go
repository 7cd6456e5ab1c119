//go:build linux

package native

// System call numbers and constants of linux/amd64 that package syscall
// lacks or that the seccomp filter needs.
const (
	auditArch      = 0xc000003e // AUDIT_ARCH_X86_64
	x32Bit         = 0x40000000 // __X32_SYSCALL_BIT: x32 calls are refused
	seccompSyscall = 317
	sysClone       = 56
	oPath          = 0x200000 // O_PATH
	sysMemfdCreate = 319
)

// seccompDenied are the system calls a sandboxed command is refused with
// EPERM. Most need capabilities the command does not have anyway; the
// filter is a second layer that also closes what uid 0 could do without
// them (the kernel keyrings shared by every uid-0 process, the kernel log)
// and the kernel surface of new namespaces: clone with a CLONE_NEW* flag
// is refused too, and clone3, whose flags a filter cannot read, fails with
// ENOSYS so that C libraries fall back to clone.
var seccompDenied = []uint32{
	250, 248, 249, // keyctl, add_key, request_key
	321, 298, 323, // bpf, perf_event_open, userfaultfd
	246, 320, // kexec_load, kexec_file_load
	175, 313, 176, // init_module, finit_module, delete_module
	165, 166, 155, // mount, umount2, pivot_root
	428, 429, 430, 431, 432, 433, 442, // open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr
	167, 168, 169, 163, // swapon, swapoff, reboot, acct
	179, 103, 304, // quotactl, syslog, open_by_handle_at
	272, 308, // unshare, setns
}
