// Command sandboxer runs the harness sandboxer role against a NATS server:
// it serves the workspaces under its roots, and workspaces carried as
// snapshots, running tools and verification commands for the runs that
// open them. A sandboxer with tools of an embedder's own is this with
// command.Main given them (examples/custom-tool).
//
// Usage: sandboxer [--nats URL] [--id ID] [--root DIR]... [--max-concurrent N] [--backends native,docker,floor] [--snapshots DIR] [--metrics ADDR] [--version]
// The NATS URL defaults to $NATS_URL, then nats://127.0.0.1:4222; the roots
// default to the working directory.
package main

import "github.com/ioharness/harness/pkg/sandboxer/command"

func main() { command.Main() }
