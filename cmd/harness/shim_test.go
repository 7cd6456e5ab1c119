package main

import (
	"os"
	"testing"

	"github.com/ioharness/harness/pkg/sandbox/native"
)

// TestMain lets the native sandbox re-execute this test binary as its init,
// as the harness binary's main does.
func TestMain(m *testing.M) {
	native.RunShimIfRequested()
	os.Exit(m.Run())
}
