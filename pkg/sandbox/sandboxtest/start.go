//go:build unix

package sandboxtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// The tests of a sandbox.Starter: a command that lives on, spoken to over
// its standard input and output (an MCP server), confined as Run confines
// one and gone with everything it started once killed. A backend that is
// not a Starter skips them.

func starter(t *testing.T, b sandbox.Backend) sandbox.Starter {
	t.Helper()
	s, ok := b.(sandbox.Starter)
	if !ok {
		t.Skipf("backend %s does not start long-lived commands (sandbox.Starter)", b.Name())
	}
	return s
}

func start(t *testing.T, s sandbox.Starter, spec sandbox.Spec) *sandbox.Process {
	t.Helper()
	p, err := s.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start(%q) error = %v", spec.Argv, err)
	}
	t.Cleanup(p.Kill)
	return p
}

// waitDone waits for p to end, and returns how it ended.
func waitDone(t *testing.T, p *sandbox.Process) string {
	t.Helper()
	select {
	case <-p.Done():
		return p.Ended()
	case <-time.After(15 * time.Second):
		t.Fatalf("the process %q did not end", p.Report.Argv)
		return ""
	}
}

// testStartTalks: what goes in on stdin comes back on stdout, line by
// line, while the command lives; closing stdin ends it, exit status 0.
func testStartTalks(t *testing.T, b sandbox.Backend) {
	s := starter(t, b)
	p := start(t, s, spec(t, "sh", "-c", `while read -r l; do echo "got $l"; echo "err $l" >&2; done`))
	if p.Report.Backend != b.Name() {
		t.Errorf("Process.Report.Backend = %q, want %q", p.Report.Backend, b.Name())
	}
	out := bufio.NewReader(p.Stdout)
	for _, w := range []string{"one", "two"} {
		if _, err := io.WriteString(p.Stdin, w+"\n"); err != nil {
			t.Fatalf("write %q: %v", w, err)
		}
		line, err := out.ReadString('\n')
		if err != nil || line != "got "+w+"\n" {
			t.Fatalf("read after %q = %q, %v; want %q", w, line, err, "got "+w+"\n")
		}
	}
	if err := p.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if got := waitDone(t, p); got != "exit status 0" {
		t.Errorf("Ended() after stdin closed = %q, want exit status 0", got)
	}
	WaitUntil(t, 5*time.Second, func() bool { return strings.Contains(p.Stderr(), "err two") })
}

// testStartKillTakesEverything: Kill ends the command and what it left
// running in the background, and Done is closed once nothing is left.
func testStartKillTakesEverything(t *testing.T, b sandbox.Backend) {
	s := starter(t, b)
	sleep := uniqueSleep()
	p := start(t, s, spec(t, "sh", "-c", sleep+" & echo started; wait"))
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("read = %q, %v; want started", line, err)
	}
	if pid := findProcess(sleep); pid == 0 {
		t.Fatalf("the background %q is not running", sleep)
	}
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("Kill returned before Done was closed")
	}
	if p.Ended() == "" {
		t.Error("Ended() is empty after Kill")
	}
	waitNoProcess(t, sleep)
	p.Kill() // idempotent
}

// testStartHasNoWallCap: a started command outlives the wall cap Run
// would kill it with.
func testStartHasNoWallCap(t *testing.T, b sandbox.Backend) {
	s := starter(t, b)
	sp := spec(t, "sh", "-c", "sleep 2; echo alive; read l")
	sp.Limits.WallSecs = 1
	p := start(t, s, sp)
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil || line != "alive\n" {
		t.Fatalf("read = %q, %v; want alive after the 1 s wall cap", line, err)
	}
	found := false
	for _, c := range p.Report.Unenforced {
		found = found || c == sandbox.CapWall
	}
	if !found {
		t.Errorf("Report.Unenforced = %q, want %q listed: a started command has no wall-clock cap", p.Report.Unenforced, sandbox.CapWall)
	}
}

// testStartMissingProgram: a program that is not there is an error of
// Start, or a process that ends at once saying so.
func testStartMissingProgram(t *testing.T, b sandbox.Backend) {
	s := starter(t, b)
	p, err := s.Start(context.Background(), spec(t, "no-such-program-harness"))
	if err != nil {
		if !errors.Is(err, protocol.ErrNotFound) {
			t.Errorf("Start(no-such-program) error = %v, want not_found", err)
		}
		return
	}
	defer p.Kill()
	if got := waitDone(t, p); !strings.Contains(got, "not installed") {
		t.Errorf("Start(no-such-program) ended %q, want it to say the program is not installed", got)
	}
}

// testStartConfined: a started command is held as Run holds one: what
// the backend declares about the filesystem and the network holds for it
// too.
func testStartConfined(t *testing.T, b sandbox.Backend) {
	s := starter(t, b)
	e, ok := b.(sandbox.Enforcer)
	if !ok {
		t.Skipf("backend %s declares no confinement", b.Name())
	}
	fs := false
	for _, c := range e.Enforces() {
		fs = fs || c == sandbox.ConfineFilesystem
	}
	if !fs {
		t.Skipf("backend %s does not confine the filesystem", b.Name())
	}
	host := t.TempDir() // a host directory outside the workspace
	p := start(t, s, spec(t, "sh", "-c", fmt.Sprintf("ls %s >/dev/null 2>&1 && echo visible || echo hidden; read l", host)))
	line, _ := bufio.NewReader(p.Stdout).ReadString('\n')
	if line != "hidden\n" {
		t.Errorf("a started command sees the host directory %s: %q", host, line)
	}
}
