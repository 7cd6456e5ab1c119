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
//  1. Pick a backend once at start-up ([NewFloor] today; native and docker
//     backends implement the same interface and pass the same conformance
//     suite, [github.com/ioharness/harness/pkg/sandbox/sandboxtest]).
//  2. Build the environment with [MinimalEnv], never from os.Environ, so
//     that API keys and tokens held by the sandboxer never reach a command.
//  3. Call [Backend.Run] for each command. An error means the command was
//     never started (a *protocol.Error: CodeNotFound for a missing program,
//     CodeSandbox otherwise); a command that ran and failed is a Result.
//  4. Read Report.CapHit and Report.Unenforced before trusting the outcome:
//     a cap listed in Unenforced did not protect anything.
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
