// Package tools holds the tools an agent uses on a sandboxer: grep, find,
// read_file, write_file, edit_file and exec, and the workspace they are
// confined to.
//
// A caller's steps:
//
//  1. Open the run's directory with [OpenWorkspace] (and Close it when the
//     run detaches).
//  2. Build an [Env]: the workspace, the sandbox backend exec runs through,
//     the command caps, the command environment (sandbox.MinimalEnv), the
//     observation size cap and, optionally, an Allow hook that grep and
//     find consult so that files the policy denies are silently left out.
//  3. Offer [Builtins] (or a [Set] from [NewSet]) to the model with
//     [Set.Specs]; for each call, look the tool up with [Set.Get] and
//     [Tool.Invoke] it with the model's JSON arguments.
//  4. An [Output] becomes the observation; an error is a failed call the
//     model reads: a *protocol.Error whose message says what was refused and
//     what to do instead. The end of the call's context is returned as
//     ctx.Err(), wrapped: the call was abandoned, not failed.
//
// # Confinement
//
// Every path goes through [Workspace.Resolve], a lexical check (no empty,
// absolute, over-long or NUL/newline-bearing paths, no ".." above the
// root), and then through an os.Root, which refuses at each kernel call a
// path that leaves the directory through ".." or a symbolic link (and any
// symbolic link with an absolute target). The file tools further refuse
// directories, FIFOs, devices and sockets (opened with O_NONBLOCK, then
// checked with fstat) and regular files with more than one hard link,
// which may be links to files outside. grep and find never follow
// symbolic links.
//
// exec is not confined this way: its command runs with whatever the
// sandbox backend allows, in the workspace directory. File rules do not
// constrain commands.
//
// # Errors
//
// Besides the errors each Invoke lists, every built-in tool may return:
// CodeBadArguments when the arguments are not a JSON object, name an
// argument the tool does not have, give one the wrong JSON type, or leave a
// required one out (Field names the argument; the message gives the
// expected shape); CodeUnsupported when Env has no workspace, or when the
// sandboxer lacks the permission or the space for a file operation; and
// CodeInternal for any other I/O failure.
//
// Policy decisions (may this path be read or written, may this program
// run) belong to the coordinator and are made before a call reaches a
// tool; the Allow hook exists only so that grep and find do not name or
// show files the policy hides.
package tools
