package sandboxer_test

import (
	"os"
	"testing"

	"github.com/ioharness/harness/pkg/sandbox/native"
)

// TestMain lets the native sandbox re-execute this test binary as its init,
// as the harness binaries' mains do, so tests can run commands (and the
// harness's own git) on the native backend.
func TestMain(m *testing.M) {
	native.RunShimIfRequested()
	os.Exit(m.Run())
}
