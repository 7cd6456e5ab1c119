package floor

import (
	"os/exec"
	"syscall"
	"unsafe"

	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

// floorRlimits: the floor applies RLIMIT_CPU and RLIMIT_NOFILE here.
const floorRlimits = true

// setLimit sets a resource limit of the running process pid with
// prlimit(2). A hard limit above the current one (which needs
// CAP_SYS_RESOURCE) is lowered to the current one.
func setLimit(pid, resource int, soft, hard uint64) error {
	var old syscall.Rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), 0, uintptr(unsafe.Pointer(&old)), 0, 0); e != 0 {
		return e
	}
	hard = min(hard, old.Max)
	soft = min(soft, hard)
	lim := syscall.Rlimit{Cur: soft, Max: hard}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// leader is the command's first process, the leader of its group.
type leader struct {
	cmd *exec.Cmd
}

// waitExit returns once the leader has exited, without reaping it: while
// it is a zombie its pid (the group id) cannot be reused, so the group can
// be killed safely afterwards.
func (l *leader) waitExit() {
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, process.PPID, uintptr(l.cmd.Process.Pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// reap collects the leader's exit status into cmd.ProcessState.
func (l *leader) reap() {
	_ = l.cmd.Wait() // a non-zero exit is an *exec.ExitError; the status is in ProcessState
}

// startAttr is how Start starts a long-lived command: in a group of its
// own, killed when the sandboxer's process dies.
func startAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
