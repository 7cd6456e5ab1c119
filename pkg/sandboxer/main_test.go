package sandboxer_test

import (
	"os"
	"testing"

	"github.com/ioharness/harness/internal/mcptest"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// TestMain lets the native sandbox re-execute this test binary as its init,
// as the harness binaries' mains do, so tests can run commands (and the
// harness's own git) on the native backend, and the MCP benchmark start it
// as its server.
func TestMain(m *testing.M) {
	native.RunShimIfRequested()
	mcptest.ServeIfRequested()
	os.Exit(m.Run())
}
