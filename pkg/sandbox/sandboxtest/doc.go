// Package sandboxtest is the conformance suite every sandbox.Backend must
// pass. A backend's tests call Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return floor.New() })
//	}
//
// The suite runs real commands (sh, sleep, env, seq, true, false, pwd, cat,
// and for the containment tests tail, bash, setsid, cut and tr; a test
// whose command is missing can pass without testing anything, so a
// backend's image must have them all) that a backend must find on
// its PATH, which it takes from sandbox.MinimalEnv. A cap that a backend
// lists in Report.Unenforced is skipped, with the reason, rather than
// failed.
//
// The containment tests (fork bomb, memory hog, CPU spin, network, writes
// outside the workspace, host files, daemons, a cap hit followed by exit 0)
// run for the caps and confinements a backend declares through
// sandbox.Enforcer, and are skipped, with the reason, for the others.
// DeclarationsMatchReports fails a backend that declares a label the suite
// has no test for, or whose declarations disagree with Report.Unenforced,
// so a claim cannot go untested. NoLeftoversAfter100Runs checks, for every
// backend, that 100 commands leave no process, mount or temporary
// directory behind, nor anything sandbox.LeftoverLister lists. The tests
// look for leftover processes in /proc, so the suite must run on the
// machine whose kernel runs the commands.
//
// The suite needs a Unix system; elsewhere the package is empty.
package sandboxtest
