package documents

import "syscall"

// childAttr has a document operation's child killed with its parent.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// prSetDumpable is prctl's PR_SET_DUMPABLE.
const prSetDumpable = 4

// hideChild makes the child undumpable: not to be read through /proc or
// traced by another process of its user.
func hideChild() { _, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0) }
