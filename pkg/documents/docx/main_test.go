//go:build docx || documents

package docx

import (
	"os"
	"testing"

	"github.com/ioharness/harness/pkg/documents"
)

// TestMain lets the test binary serve as the child process of an
// isolated operation (documents.Isolate), after init has registered the
// operations.
func TestMain(m *testing.M) {
	documents.RunChildIfRequested()
	os.Exit(m.Run())
}
