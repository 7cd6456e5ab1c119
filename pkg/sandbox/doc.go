// Package sandbox runs one command for a tool call or a verification gate
// and reports, honestly, how it ran.
//
// A [Backend] takes a [Spec] (argv, working directory, environment, caps,
// network permission) and returns a [Result]: the [protocol.ExecReport]
// (which backend ran it, whether it exited on its own, its exit code or
// signal, which cap ended it, which caps were not enforced) and its output,
// each stream bounded head and tail with a stated elision line.
//
// A caller's steps:
//
//  0. For the native backend, call [RunShimIfRequested] first thing in
//     main (and in TestMain of tests that use it): [Native] runs every
//     command under a copy of the program's own binary, started again as
//     the sandbox's init, and that copy must turn into the init before
//     anything else runs.
//  1. Pick a backend once at start-up: [NewNative], or the docker backend,
//     or [NewFloor] as the last resort. They implement the same interface,
//     pass the same conformance suite
//     ([github.com/ioharness/harness/pkg/sandbox/sandboxtest]) and declare
//     what they enforce ([Enforcer]). Close a [Native] when done.
//  2. Build the environment with [MinimalEnv], never from os.Environ, so
//     that API keys and tokens held by the sandboxer never reach a command.
//  3. Call [Backend.Run] for each command. An error means the command was
//     never started (a *protocol.Error: CodeNotFound for a missing program,
//     CodeSandbox otherwise); a command that ran and failed is a Result.
//  4. Read Report.CapHit and Report.Unenforced before trusting the outcome:
//     a cap listed in Unenforced did not protect anything.
//
// # The native backend
//
// [Native] (Linux) runs each command in new mount, PID, UTS, IPC and
// network namespaces, in a private root where only the workspace and a
// private /tmp are writable, with no capabilities, Landlock and seccomp
// where the kernel has them, memory and pids caps in cgroups (v2, or v1 on
// hybrid hosts), and RLIMIT_CPU and RLIMIT_NOFILE. Everything the command
// started dies with it, daemons included. See [Native] for the details.
//
// # What the floor does and does not do
//
// [Floor] is the portable last resort: a plain child process in its own
// process group, with no shell, a null stdin, exactly the environment it is
// given, a wall-clock cap that kills the whole group, and (on Linux)
// RLIMIT_CPU and RLIMIT_NOFILE applied with prlimit(2) right after the
// child starts. It is not a security boundary: the command runs with the
// sandboxer's privileges and sees the whole filesystem and the network.
// Memory, process-count and network caps are not enforced and are listed in
// Report.Unenforced. A process that calls setsid(2) leaves the process
// group and survives the group kill.
package sandbox
