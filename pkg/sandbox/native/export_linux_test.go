//go:build linux && (amd64 || arm64)

package native

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// KillRest is killRest, for TestShimKillsOnlyAsPID1.
var KillRest = killRest

// FindInit is findInit, for TestNativeInit.
var FindInit = findInit

// AskBuild makes Backends ask the sandbox's inits they start to be of
// build v instead of their own, until the function it returns is called.
func AskBuild(v string) (restore func()) {
	wantBuild = func() string { return v }
	return func() { wantBuild = shimBuild }
}

// ShimBuild is shimBuild, for TestInitBuildCoversThePackage.
var ShimBuild = shimBuild

// BuiltInit builds harness-sandbox-init once for the test binary, into a
// directory removed when the process's tests end (TestMain), and returns
// its path.
func BuiltInit(tb testing.TB) string {
	tb.Helper()
	initOnce.Do(func() {
		dir, err := os.MkdirTemp("", "harness-init-")
		if err != nil {
			initErr = err
			return
		}
		InitDir = dir
		cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/ioharness/harness/cmd/harness-sandbox-init")
		if out, err := cmd.CombinedOutput(); err != nil {
			initErr = fmt.Errorf("go build ./cmd/harness-sandbox-init: %v\n%s", err, out)
			return
		}
		initPath = filepath.Join(dir, InitName)
	})
	if initErr != nil {
		tb.Fatal(initErr)
	}
	return initPath
}

var (
	initOnce sync.Once
	initPath string
	initErr  error
	// InitDir holds the harness-sandbox-init builtInit built, if it ran.
	InitDir string
)
