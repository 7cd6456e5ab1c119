package harness_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMisplacedOptionsDoNotCompile builds small programs against the API,
// through a build overlay, and checks that an option passed where it does
// not apply is a compile error naming the call's option type, while the
// same options in their places build.
func TestMisplacedOptionsDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Go toolchain")
	}
	cases := []struct {
		name, body, want string // want "" for a program that must build
	}{
		{"in their places", `
	_, _ = harness.Run(ctx, c, harness.WithProvider(nil), harness.WithRunID("x"), harness.WithObserver(nil))
	_, _ = harness.Resume(ctx, "r", harness.WithDataDir("d"), harness.WithPolicy(nil), harness.WithDecision("r.1.0", nil), harness.WithObserver(nil))
	var cl *harness.Client
	h, _ := cl.Submit(ctx, c, harness.WithRunID("x"), harness.WithObserver(nil))
	_, _ = h.Resume(ctx, harness.WithPolicy(nil), harness.WithDecision("r.1.0", nil))`, ""},
		{"a policy for Run", `_, _ = harness.Run(ctx, c, harness.WithPolicy(nil))`, "does not implement harness.RunOption"},
		{"a decision for Run", `_, _ = harness.Run(ctx, c, harness.WithDecision("r.1.0", nil))`, "does not implement harness.RunOption"},
		{"a run id for Resume", `_, _ = harness.Resume(ctx, "r", harness.WithRunID("x"))`, "does not implement harness.ResumeOption"},
		{"a cluster option for Submit", `var cl *harness.Client
	_, _ = cl.Submit(ctx, c, harness.WithProvider(nil))`, "does not implement harness.SubmitOption"},
		{"a policy for Submit", `var cl *harness.Client
	_, _ = cl.Submit(ctx, c, harness.WithPolicy(nil))`, "does not implement harness.SubmitOption"},
		{"a cluster option for a handle's Resume", `var h *harness.RunHandle
	_, _ = h.Resume(ctx, harness.WithDataDir("d"))`, "does not implement harness.CarryOption"},
		{"an observer for a handle's Resume", `var h *harness.RunHandle
	_, _ = h.Resume(ctx, harness.WithObserver(nil))`, "does not implement harness.CarryOption"},
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "main.go")
			prog := "package main\n\nimport (\n\t\"context\"\n\n\t\"github.com/ioharness/harness\"\n\t\"github.com/ioharness/harness/pkg/protocol\"\n)\n\n" +
				"func main() {\n\tctx, c := context.Background(), &protocol.Contract{}\n\t" + tt.body + "\n}\n"
			if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			// The program is a package of this module that exists only in
			// the overlay.
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "internal", "misplacedoption", "main.go"): src}})
			ov := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, "./internal/misplacedoption").CombinedOutput()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("options in their places do not build: %v\n%s", err, out)
			case tt.want != "" && err == nil:
				t.Fatalf("%s builds; want the compile error %q", tt.name, tt.want)
			case tt.want != "" && !strings.Contains(string(out), tt.want):
				t.Fatalf("%s fails to build with\n%s\nwant an error saying %q", tt.name, out, tt.want)
			}
		})
	}
}
