package native

import (
	"embed"
	"fmt"
	"hash/crc32"
	"io/fs"
	"runtime"
	"sync"
)

// source is this package's code, from which a sandbox's init is built,
// whichever program holds it: the running program, or a
// harness-sandbox-init beside it. TestInitBuildCoversThePackage keeps
// the list whole.
//
//go:embed cgroup_linux.go doc.go native.go native_linux.go native_other.go netns_linux.go routes_linux.go
//go:embed shim_landlock_linux.go shim_linux.go shim_other.go shim_seccomp_linux.go shim_sys_amd64.go shim_sys_arm64.go
//go:embed start_linux.go tree_linux.go build.go
var source embed.FS

// shimBuild names the build of a sandbox's init this program holds: the
// Go release and a checksum of this package's code. A Backend passes its
// own to each init it starts, and an init of another build (a
// harness-sandbox-init older or newer than the sandboxer beside it, whose
// containment may differ) refuses to set anything up: a sandbox is always
// confined by the code of the program that asked for it.
var shimBuild = sync.OnceValue(func() string {
	// IEEE, not Castagnoli: every init computes this as it starts, and
	// Castagnoli's tables take longer to make than the sum itself.
	h := crc32.NewIEEE()
	_ = fs.WalkDir(source, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := source.ReadFile(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
		return nil
	})
	return fmt.Sprintf("%s-%08x", runtime.Version(), h.Sum32())
})
