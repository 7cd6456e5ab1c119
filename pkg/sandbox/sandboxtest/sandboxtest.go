//go:build unix

package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// Run runs the conformance suite against the backends newBackend returns.
// newBackend is called once per subtest; it may call t.Skip when the
// backend cannot run on this machine.
func Run(t *testing.T, newBackend func(t *testing.T) sandbox.Backend) {
	t.Helper()
	tests := []struct {
		name   string
		fn     func(*testing.T, sandbox.Backend)
		serial bool // uses t.Setenv
	}{
		{"ExitCodes", testExitCodes, false},
		{"Streams", testStreams, false},
		{"OutputBounded", testOutputBounded, false},
		{"WorkingDir", testWorkingDir, false},
		{"StdinIsEmpty", testStdinIsEmpty, false},
		{"EnvIsExactlySpecEnv", testEnvIsolation, true},
		{"MissingProgram", testMissingProgram, false},
		{"EmptyArgv", testEmptyArgv, false},
		{"KilledBySignal", testKilledBySignal, false},
		{"WallCapKillsGroup", testWallCap, false},
		{"BackgroundChildDoesNotOutliveCommand", testBackgroundChild, false},
		{"CPUCap", testCPUCap, false},
		{"ContextCancel", testContextCancel, false},
		// Containment, for the caps the backend declares (sandbox.Enforcer).
		{"PidsCapStopsForkBomb", testPidsCap, false},
		{"MemoryCapKillsHog", testMemoryCap, false},
		{"NetworkDenied", testNetworkDenied, false},
		{"NetworkAllowed", testNetworkAllowed, false},
		{"WritesOutsideWorkspaceFail", testWritesConfined, false},
		{"HostFilesInvisible", testHostFilesInvisible, false},
		{"OpenFilesCap", testOpenFilesCap, false},
		{"CapHitIsNotAPass", testCapHitIsNotAPass, false},
		{"DaemonGoneAfterTeardown", testDaemonGone, false},
		{"SandboxerEnvNotVisible", testSandboxerEnvNotVisible, true},
		{"NoLeftoversAfter100Runs", testNoLeftovers, true},
		{"DeclarationsMatchReports", testDeclarations, false},
		// Long-lived commands, for a sandbox.Starter.
		{"StartTalks", testStartTalks, false},
		{"StartKillTakesEverything", testStartKillTakesEverything, false},
		{"StartHasNoWallCap", testStartHasNoWallCap, false},
		{"StartMissingProgram", testStartMissingProgram, false},
		{"StartConfined", testStartConfined, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.serial {
				t.Parallel()
			}
			tt.fn(t, newBackend(t))
		})
	}
}

// spec returns a spec running argv in a fresh directory with the minimal
// environment and limits short enough for tests.
func spec(t *testing.T, argv ...string) sandbox.Spec {
	return sandbox.Spec{
		Argv:   argv,
		Dir:    t.TempDir(),
		Env:    sandbox.MinimalEnv(),
		Limits: protocol.Limits{WallSecs: 20, CPUSecs: 20},
	}
}

// run runs s and fails the test if the command could not be started.
func run(t *testing.T, b sandbox.Backend, s sandbox.Spec) *sandbox.Result {
	t.Helper()
	res, err := b.Run(context.Background(), s)
	if err != nil {
		t.Fatalf("Run(%q) error = %v, want a result", s.Argv, err)
	}
	if res.Report.Backend != b.Name() {
		t.Errorf("Run(%q).Report.Backend = %q, want %q", s.Argv, res.Report.Backend, b.Name())
	}
	if !slices.Equal(s.Argv, res.Report.Argv) {
		t.Errorf("Run(%q).Report.Argv = %q, want the argv", s.Argv, res.Report.Argv)
	}
	if res.Report.DurationMS < 0 {
		t.Errorf("Run(%q).Report.DurationMS = %d, want >= 0", s.Argv, res.Report.DurationMS)
	}
	return res
}

func testExitCodes(t *testing.T, b sandbox.Backend) {
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"true", []string{"true"}, 0},
		{"false", []string{"false"}, 1},
		{"exit 7", []string{"sh", "-c", "exit 7"}, 7},
		{"exit 255", []string{"sh", "-c", "exit 255"}, 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, b, spec(t, tt.argv...))
			r := res.Report
			if !r.Exited || r.ExitCode != tt.want || r.Signal != "" || r.CapHit != "" {
				t.Errorf("Run(%q) = exited %v code %d signal %q cap %q, want exited with %d",
					tt.argv, r.Exited, r.ExitCode, r.Signal, r.CapHit, tt.want)
			}
		})
	}
}

func testStreams(t *testing.T, b sandbox.Backend) {
	res := run(t, b, spec(t, "sh", "-c", "echo out; echo err >&2; echo more"))
	if res.Stdout != "out\nmore\n" || res.Stderr != "err\n" {
		t.Errorf("Run(echo) = stdout %q stderr %q, want %q and %q", res.Stdout, res.Stderr, "out\nmore\n", "err\n")
	}
}

func testOutputBounded(t *testing.T, b sandbox.Backend) {
	const n, limit = 20000, 1000
	var full strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	tests := []struct {
		name   string
		argv   []string
		stream func(*sandbox.Result) string
	}{
		{"stdout", []string{"seq", "1", strconv.Itoa(n)}, func(r *sandbox.Result) string { return r.Stdout }},
		{"stderr", []string{"sh", "-c", "seq 1 " + strconv.Itoa(n) + " >&2"}, func(r *sandbox.Result) string { return r.Stderr }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(t, tt.argv...)
			s.Limits.OutputBytes = limit
			got := tt.stream(run(t, b, s))
			if len(got) > limit {
				t.Errorf("len(output) = %d, want <= %d", len(got), limit)
			}
			if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "\n19999\n20000\n") {
				t.Errorf("output = %q, want the head and the tail of the sequence", got)
			}
			elided := sandbox.ElidedBytes(got)
			line := fmt.Sprintf("…[elided %d bytes]…", elided)
			i := strings.Index(got, line)
			if elided == 0 || i < 0 {
				t.Fatalf("output = %q, want an elision line", got)
			}
			head, tail := got[:i], got[i+len(line):]
			kept := len(strings.TrimSuffix(head, "\n")) + len(strings.TrimPrefix(tail, "\n"))
			if int64(kept)+elided != int64(full.Len()) {
				t.Errorf("kept %d + elided %d bytes = %d, want %d", kept, elided, int64(kept)+elided, full.Len())
			}
			if !strings.HasPrefix(full.String(), strings.TrimSuffix(head, "\n")) || !strings.HasSuffix(full.String(), strings.TrimPrefix(tail, "\n")) {
				t.Errorf("head or tail are not the start and end of the real output")
			}
		})
	}
}

func testWorkingDir(t *testing.T, b sandbox.Backend) {
	s := spec(t, "pwd", "-P")
	want, err := filepath.EvalSymlinks(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, b, s)
	if got := strings.TrimSpace(res.Stdout); got != want {
		t.Errorf("Run(pwd) = %q, want %q", got, want)
	}
}

func testStdinIsEmpty(t *testing.T, b sandbox.Backend) {
	res := run(t, b, spec(t, "cat"))
	if !res.Report.Exited || res.Report.ExitCode != 0 || res.Stdout != "" {
		t.Errorf("Run(cat) = %+v stdout %q, want an immediate clean exit with no output", res.Report, res.Stdout)
	}
}

func testEnvIsolation(t *testing.T, b sandbox.Backend) {
	const secret = "HARNESS_SANDBOXTEST_SECRET"
	t.Setenv(secret, "sk-should-never-leak")
	tests := []struct {
		name string
		env  []string
		want []string // entries that must be present
	}{
		{"minimal", sandbox.MinimalEnv("EXTRA=1"), []string{"EXTRA=1"}},
		{"explicit", []string{"PATH=" + os.Getenv("PATH"), "ONLY=this"}, []string{"ONLY=this"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(t, "env")
			s.Env = tt.env
			res := run(t, b, s)
			if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "sk-should-never-leak") {
				t.Errorf("Run(env) output shows the sandboxer's %s:\n%s", secret, res.Stdout)
			}
			lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			for _, w := range tt.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("Run(env) output lacks %q:\n%s", w, res.Stdout)
				}
			}
		})
	}
}

func testMissingProgram(t *testing.T, b sandbox.Backend) {
	tests := []struct {
		name string
		argv []string
	}{
		{"on PATH", []string{"harness-no-such-program-xyz", "--version"}},
		{"by path", []string{"./no-such-script"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := b.Run(context.Background(), spec(t, tt.argv...))
			if !errors.Is(err, protocol.ErrNotFound) {
				t.Fatalf("Run(%q) = %v, %v; want a not_found error", tt.argv, res, err)
			}
			if msg := protocol.AsError(err).Message; !strings.Contains(msg, "sandboxer") {
				t.Errorf("Run(%q) error message %q does not say the sandboxer lacks the program", tt.argv, msg)
			}
		})
	}
}

func testEmptyArgv(t *testing.T, b sandbox.Backend) {
	tests := []struct {
		name string
		argv []string
	}{
		{"nil", nil},
		{"empty program", []string{""}},
		{"NUL byte", []string{"echo", "a\x00b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := b.Run(context.Background(), spec(t, tt.argv...))
			if !errors.Is(err, protocol.ErrBadArguments) {
				t.Errorf("Run(%q) = %v, %v; want a bad_arguments error", tt.argv, res, err)
			}
		})
	}
}

func testKilledBySignal(t *testing.T, b sandbox.Backend) {
	res := run(t, b, spec(t, "sh", "-c", "kill -TERM $$"))
	r := res.Report
	if r.Exited || r.Signal != "SIGTERM" || r.CapHit != "" {
		t.Errorf("Run(kill -TERM $$) = exited %v signal %q cap %q, want killed by SIGTERM, no cap", r.Exited, r.Signal, r.CapHit)
	}
}

func testWallCap(t *testing.T, b sandbox.Backend) {
	sleep := uniqueSleep()
	s := spec(t, "sh", "-c", sleep+" & echo $!; "+sleep)
	s.Limits.WallSecs = 1
	start := time.Now()
	res := run(t, b, s)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Run(sleep 30) with a 1 s wall cap took %v", took)
	}
	r := res.Report
	if r.Exited || r.CapHit != sandbox.CapWall || r.Signal != "SIGKILL" {
		t.Errorf("Run(sleep 30) = exited %v cap %q signal %q, want killed by the wall cap (SIGKILL)", r.Exited, r.CapHit, r.Signal)
	}
	waitNoProcess(t, sleep)
}

func testBackgroundChild(t *testing.T, b sandbox.Backend) {
	start := time.Now()
	sleep := uniqueSleep()
	res := run(t, b, spec(t, "sh", "-c", sleep+" & echo $!"))
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Run(sleep 30 &) took %v, want it to end with its leader", took)
	}
	if r := res.Report; !r.Exited || r.ExitCode != 0 {
		t.Errorf("Run(sleep 30 &) = %+v, want exit 0", r)
	}
	waitNoProcess(t, sleep)
}

func testCPUCap(t *testing.T, b sandbox.Backend) {
	probe := run(t, b, spec(t, "true"))
	for _, c := range probe.Report.Unenforced {
		if c == sandbox.CapCPU {
			t.Skipf("backend %s does not enforce the CPU cap", b.Name())
		}
	}
	s := spec(t, "sh", "-c", "while :; do :; done")
	s.Limits.CPUSecs = 1
	s.Limits.WallSecs = 15
	res := run(t, b, s)
	if r := res.Report; r.Exited || r.CapHit != sandbox.CapCPU {
		t.Errorf("Run(busy loop) with cpu_secs 1 = exited %v cap %q signal %q, want cap %q", r.Exited, r.CapHit, r.Signal, sandbox.CapCPU)
	}
}

func testContextCancel(t *testing.T, b sandbox.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := b.Run(ctx, spec(t, "sleep", "30"))
	if err != nil {
		t.Fatalf("Run(sleep 30) with a cancelled context error = %v, want the result of the killed command", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run(sleep 30) took %v after its context ended", took)
	}
	if r := res.Report; r.Exited || r.CapHit != "" {
		t.Errorf("Run(sleep 30) = exited %v cap %q, want killed with no cap", r.Exited, r.CapHit)
	}
	if _, err := b.Run(ctx, spec(t, "true")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run(true) with a done context error = %v, want context.DeadlineExceeded", err)
	}
}

// uniqueSleep returns a command line, "sleep 30.NNNNNN", that no other
// process on this machine has, for waitNoProcess to look for. A pid would
// not do: a backend with a PID namespace prints its own numbering.
func uniqueSleep() string {
	return fmt.Sprintf("sleep 30.%06d", rand.IntN(1000000))
}

// waitNoProcess polls until no process on this machine (the sandbox's
// kernel: the suite must run where the backend runs its commands) has
// cmdline, its arguments joined by spaces, as its command line or in it.
// Zombies (killed, waiting for a parent to reap them) count as gone.
func waitNoProcess(t *testing.T, cmdline string) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		if pid := findProcess(cmdline); pid != 0 {
			return fmt.Errorf("process %d (%q) is still running", pid, cmdline)
		}
		return nil
	})
}

// findProcess returns the pid of a live process whose command line
// contains cmdline, or 0.
func findProcess(cmdline string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), cmdline) {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ...; comm may hold spaces, so read after the last ')'.
		s := string(st)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && strings.ContainsRune("ZX", rune(s[i+2])) {
			continue
		}
		return pid
	}
	return 0
}

// WaitUntil polls cond until it holds, failing the test after timeout: the
// backends' tests wait with testkit's one polling helper.
func WaitUntil(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	testkit.Until(t, timeout, cond)
}

// waitFor polls fn until it returns nil, failing the test with its last
// error after timeout.
func waitFor(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	testkit.CheckFor(t, timeout, 10*time.Millisecond, fn)
}
