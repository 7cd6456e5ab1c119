//go:build unix && !linux

package floor

import (
	"errors"
	"os/exec"
	"syscall"
)

// floorRlimits: the floor applies no rlimits here.
const floorRlimits = false

// setLimit is not available here: the floor reports "cpu" and
// "open_files" as unenforced.
func setLimit(pid, resource int, soft, hard uint64) error {
	return errors.ErrUnsupported
}

// leader is the command's first process, the leader of its group.
type leader struct {
	cmd *exec.Cmd
}

// waitExit waits for the leader and reaps it. Without waitid(WNOWAIT) the
// group is swept after the reap, leaving a short window in which the
// group id could be reused.
func (l *leader) waitExit() { _ = l.cmd.Wait() }

// reap does nothing: waitExit already reaped.
func (l *leader) reap() {}

// startAttr is how Start starts a long-lived command: in a group of its
// own. This system has no parent-death signal: a sandboxer that dies
// leaves its servers running.
func startAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
