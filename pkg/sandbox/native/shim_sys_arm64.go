//go:build linux

package native

// System call numbers and constants of linux/arm64 that package syscall
// lacks or that the seccomp filter needs.
const (
	auditArch      = 0xc00000b7 // AUDIT_ARCH_AARCH64
	x32Bit         = 0
	seccompSyscall = 277
	sysClone       = 220
	oPath          = 0x200000 // O_PATH
	sysMemfdCreate = 279
)

// seccompDenied: see shim_sys_amd64.go.
var seccompDenied = []uint32{
	219, 217, 218, // keyctl, add_key, request_key
	280, 241, 282, // bpf, perf_event_open, userfaultfd
	104, 294, // kexec_load, kexec_file_load
	105, 273, 106, // init_module, finit_module, delete_module
	40, 39, 41, // mount, umount2, pivot_root
	428, 429, 430, 431, 432, 433, 442, // open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr
	224, 225, 142, 89, // swapon, swapoff, reboot, acct
	60, 116, 265, // quotactl, syslog, open_by_handle_at
	97, 268, // unshare, setns
}
