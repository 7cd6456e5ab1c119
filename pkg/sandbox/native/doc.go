// Package native is the sandbox backend of Linux: each command runs in new
// mount, PID, UTS, IPC and network namespaces, in a private root where only
// the workspace and a private /tmp are writable, with no capabilities,
// Landlock and seccomp where the kernel has them, memory and pids caps in
// cgroups (v2, or v1 on hybrid hosts), and RLIMIT_CPU and RLIMIT_NOFILE.
// Everything the command started dies with it, daemons included. See
// [Backend] for the details.
//
// Every command runs under a sandbox's init: harness-sandbox-init
// (cmd/harness-sandbox-init, [InitMain]) when it is beside the program
// ([Config].Init), else a copy of the program's own binary started again,
// so a program that uses the backend calls [RunShimIfRequested] first thing
// in main (and a test package in TestMain), where that copy turns into the
// init before anything else runs. The small init starts a sandbox several
// times faster; it must be of the program's build, which [New] checks.
// [New] probes the machine once and returns [ErrUnavailable], wrapped and
// saying what is missing, where the backend cannot run; a caller then
// falls back to another backend. Close a [Backend] when done.
//
// A command that may use the network gets a route out of its own network
// namespace through slirp4netns ([Config].NetworkHelper), with the host's
// loopback out of reach; without slirp4netns such a command is refused. A
// shared Go build cache ([Config].GoCache) is read through a private
// overlay.
package native
