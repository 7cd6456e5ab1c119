package native

import (
	"embed"
	"fmt"
	"hash/crc32"
	"io/fs"
	"runtime"
	"sync"

	"github.com/ioharness/harness/pkg/sandbox/internal/process"
)

// source is this package's code, from which a sandbox's init is built,
// whichever program holds it: the running program, or a
// harness-sandbox-init beside it (with the program look-up of package
// process, process.Source). TestInitBuildCoversThePackage keeps the list
// whole.
//
//go:embed cgroup_linux.go doc.go native.go native_linux.go native_other.go netns_linux.go routes_linux.go
//go:embed shim_landlock_linux.go shim_linux.go shim_other.go shim_seccomp_linux.go shim_sys_amd64.go shim_sys_arm64.go
//go:embed start_linux.go tree_linux.go build.go
var source embed.FS

// shimBuild names the build of a sandbox's init this program holds: the
// Go release and a checksum of the code that sets a sandbox up (this
// package's and package process's). New asks a harness-sandbox-init for
// its build and starts itself as the init instead when it is another (an
// init older or newer than the sandboxer beside it, whose containment may
// differ), and each init checks it again against the build its Backend
// asks for. It tells a stale install from the right one; it is no
// integrity check (a program can say any build): what keeps an agent from
// replacing the init is that no workspace may contain it, and that the
// init New checked is the one every sandbox runs (loadInit).
var shimBuild = sync.OnceValue(func() string {
	// IEEE, not Castagnoli: every init computes this as it starts, and
	// Castagnoli's tables take longer to make than the sum itself.
	h := crc32.NewIEEE()
	for _, src := range []fs.FS{source, process.Source} {
		_ = fs.WalkDir(src, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(src, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %d\n", name, len(b))
			h.Write(b)
			return nil
		})
	}
	return fmt.Sprintf("%s-%08x", runtime.Version(), h.Sum32())
})
