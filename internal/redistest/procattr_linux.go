package redistest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill redis-server if the test binary dies
// before its cleanup runs (a panic, a timeout), so no server outlives it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
