// Package floor is the portable last resort among the sandbox backends: a
// plain child process in its own process group, with no shell, a null
// stdin, exactly the environment it is given, a wall-clock cap that kills
// the whole group, and (on Linux) RLIMIT_CPU and RLIMIT_NOFILE applied
// with prlimit(2) right after the child starts.
//
// It is not a security boundary: the command runs with the sandboxer's
// privileges and sees the whole filesystem and the network. Memory,
// process-count and network caps are not enforced and are listed in
// Report.Unenforced, and every report says it ran unsandboxed. A process
// that calls setsid(2) leaves the process group and survives the group
// kill. A sandboxer runs commands here only when its operator allows it
// (sandboxer.Config.AllowFloor). See [Backend].
package floor
