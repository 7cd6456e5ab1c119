//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
)

// newEnv returns an Env over a fresh workspace, with the floor sandbox.
func newEnv(t *testing.T) *Env {
	t.Helper()
	w, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &Env{
		Workspace: w,
		Sandbox:   floor.New(),
		CmdEnv:    sandbox.MinimalEnv(),
		Limits:    protocol.Limits{WallSecs: 20},
	}
}

// invoke calls the built-in tool name with args.
func invoke(t *testing.T, env *Env, name, args string) (*Output, error) {
	t.Helper()
	tool, ok := Builtins().Get(name)
	if !ok {
		t.Fatalf("Builtins().Get(%q) found nothing", name)
	}
	return tool.Invoke(context.Background(), env, json.RawMessage(args))
}

// codeOf returns the code of err, or 0 for nil.
func codeOf(err error) protocol.Code {
	if err == nil {
		return 0
	}
	return protocol.AsError(err).Code
}

// writeFiles creates files (path → content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// argsJSON marshals v for a tool call.
func argsJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// judgeBy makes an Env.Judge of a yes-or-no rule; nil for nil.
func judgeBy(allow func(act, rel string) bool) func(act, rel string) error {
	if allow == nil {
		return nil
	}
	return func(act, rel string) error {
		if allow(act, rel) {
			return nil
		}
		return protocol.Errorf(protocol.CodeRefused, "[%s refused] %q: denied by the test's rule", act, rel)
	}
}
