package fault_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/internal/fault"
)

// helperEnv makes the test binary act as a process with hooks instead of
// running the tests: it arms HARNESS_FAULT and walks the script in
// FAULT_SCRIPT, printing each step before taking it.
const helperEnv = "FAULT_HELPER_SCRIPT"

func TestMain(m *testing.M) {
	if script, ok := os.LookupEnv(helperEnv); ok {
		helper(script)
		return
	}
	os.Exit(m.Run())
}

// helper runs a script of hooks: "hit" reaches after-commit; "span:D"
// spends D inside during-verification.
func helper(script string) {
	if err := fault.Arm(os.Getenv(fault.EnvVar)); err != nil {
		fmt.Println("arm:", err)
		os.Exit(2)
	}
	for i, step := range strings.Fields(script) {
		fmt.Printf("step %d\n", i+1)
		if d, ok := strings.CutPrefix(step, "span:"); ok {
			dur, _ := time.ParseDuration(d)
			leave := fault.During(fault.DuringVerification)
			time.Sleep(dur)
			leave()
			continue
		}
		fault.Hit(fault.AfterCommit)
	}
	fmt.Println("survived")
}

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want []fault.Entry
		bad  string // part of the error message, when the spec is refused
	}{
		{spec: "", want: nil},
		{spec: "after-commit:3", want: []fault.Entry{{Point: fault.AfterCommit, N: 3}}},
		{spec: " before-commit:1 , during-verification:2@250ms", want: []fault.Entry{{Point: fault.BeforeCommit, N: 1},
			{Point: fault.DuringVerification, N: 2, Delay: 250 * time.Millisecond}}},
		{spec: "during-verification:1", want: []fault.Entry{{Point: fault.DuringVerification, N: 1, Delay: fault.DefaultSpanDelay}}},
		{spec: "after-comit:1", bad: `unknown point "after-comit"`},
		{spec: "after-commit", bad: "is not <point>:<n>"},
		{spec: "after-commit:0", bad: "must be a whole number from 1"},
		{spec: "after-commit:x", bad: "must be a whole number from 1"},
		{spec: "after-commit:1@5ms", bad: "takes no delay"},
		{spec: "during-verification:1@soon", bad: "must be a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := fault.Parse(tt.spec)
			if tt.bad != "" {
				if !errors.Is(err, fault.ErrSpec) || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("Parse(%q) = %v, %v; want an ErrSpec saying %q", tt.spec, got, err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tt.spec, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.spec, diff)
			}
			for _, e := range got {
				if again, err := fault.Parse(e.String()); err != nil || len(again) != 1 || again[0] != e {
					t.Errorf("Parse(%q) = %v, %v; want %v back", e.String(), again, err, e)
				}
			}
		})
	}
	if err := fault.Arm("nowhere:1"); !errors.Is(err, fault.ErrSpec) {
		t.Errorf("Arm of a bad spec = %v, want ErrSpec", err)
	}
}

// TestKill runs a process that reaches its hooks and checks it dies by
// SIGKILL exactly at the armed hit, saying where, or lives when nothing
// armed matches.
func TestKill(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		script   string
		lastStep int // the last step printed; 0 when the process survives
		line     string
	}{
		{name: "third hit", spec: "after-commit:3", script: "hit hit hit hit hit", lastStep: 3, line: "SIGKILL at after-commit (hit 3)"},
		{name: "first hit", spec: "after-commit:1", script: "hit hit", lastStep: 1, line: "SIGKILL at after-commit (hit 1)"},
		{name: "unarmed", spec: "", script: "hit hit span:10ms"},
		{name: "another point armed", spec: "before-commit:1", script: "hit hit span:10ms"},
		{name: "count never reached", spec: "after-commit:9", script: "hit hit"},
		{name: "inside a long span", spec: "during-verification:1@20ms", script: "hit span:2s hit", lastStep: 2, line: "SIGKILL at during-verification (hit 1)"},
		{name: "short spans are let go, the next long one is not", spec: "during-verification:1@100ms",
			script: "span:1ms span:1ms span:2s hit", lastStep: 3, line: "SIGKILL at during-verification (hit 3)"},
		{name: "first of several points to fire", spec: "during-verification:1@1ms,after-commit:2", script: "hit hit span:2s", lastStep: 2,
			line: "SIGKILL at after-commit (hit 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+tt.script, fault.EnvVar+"="+tt.spec)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			steps := strings.Count(stdout.String(), "step ")
			if tt.lastStep == 0 {
				if err != nil || !strings.Contains(stdout.String(), "survived") {
					t.Fatalf("process = %v\n%s%s; want it to survive", err, stdout.String(), stderr.String())
				}
				return
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("process = %v\n%s; want it killed", err, stdout.String())
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("process ended %v, want killed by SIGKILL", exit)
			}
			if steps != tt.lastStep || strings.Contains(stdout.String(), "survived") {
				t.Errorf("process took %d steps:\n%s; want it killed at step %d", steps, stdout.String(), tt.lastStep)
			}
			if got := strings.TrimSpace(stderr.String()); got != "harness fault: "+tt.line {
				t.Errorf("stderr = %q, want the fault line %q", got, tt.line)
			}
		})
	}
}

// BenchmarkHitUnarmed is the cost of a hook in a process with no fault
// plan: one atomic load.
func BenchmarkHitUnarmed(b *testing.B) {
	if err := fault.Arm(""); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		fault.Hit(fault.AfterCommit)
		fault.During(fault.DuringVerification)()
	}
}

func ExampleParse() {
	entries, err := fault.Parse("after-commit:3,during-verification:2@150ms")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range entries {
		fmt.Println(e.Point, e.N, e.Delay)
	}
	// Output:
	// after-commit 3 0s
	// during-verification 2 150ms
}
