// Package sandbox runs one command for a tool call or a verification gate
// and reports, honestly, how it ran. It holds the contract between a
// caller and the backends that run commands; the backends live in
// packages of their own beneath it, as Nomad's drivers do:
//
//   - [github.com/ioharness/harness/pkg/sandbox/native]: Linux namespaces,
//     cgroups, Landlock and seccomp, the best isolation this module has;
//   - [github.com/ioharness/harness/pkg/sandbox/docker]: a container per
//     command on the machine's Docker engine (the only package that links
//     the Docker client);
//   - [github.com/ioharness/harness/pkg/sandbox/floor]: a plain child
//     process, the portable last resort, which isolates nothing.
//
// A [Backend] takes a [Spec] (argv, working directory, environment, caps,
// network permission) and returns a [Result]: the [protocol.ExecReport]
// (which backend ran it, whether it exited on its own, its exit code or
// signal, which cap ended it, which caps were not enforced) and its output,
// each stream bounded head and tail with a stated elision line.
//
// A caller's steps:
//
//  0. For the native backend, call native.RunShimIfRequested first thing
//     in main (and in TestMain of tests that use it): without
//     harness-sandbox-init beside the program, the native backend runs
//     every command under a copy of the program's own binary, started
//     again as the sandbox's init, and that copy must turn into the init
//     before anything else runs.
//  1. Pick a backend once at start-up: native.New, or docker.New, or
//     floor.New as the last resort. They implement the same interface,
//     pass the same conformance suite
//     ([github.com/ioharness/harness/pkg/sandbox/sandboxtest]) and declare
//     what they enforce ([Enforcer]). A backend with state of its own says
//     so by the optional interfaces [Reconciler], [Closer] and
//     [Shutdowner]: reconcile it at start, close or shut it down at the
//     end.
//  2. Build the environment with [MinimalEnv], never from os.Environ, so
//     that API keys and tokens held by the sandboxer never reach a command.
//  3. Call [Backend.Run] for each command, in a context that names its run
//     ([WithRun]). An error means the command was never started (a
//     *protocol.Error: CodeNotFound for a missing program, CodeSandbox
//     otherwise); a command that ran and failed is a Result.
//  4. Read Report.CapHit and Report.Unenforced before trusting the outcome:
//     a cap listed in Unenforced did not protect anything.
//
// A backend of its own (in another module, say) builds on what this
// package shares with the backends here: [CheckSpec] for the errors every
// backend returns before it starts anything, [LimitsOf] for the caps with
// their defaults, [Capture] for bounded output, [SignalName] for the
// report's signal.
package sandbox
