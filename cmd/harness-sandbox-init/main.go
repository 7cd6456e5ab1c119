// Command harness-sandbox-init is the init of a native sandbox and nothing
// else: a sandboxer (or the harness command line, running the embedded
// default) starts it for each sandbox, as PID 1 of the sandbox's own
// namespaces, to assemble the sandbox's root, confine and start the
// command, reap it and report how it ended.
//
// Put it beside the sandboxer (go build -o bin/ ./cmd/... does): the
// native backend finds it there and starts it instead of the sandboxer's
// own binary, whose start-up, every package of a large program
// initialised, is most of a sandbox's cost. Without it the sandboxer
// starts itself, which confines the same, more slowly. Install the one
// built with the sandboxer: with one of another build the sandboxer
// starts itself instead and logs why. Keep its directory out of every
// workspace (a sandboxer refuses a workspace that overlaps it). With
// --build it prints the build of its code and exits 0, with --version the
// line every binary's --version prints; run by hand otherwise, it exits 2.
package main

import (
	"fmt"
	"os"

	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("harness-sandbox-init " + version.Get().String())
		return
	}
	native.InitMain()
}
