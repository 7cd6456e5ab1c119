package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestVersion: `harness version` and `harness --version` print the one
// line of this build (module, version, revision, Go version) and exit 0;
// the command takes no arguments; help lists it and the exit codes.
func TestVersion(t *testing.T) {
	want := "harness " + version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errOut := cli(t, t.Context(), nil, args...)
		if code != exitOK {
			t.Fatalf("harness %v: exit %d\nstderr: %s", args, code, errOut)
		}
		if out != want {
			t.Errorf("harness %v printed %q, want %q", args, out, want)
		}
		for _, part := range []string{"github.com/ioharness/harness", version.Semver(), "revision", runtime.Version()} {
			if !strings.Contains(out, part) {
				t.Errorf("harness %v = %q, lacks %q", args, out, part)
			}
		}
	}
	if code, _, _ := cli(t, t.Context(), nil, "version", "extra"); code != exitUsage {
		t.Errorf("harness version extra: exit %d, want %d", code, exitUsage)
	}
	if _, out, _ := cli(t, t.Context(), nil, "help"); !strings.Contains(out, "  version  ") {
		t.Errorf("harness help does not list the version command:\n%s", out)
	}
	// The exit codes help lists are those of the outcomes table, every one.
	_, out, _ := cli(t, t.Context(), nil, "help")
	for o, code := range map[protocol.Outcome]int{protocol.OutcomeModelRefused: 13, protocol.OutcomeFailed: 12, protocol.OutcomeCancelled: 11} {
		if exitFor(o) != code || !strings.Contains(out, fmt.Sprintf("%d %s", code, o)) {
			t.Errorf("harness help says nothing of exit %d (%s), which exitFor gives %d:\n%s", code, o, exitFor(o), out)
		}
	}
}
