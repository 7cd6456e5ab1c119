//go:build unix

package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

func TestExec(t *testing.T) {
	tests := []struct {
		name       string
		args       string
		limits     protocol.Limits
		want       string   // exact content, unless wantSub is set
		wantSub    []string // substrings of the content or of the error message
		wantCode   protocol.Code
		wantExited bool
	}{
		{"exit 0", `{"argv":["echo","hello"]}`, protocol.Limits{}, "[stdout]\nhello\n[exit 0]", nil, 0, true},
		{"exit 1 with stderr", `{"argv":["sh","-c","echo out; echo err >&2; exit 1"]}`, protocol.Limits{}, "[stdout]\nout\n[stderr]\nerr\n[exit 1]", nil, 0, true},
		{"no output", `{"argv":["true"]}`, protocol.Limits{}, "[no output]\n[exit 0]", nil, 0, true},
		{"runs in the workspace", `{"argv":["sh","-c","echo made > made.txt; cat made.txt"]}`, protocol.Limits{}, "[stdout]\nmade\n[exit 0]", nil, 0, true},
		{"no trailing newline", `{"argv":["printf","x"]}`, protocol.Limits{}, "[stdout]\nx\n[exit 0]", nil, 0, true},
		{"wall cap", `{"argv":["sleep","30"]}`, protocol.Limits{WallSecs: 1}, "[no output]\n[killed: wall clock cap 1s]", nil, 0, false},
		{"signal", `{"argv":["sh","-c","kill -KILL $$"]}`, protocol.Limits{}, "[no output]\n[killed by SIGKILL]", nil, 0, false},
		{"long output is cut in the middle", `{"argv":["seq","1","100000"]}`, protocol.Limits{OutputBytes: 200000},
			"", []string{"[stdout]\n1\n2\n3\n", "\n…[elided ", " chars, plus ", " bytes the sandbox had already dropped]…\n", "99999\n100000\n[exit 0]"}, 0, true},
		{"missing program", `{"argv":["harness-no-such-tool"]}`, protocol.Limits{}, "", []string{"unavailable on this sandboxer"}, protocol.CodeNotFound, false},
		{"command line in one element", `{"argv":["go test ./..."]}`, protocol.Limits{}, "", []string{"no shell", `["go","test","./..."]`}, protocol.CodeNotFound, false},
		{"a string, not an array", `{"argv":"go test ./..."}`, protocol.Limits{}, "", []string{"must be an array of strings", `["go", "test", "./..."]`}, protocol.CodeBadArguments, false},
		{"element not a string", `{"argv":["echo",1]}`, protocol.Limits{}, "", []string{"element 1 is a number"}, protocol.CodeBadArguments, false},
		{"empty argv", `{"argv":[]}`, protocol.Limits{}, "", []string{"argv is empty"}, protocol.CodeBadArguments, false},
		{"empty program", `{"argv":[""]}`, protocol.Limits{}, "", []string{"program, is empty"}, protocol.CodeBadArguments, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t)
			env.EntryCap = 2000
			env.Limits = tt.limits
			out, err := invoke(t, env, "exec", tt.args)
			if codeOf(err) != tt.wantCode {
				t.Fatalf("exec(%s) = %+v, %v; want code %v", tt.args, out, err, tt.wantCode)
			}
			text := ""
			if err != nil {
				text = protocol.AsError(err).Message
			} else {
				// Every report of the floor says it ran unsandboxed.
				const note = "\n[unsandboxed: the sandboxer's operator runs commands on the floor backend, with no isolation]"
				if !strings.HasSuffix(out.Content, note) || out.Exec == nil || !out.Exec.Unsandboxed {
					t.Errorf("exec(%s) on the floor does not say it ran unsandboxed: %q", tt.args, out.Content)
				}
				text = strings.TrimSuffix(out.Content, note)
				if !out.Changed || out.Exec == nil || out.Exec.Exited != tt.wantExited || out.Exec.Backend != "floor" {
					t.Errorf("exec(%s) = Changed %v, Exec %+v; want Changed, an Exec report from the floor with Exited %v", tt.args, out.Changed, out.Exec, tt.wantExited)
				}
				if n := utf8.RuneCountInString(text); n > env.EntryCap {
					t.Errorf("exec(%s) returned %d chars, over the cap of %d", tt.args, n, env.EntryCap)
				}
			}
			if tt.want != "" && text != tt.want {
				t.Errorf("exec(%s) = %q, want %q", tt.args, text, tt.want)
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(text, s) {
					t.Errorf("exec(%s) = %q, want it to contain %q", tt.args, text, s)
				}
			}
		})
	}
}

func TestExecEnv(t *testing.T) {
	t.Setenv("HARNESS_TOOLS_TEST_SECRET", "leak")
	env := newEnv(t)
	env.CmdEnv = sandbox.MinimalEnv("MARKER=1")
	out, err := invoke(t, env, "exec", `{"argv":["env"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Content, "HARNESS_TOOLS_TEST_SECRET") || !strings.Contains(out.Content, "MARKER=1") {
		t.Errorf("exec(env) = %q, want MARKER=1 and not the sandboxer's secret", out.Content)
	}
}

func TestExecWithoutSandbox(t *testing.T) {
	env := newEnv(t)
	env.Sandbox = nil
	if _, err := invoke(t, env, "exec", `{"argv":["true"]}`); codeOf(err) != protocol.CodeUnsupported {
		t.Errorf("exec without a sandbox = %v, want code %v", err, protocol.CodeUnsupported)
	}
}

func TestExecCancelled(t *testing.T) {
	env := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Exec{}.Invoke(ctx, env, []byte(`{"argv":["sleep","30"]}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("exec(sleep 30) past its context = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("exec(sleep 30) took %v after its context ended", took)
	}
}

func TestExecWorkspaceDir(t *testing.T) {
	env := newEnv(t)
	if _, err := invoke(t, env, "exec", `{"argv":["sh","-c","echo x > out.txt"]}`); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(env.Workspace.Dir(), "out.txt")); err != nil || string(b) != "x\n" {
		t.Errorf("out.txt = %q, %v; want the command to have run in the workspace", b, err)
	}
}
