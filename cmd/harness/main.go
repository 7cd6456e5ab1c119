// Command harness is the user's command line for harness: run a contract on
// the embedded default, bring up a whole cluster in one process, submit to a
// cluster, and read the status and trace of any run. `harness help` lists
// the commands; `harness COMMAND --help` describes one.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/ioharness/harness/internal/procguard"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// Exit codes. 0 is success or finished; the outcome codes are stable and
// documented in the README and `harness help`.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitStepCap   = 3
	exitTime      = 4
	exitCost      = 5
	exitCeiling   = 6
	exitPaused    = 7
	exitDenied    = 8
	exitStalled   = 9
	exitEscalated = 10
	exitCancelled = 11
	exitFailed    = 12
	// exitModelRefused is a run the model refused (model_refused).
	exitModelRefused = 13
	// exitInterrupted is a command stopped by Ctrl-C (128 + SIGINT): the
	// run it waited on goes on, or stays resumable.
	exitInterrupted = 130
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environ, args []string) int
}

var commands = []command{
	{"run", "run a contract to its outcome on the embedded default", cmdRun},
	{"up", "run a whole cluster in this process, listening on a NATS port", cmdUp},
	{"submit", "submit a contract to a cluster", cmdSubmit},
	{"status", "show where a run stands", cmdStatus},
	{"ls", "list the runs, by state, pool, tenant or age", cmdLs},
	{"cancel", "stop a run now and end it cancelled", cmdCancel},
	{"approvals", "list the actions waiting for a person to decide", cmdApprovals},
	{"console", "serve the web console: runs, their stories, approvals, the fleet", cmdConsole},
	{"memory", "list or forget the notes agents keep for a workspace", cmdMemory},
	{"trace", "show the durable trace of a run", cmdTrace},
	{"fetch", "write or apply what a run changed in its snapshot workspace", cmdFetch},
	{"resume", "carry on a run whose process was killed or interrupted", cmdResume},
	{"approve", "approve an action a paused run waits for", cmdApprove},
	{"deny", "deny an action a paused run waits for", cmdDeny},
	{"bench", "measure the harness's own overhead per step", cmdBench},
	{"version", "print the module, version, revision and Go version of this build", cmdVersion},
}

// environ is what a command may read of its surroundings; main fills it so
// commands never touch the process's globals.
type environ struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdin is nil when no person is at a terminal to answer questions.
	stdin io.Reader
	// tty is set when stderr is a terminal: progress may rewrite a line.
	tty bool
	// nats holds the NATS credential flags of a command that talks to a
	// cluster; nil means they come from the environment alone.
	nats *streams.Flags
}

func main() {
	// A native sandbox re-executes this binary as its init; that child
	// never goes past this line.
	native.RunShimIfRequested()
	// A document tool's operation runs in a child of this binary, under
	// memory and CPU limits of its own; that child never goes past here.
	documents.RunChildIfRequested()
	documents.Isolate(true)
	// Before any command runs: keep this process's secrets (a provider
	// key above all) out of what a floor command could read of it.
	if err := procguard.Protect(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &environ{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		env.stdin = os.Stdin
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		env.tty = true
	}
	code := dispatch(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, env *environ, args []string) int {
	// Progress arrives on NATS goroutines while the command writes too.
	env.stdout, env.stderr = &syncWriter{w: env.stdout}, &syncWriter{w: env.stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return cmdVersion(ctx, env, args[1:])
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.stderr, "harness: unknown command %q; run `harness help` for the list\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `harness: a distributed agent runtime.

Usage: harness COMMAND [flags] [args]

Commands:`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, `
Every command takes --help. Data lives in --data DIR (default
$HARNESS_DATA, else $XDG_DATA_HOME/harness, else ~/.local/share/harness).

Exit codes: 0 success or finished; 1 error; 2 usage or a refused contract;
3 step_cap_reached; 4 time_budget_exceeded; 5 cost_budget_exceeded;
6 budget_ceiling_reached; 7 awaiting_approval (paused); 8 denied or refused;
9 stalled; 10 escalated; 11 cancelled; 12 failed; 13 model_refused.`)
}

// cmdVersion prints the one line that says which build this is; `harness
// --version` is the same command.
func cmdVersion(_ context.Context, env *environ, args []string) int {
	fs := newFlags(env, "version", "[flags]",
		`Prints the module path, the version (as the roles' micro services report
it), the VCS revision and the Go version of this build, on one line.`)
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) > 0 {
		fail(env.stderr, "version takes no arguments")
		return exitUsage
	}
	fmt.Fprintln(env.stdout, "harness", version.Get())
	return exitOK
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// errUsage marks an error the user fixes by changing the command line.
var errUsage = errors.New("usage")
