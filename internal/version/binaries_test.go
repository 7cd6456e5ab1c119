package version

import (
	"bytes"
	"debug/buildinfo"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBinariesPrintTheirVersion builds the five binaries as a person does,
// stamped from the repository where there is one, and runs each with
// --version: each exits 0 and prints its name and the line its own build
// information gives, naming the module, a version micro accepts, the
// revision the tree is at, and the Go version.
func TestBinariesPrintTheirVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the five binaries; run without -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Stamp the revision when the tree is a repository git can read (a
	// build from a tarball has none, and says "revision unknown").
	vcs, head := "-buildvcs=false", ""
	if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		vcs, head = "-buildvcs=true", strings.TrimSpace(string(out))
	}
	dir := t.TempDir()
	names := []string{"coordinator", "worker", "sandboxer", "harness", "harness-sandbox-init"}
	args := []string{"build", vcs, "-o", dir + "/"}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			bin := filepath.Join(dir, n)
			bi, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			info := fromBuildInfo(bi)
			if head != "" && info.Revision != head {
				t.Errorf("%s was stamped with revision %q, want %q (git rev-parse HEAD)", n, info.Revision, head)
			}
			if info.GoVersion != runtime.Version() {
				t.Errorf("%s was built by %q, want %q", n, info.GoVersion, runtime.Version())
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "--version")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s --version: %v\nstderr: %s", n, err, stderr.String())
			}
			if got, want := stdout.String(), n+" "+info.String()+"\n"; got != want {
				t.Errorf("%s --version printed %q, want %q", n, got, want)
			}
			for _, part := range []string{"github.com/ioharness/harness ", " " + info.Semver() + " ", " revision ", " " + runtime.Version()} {
				if !strings.Contains(stdout.String(), part) {
					t.Errorf("%s --version = %q, lacks %q", n, stdout.String(), part)
				}
			}
			if !semverRE().MatchString(info.Semver()) {
				t.Errorf("%s reports %q, which micro refuses", n, info.Semver())
			}
		})
	}
}
