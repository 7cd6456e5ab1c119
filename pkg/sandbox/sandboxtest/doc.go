// Package sandboxtest is the conformance suite every sandbox.Backend must
// pass. A backend's tests call Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return sandbox.NewFloor() })
//	}
//
// The suite runs real commands (sh, sleep, env, seq, true, false, pwd, cat)
// that a backend must find on its PATH, which it takes from
// sandbox.MinimalEnv. A cap that a backend lists in Report.Unenforced is
// skipped, with the reason, rather than failed.
//
// The suite needs a Unix system; elsewhere the package is empty.
package sandboxtest
