//go:build unix

package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/sandbox"
)

// tested maps every label a backend may declare to the suite's cases
// that test it; a backend declaring a label the suite does not know fails
// testDeclarations, so that no claim goes untested.
var tested = map[string][]string{
	sandbox.CapWall:           {"WallCapKillsGroup"},
	sandbox.CapCPU:            {"CPUCap", "CapHitIsNotAPass/cpu"},
	sandbox.CapMemory:         {"MemoryCapKillsHog", "CapHitIsNotAPass/memory"},
	sandbox.CapPids:           {"PidsCapStopsForkBomb", "CapHitIsNotAPass/pids"},
	sandbox.CapOpenFiles:      {"OpenFilesCap"},
	sandbox.CapNetwork:        {"NetworkDenied", "NetworkAllowed"},
	sandbox.ConfineFilesystem: {"WritesOutsideWorkspaceFail", "HostFilesInvisible"},
	sandbox.ConfineProcesses:  {"DaemonGoneAfterTeardown", "SandboxerEnvNotVisible"},
}

// limitCaps are the labels that also appear in Report.Unenforced.
var limitCaps = []string{sandbox.CapCPU, sandbox.CapWall, sandbox.CapMemory, sandbox.CapPids, sandbox.CapOpenFiles, sandbox.CapNetwork}

// testDeclarations checks what a backend declares against what it
// reports: every declared label is one the suite tests, the wall cap is
// declared (every backend must enforce it), and a limit cap is declared
// exactly when a command's Report.Unenforced does not list it.
func testDeclarations(t *testing.T, b sandbox.Backend) {
	e, ok := b.(sandbox.Enforcer)
	if !ok {
		t.Skipf("backend %s does not declare what it enforces (sandbox.Enforcer)", b.Name())
	}
	declared := e.Enforces()
	for _, d := range declared {
		if _, ok := tested[d]; !ok {
			t.Errorf("backend %s declares %q, which the suite has no test for; add one to sandboxtest", b.Name(), d)
		}
	}
	if !slices.Contains(declared, sandbox.CapWall) {
		t.Errorf("backend %s does not declare %q; every backend must enforce the wall clock", b.Name(), sandbox.CapWall)
	}
	res := run(t, b, spec(t, "true"))
	for _, c := range limitCaps {
		if d, u := slices.Contains(declared, c), slices.Contains(res.Report.Unenforced, c); d == u {
			t.Errorf("backend %s: declared %q = %v, but Report.Unenforced %q lists it = %v", b.Name(), c, d, res.Report.Unenforced, u)
		}
	}
}

func testOpenFilesCap(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.CapOpenFiles)
	// A backend may apply the limit just after the start (the floor's
	// prlimit), so wait for it to show before reporting.
	s := spec(t, "sh", "-c", `i=0; while [ "$(ulimit -n)" != 37 ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; ulimit -n`)
	s.Limits.OpenFiles = 37
	res := run(t, b, s)
	if got := strings.TrimSpace(res.Stdout); got != "37" {
		t.Errorf("ulimit -n in a command with open_files 37 = %q, want 37", got)
	}
}

// testCapHitIsNotAPass runs verification-style commands whose first
// process exits 0 after a cap was hit: a child was killed by it, or the
// command caught the signal. None may look like a pass.
func testCapHitIsNotAPass(t *testing.T, b sandbox.Backend) {
	tests := []struct {
		cap    string
		script string
		limit  func(*sandbox.Spec)
	}{
		{sandbox.CapMemory, "tail /dev/zero; exit 0", func(s *sandbox.Spec) { s.Limits.MemoryBytes = 64 << 20 }},
		{sandbox.CapPids, "i=0; while [ $i -lt 200 ]; do " + uniqueSleep() + " & i=$((i+1)); done; exit 0", func(s *sandbox.Spec) { s.Limits.Pids = 16 }},
		{sandbox.CapCPU, `trap "exit 0" XCPU; while :; do :; done`, func(s *sandbox.Spec) { s.Limits.CPUSecs = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.cap, func(t *testing.T) {
			requireEnforced(t, b, tt.cap)
			s := spec(t, "sh", "-c", tt.script)
			s.Limits.WallSecs = 20
			tt.limit(&s)
			res := run(t, b, s)
			if r := res.Report; r.Exited || r.CapHit != tt.cap {
				t.Errorf("Run(%q) = exited %v code %d signal %q cap %q, want not exited, cap %q", tt.script, r.Exited, r.ExitCode, r.Signal, r.CapHit, tt.cap)
			}
		})
	}
}

func testDaemonGone(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.ConfineProcesses)
	// One daemon calls setsid and waits until it leads its own session
	// before the command ends; the other is double-forked and orphaned.
	daemon, orphan := uniqueSleep(), uniqueSleep()
	script := `setsid ` + daemon + ` </dev/null >/dev/null 2>&1 & p=$!
i=0; until [ "$(cut -d' ' -f6 /proc/$p/stat 2>/dev/null)" = "$p" ] || [ $i -ge 500 ]; do sleep 0.01; i=$((i+1)); done
( ` + orphan + ` </dev/null >/dev/null 2>&1 & )
echo started`
	res := run(t, b, spec(t, "sh", "-c", script))
	if r := res.Report; !r.Exited || r.ExitCode != 0 || !strings.Contains(res.Stdout, "started") {
		t.Fatalf("Run(daemonise) = %+v stdout %q stderr %q, want exit 0", r, res.Stdout, res.Stderr)
	}
	// Teardown is over when Run returns; allow only for a dead process's
	// parent to reap it.
	for _, c := range []string{daemon, orphan} {
		waitFor(t, 2*time.Second, func() error {
			if pid := findProcess(c); pid != 0 {
				return fmt.Errorf("process %d (%q) outlived its sandbox", pid, c)
			}
			return nil
		})
	}
}

func testSandboxerEnvNotVisible(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.ConfineProcesses)
	secret := fmt.Sprintf("sk-harness-%d", time.Now().UnixNano())
	t.Setenv("HARNESS_SANDBOXTEST_HOST_SECRET", secret)
	script := `for f in /proc/[0-9]*/environ /proc/$PPID/environ; do tr '\0' '\n' < "$f"; done 2>/dev/null; echo done`
	res := run(t, b, spec(t, "sh", "-c", script))
	if strings.Contains(res.Stdout, secret) {
		t.Errorf("a command read the sandboxer's environment through /proc")
	}
	if !strings.Contains(res.Stdout, "done") {
		t.Errorf("Run(read /proc/*/environ) stdout %q stderr %q, want the script to finish", res.Stdout, res.Stderr)
	}
}

// testNoLeftovers runs 100 commands, each leaving a background process,
// and checks that nothing is left afterwards: no process below this one
// or with the command's marker, no mount, no temporary directory, and
// nothing the backend lists as a leftover (sandbox.LeftoverLister).
func testNoLeftovers(t *testing.T, b sandbox.Backend) {
	tmp := t.TempDir()
	root := filepath.Dir(tmp) // every t.TempDir of this test is below it
	t.Setenv("TMPDIR", tmp)
	ll, _ := b.(sandbox.LeftoverLister)
	count := func() (procs, mounts, temps int, left []string) {
		procs = len(descendants(os.Getpid()))
		if m, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
			// Only mounts of this test's directories: other containers
			// on the machine come and go with mounts of their own.
			for _, line := range strings.Split(string(m), "\n") {
				if strings.Contains(line, root) {
					mounts++
				}
			}
		}
		ents, _ := os.ReadDir(tmp)
		temps = len(ents)
		if ll != nil {
			var err error
			if left, err = ll.Leftovers(); err != nil {
				t.Fatalf("Leftovers() error = %v", err)
			}
		}
		return
	}
	// Earlier tests' objects may still be on their way out, and a backend
	// with a warm pool may still be filling it: the baseline is a count
	// that held still for half a second.
	var p0, m0, t0 int
	waitFor(t, 5*time.Second, func() error {
		var l0 []string
		p0, m0, t0, l0 = count()
		if len(l0) > 0 {
			return fmt.Errorf("Leftovers() with no command running = %q, want none", l0)
		}
		time.Sleep(500 * time.Millisecond)
		if p, m, tt, _ := count(); p != p0 || m != m0 || tt != t0 {
			return fmt.Errorf("still settling: %d processes, %d mounts, %d temporary entries, then %d, %d, %d", p0, m0, t0, p, m, tt)
		}
		return nil
	})
	sleep := uniqueSleep()
	dir := t.TempDir()
	for i := range 100 {
		s := spec(t, "sh", "-c", sleep+" & echo $!")
		s.Dir = dir
		if res := run(t, b, s); !res.Report.Exited || res.Report.ExitCode != 0 {
			t.Fatalf("run %d: %+v stderr %q", i, res.Report, res.Stderr)
		}
	}
	waitFor(t, 5*time.Second, func() error {
		p1, m1, t1, l1 := count()
		pid := findProcess(sleep)
		if p1 > p0 || m1 != m0 || t1 != t0 || len(l1) > 0 || pid != 0 {
			return fmt.Errorf("after 100 runs: %d child processes (before: %d), %d mounts (%d), %d temporary entries (%d), leftovers %q, marked process %d",
				p1, p0, m1, m0, t1, t0, l1, pid)
		}
		return nil
	})
}

// descendants lists the live processes below pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q, n := parent[p], 0; q > 0 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
