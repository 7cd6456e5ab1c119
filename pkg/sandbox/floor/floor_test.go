//go:build unix

package floor_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandbox/sandboxtest"
)

func TestFloorConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return floor.New() })
}

func TestFloorUnenforced(t *testing.T) {
	tests := []struct {
		name    string
		network bool
		want    []string
	}{
		{"network denied", false, []string{sandbox.CapMemory, sandbox.CapNetwork, sandbox.CapPids}},
		{"network allowed", true, []string{sandbox.CapMemory, sandbox.CapPids}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := floor.New().Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv(), Network: tt.network})
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Clone(res.Report.Unenforced)
			if runtime.GOOS != "linux" {
				got = slices.DeleteFunc(got, func(c string) bool { return c == sandbox.CapCPU || c == sandbox.CapOpenFiles })
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Report.Unenforced = %q, want %q", res.Report.Unenforced, tt.want)
			}
		})
	}
}

// TestFloorOpenFilesLimit checks that RLIMIT_NOFILE reaches the command. The
// script waits until the test has seen the limit in /proc (prlimit is
// applied just after the start, so a script reading it at once would race).
func TestFloorOpenFilesLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the floor applies rlimits on Linux only")
	}
	dir := t.TempDir()
	script := `echo $$ > pid.tmp && mv pid.tmp pid; while [ ! -e go ]; do sleep 0.01; done; ulimit -n`
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := floor.New().Run(context.Background(), sandbox.Spec{
			Argv: []string{"sh", "-c", script}, Dir: dir, Env: sandbox.MinimalEnv(),
			Limits: protocol.Limits{OpenFiles: 37, WallSecs: 20},
		})
		done <- outcome{res, err}
	}()
	var pid int
	sandboxtest.WaitUntil(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	sandboxtest.WaitUntil(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); strings.HasPrefix(l, "Max open files") && len(f) >= 5 && f[3] == "37" {
				return true
			}
		}
		return false
	})
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if got := strings.TrimSpace(o.res.Stdout); got != "37" {
		t.Errorf("ulimit -n in the command = %q, want 37", got)
	}
}

func TestFloorStartErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "noexec.sh"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec sandbox.Spec
		want protocol.Code
	}{
		{"missing dir", sandbox.Spec{Argv: []string{"true"}, Dir: filepath.Join(dir, "nope")}, protocol.CodeSandbox},
		{"no dir", sandbox.Spec{Argv: []string{"true"}}, protocol.CodeSandbox},
		{"not executable", sandbox.Spec{Argv: []string{"./noexec.sh"}, Dir: dir}, protocol.CodeSandbox},
		{"no PATH uses the default", sandbox.Spec{Argv: []string{"harness-no-such-program-xyz"}, Dir: dir}, protocol.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := floor.New().Run(context.Background(), tt.spec)
			if pe := protocol.AsError(err); pe == nil || pe.Code != tt.want {
				t.Errorf("Run(%q) = %v, %v; want code %v", tt.spec.Argv, res, err, tt.want)
			}
		})
	}
}

func TestFloorDefaultSearchPath(t *testing.T) {
	// With no PATH in the environment the floor still finds true in /usr/bin
	// or /bin, as execvp does, but does not add PATH to the environment.
	res, err := floor.New().Run(context.Background(), sandbox.Spec{Argv: []string{"env"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "" {
		t.Errorf("env with an empty Spec.Env printed %q, want nothing", res.Stdout)
	}
}

// BenchmarkFloorTrue measures a request to /bin/true through the floor,
// from Run to its return (pipes, prlimit, group sweep included).
func BenchmarkFloorTrue(b *testing.B) {
	f := floor.New()
	spec := sandbox.Spec{Argv: []string{"/bin/true"}, Dir: b.TempDir(), Env: sandbox.MinimalEnv()}
	for b.Loop() {
		if res, err := f.Run(context.Background(), spec); err != nil || !res.Report.Exited {
			b.Fatalf("Run(/bin/true) = %v, %v", res, err)
		}
	}
}

// BenchmarkForkExecTrue is the baseline: os/exec with nothing else.
func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFloorSetsidEscapes documents the floor's limit: a child that calls
// setsid leaves the process group and survives the group kill. Run must
// still return (after a short grace for the output pipes) and say so.
func TestFloorSetsidEscapes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the test reads /proc")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) is not installed")
	}
	start := time.Now()
	res, err := floor.New().Run(context.Background(), sandbox.Spec{
		// Wait until the child has its own session before the leader exits,
		// or the group kill would catch it first.
		Argv: []string{"sh", "-c", `setsid sleep 30 & p=$!; until [ "$(cut -d' ' -f6 /proc/$p/stat)" = "$p" ]; do sleep 0.01; done; echo $p`},
		Dir:  t.TempDir(), Env: sandbox.MinimalEnv(),
		Limits: protocol.Limits{WallSecs: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("stdout %q is not a pid", res.Stdout)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v with an escaped child holding its output", took)
	}
	if !strings.Contains(res.Stderr, "left the command's process group") {
		t.Errorf("Stderr = %q, want a note that an escaped process held the output", res.Stderr)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil || !strings.Contains(string(b), ") S ") {
		t.Errorf("/proc/%d/stat = %q, %v; the escaped child was expected to survive, sleeping (if the floor now kills it, update the docs)", pid, b, err)
	}
}
