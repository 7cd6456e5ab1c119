// Package tools holds the tools an agent uses on a sandboxer: grep, find,
// read_file, write_file, edit_file and exec ([Builtins]), view_image, the
// git tools git_status, git_diff, git_log, git_add and git_commit ([Git]),
// and the workspace they are confined to.
//
// A caller's steps:
//
//  1. Open the run's directory with [OpenWorkspace] (and Close it when the
//     run detaches).
//  2. Build an [Env]: the workspace, the sandbox backend exec runs through,
//     the command caps, the command environment (sandbox.MinimalEnv), the
//     observation size cap and, optionally, a Judge hook that every file
//     tool asks about each path it would touch (link targets included)
//     and that grep and find consult to leave out, silently, what the
//     policy hides.
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
// root), and is then walked one name at a time inside the root by
// [Workspace.ResolveLinks], as the kernel would walk it: every symbolic
// link on the way (a file link, a directory link in the middle of the
// path, a chain) is read and replaced by its target, a target that is
// absolute or climbs above the root is refused, and more than [MaxLinks]
// links is taken for a loop. Each path the walk passes through is put to
// Env.Judge before a byte is touched, so a link is judged by where it
// leads as well as by its name, strictest wins; the file is then opened by
// its resolved path with no link followed at any step (on Linux, openat
// with O_NOFOLLOW from the root's own descriptor, so a link put in place
// after the judging makes the open fail). The file tools further refuse
// directories, FIFOs, devices and sockets (opened with O_NONBLOCK, then
// checked with fstat) and regular files with more than one hard link,
// which may be links to files outside or to files the policy denies. grep
// and find never follow symbolic links; find lists a link only when every
// path of its resolution may be read.
//
// exec is not confined this way: its command runs with whatever the
// sandbox backend allows, in the workspace directory. File rules do not
// constrain commands.
//
// The git tools run one fixed git command each, through Env.Sandbox: the
// model gives paths (checked by Resolve and judged as the file tools'
// are, none in a .git directory, each a literal name after "--") and a
// message (one argv element), never a subcommand or a flag, and git reads
// no configuration of the repository's, so no hook or filter it names
// runs. git_commit signs with Env.GitAuthor, which comes from the
// contract, and is refused without it.
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
// run) belong to the coordinator and are made, on the names a call gives,
// before it reaches a tool. Only the tools see where a name really leads,
// so the sandboxer passes the same policy as the Judge hook; this package
// knows nothing of policies itself.
package tools
