package clustertest

import (
	"bytes"
	"os/exec"
	"testing"
)

// BuildRoles builds the real role binaries (coordinator, worker,
// sandboxer and the harness command line, with harness-sandbox-init beside
// them as deploy/build puts it) from the module root into a fresh
// directory of the test, and returns that directory. It fails t
// with the compiler's output when the build fails.
func BuildRoles(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/coordinator", "./cmd/worker", "./cmd/sandboxer", "./cmd/harness", "./cmd/harness-sandbox-init")
	cmd.Dir = Repo(".")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("build the role binaries: %v\n%s", err, out.String())
	}
	return dir
}
