package faults

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/testkit"
)

// trivial is a role process in miniature: armed with a spec it writes the
// fault line of the spec's point and kills itself with SIGKILL, as a role
// does; armed with "die" it exits 3 with no fault line; armed with
// nothing it runs until killed. It prints the id it was given first.
const trivial = `echo "started $1"
case "$HARNESS_FAULT" in
"") exec sleep 60 ;;
die) exit 3 ;;
*) echo "harness fault: SIGKILL at ${HARNESS_FAULT%%:*} (hit 1)" >&2; kill -9 $$ ;;
esac`

// TestSupervisorRestarts runs the trivial process armed with a kill: the
// supervisor sees it killed at the point, starts it again with the spec it
// is given, sees that one die unplanned, starts it a third time under a
// fresh id each time, and on Stop kills it and starts it no more.
func TestSupervisorRestarts(t *testing.T) {
	logs := t.TempDir()
	var mu sync.Mutex
	var exits []Exit
	next := []string{"die", ""} // the specs of the second and third starts
	sup := NewSupervisor(logs, func(e Exit) (string, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		exits = append(exits, e)
		if len(exits) > len(next) {
			t.Errorf("exit %d, after the last planned one: %+v", len(exits), e)
			return "", 0
		}
		return next[len(exits)-1], 10 * time.Millisecond
	})
	p := &Proc{Role: "worker", Name: "w", Bin: "/bin/sh", Args: []string{"-c", trivial}, FreshID: true}
	sup.Start(p, "before-commit:1")
	third := filepath.Join(logs, "w.3.log")
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		b, err := os.ReadFile(third)
		if err != nil || !strings.Contains(string(b), "started w-3") {
			return errors.New("the third start has not begun")
		}
		return nil
	})
	sup.Stop()
	sup.Stop() // again: nothing more

	mu.Lock()
	defer mu.Unlock()
	if len(exits) != 2 {
		t.Fatalf("%d exits reported, want the kill and the unplanned death (not Stop's): %+v", len(exits), exits)
	}
	if e := exits[0]; e.ID != "w-1" || !e.Started || e.Point != fault.BeforeCommit || e.Err == nil || e.Log != filepath.Join(logs, "w.1.log") {
		t.Errorf("first exit = %+v, want w-1 killed at before-commit, with its log", e)
	}
	if e := exits[1]; e.ID != "w-2" || !e.Started || e.Point != "" || e.Err == nil {
		t.Errorf("second exit = %+v, want w-2 dead with no fault line", e)
	}
	if exits[1].Time.Before(exits[0].Time) {
		t.Errorf("the exits are out of order: %v then %v", exits[0].Time, exits[1].Time)
	}
	if p.cur == nil || p.cur.ProcessState == nil {
		t.Errorf("after Stop the third process is %+v, want it waited for", p.cur)
	}
	if _, err := os.Stat(filepath.Join(logs, "w.4.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a fourth start after Stop: %v", err)
	}
}

// TestSupervisorStartFails reports a process that cannot be started once,
// and does not try it again.
func TestSupervisorStartFails(t *testing.T) {
	exits := make(chan Exit, 2)
	sup := NewSupervisor(t.TempDir(), func(e Exit) (string, time.Duration) {
		exits <- e
		return "", 0
	})
	sup.Start(&Proc{Role: "worker", Name: "ghost", Bin: filepath.Join(t.TempDir(), "no-such-binary")}, "")
	select {
	case e := <-exits:
		if e.Started || e.Err == nil || !strings.Contains(e.Err.Error(), "start ghost") {
			t.Errorf("exit = %+v, want not started, naming the process", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed start was not reported")
	}
	sup.Stop()
	if len(exits) != 0 {
		t.Errorf("reported again: %+v", <-exits)
	}
}

// TestFaultLine reads the point from a role's fault line, and nothing from
// other output.
func TestFaultLine(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want fault.Point
	}{
		{"level=INFO msg=started\nharness fault: SIGKILL at after-commit (hit 3)\n", fault.AfterCommit},
		{"harness fault: SIGKILL at during-verification (hit 1)", fault.DuringVerification},
		{"level=ERROR msg=panic\n", ""},
		{"", ""},
	} {
		if got := faultLine(tt.out); got != tt.want {
			t.Errorf("faultLine(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}
