package sandbox

import (
	"os/exec"
	"syscall"
	"time"
	"unsafe"
)

// pPID is P_PID for waitid(2).
const pPID = 1

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
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(l.cmd.Process.Pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// reap collects the leader's exit status into cmd.ProcessState.
func (l *leader) reap() {
	_ = l.cmd.Wait() // a non-zero exit is an *exec.ExitError; the status is in ProcessState
}

// processCPU returns the CPU time (user plus system) of process pid
// itself, not counting its children, as RLIMIT_CPU measures it: the
// process's raw PROF clock, which can run a few percent ahead of the
// scaled times /proc and getrusage show. It works on a zombie not yet
// reaped, and returns 0 when pid cannot be read.
func processCPU(pid int) time.Duration {
	// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_PROF) of linux/posix-timers.h.
	clk := (^int32(pid)) << 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clk), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
