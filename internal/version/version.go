// Package version says which build of the harness module a binary holds,
// from the build information the Go toolchain stamps into every binary:
// one version for the whole module, reported alike by every role's micro
// service and by every command's --version.
package version

import (
	"fmt"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
)

// Info is which build of the module a binary holds.
type Info struct {
	// Module is the module's path, github.com/ioharness/harness.
	Module string
	// Version is the module's version as the toolchain stamped it: a tag
	// (v0.2.0), a pseudo-version (v0.0.0-20260102150405-abcdef012345,
	// with +dirty for a modified work tree), or "(devel)" or empty when
	// the build carries none (go test, -buildvcs=false).
	Version string
	// Revision is the VCS revision the build came from; empty when the
	// build was not stamped.
	Revision string
	// Modified says the work tree had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// modulePath is this module's path, from this package's own import path,
// so it holds under any fork or rename.
var modulePath = strings.TrimSuffix(reflect.TypeFor[Info]().PkgPath(), "/internal/version")

// Get reads the running binary's build information. The module is found
// as the main module, or among the dependencies when another module
// embeds the roles; a binary without build information gets an Info with
// only Module set.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi)
}

// Semver is Get().Semver(): the version the roles' micro services report.
func Semver() string { return Get().Semver() }

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Module: modulePath}
	if bi == nil {
		return info
	}
	info.GoVersion = bi.GoVersion
	switch {
	case bi.Main.Path == modulePath:
		info.Version = bi.Main.Version
		// The VCS settings describe the main module's tree only.
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	default:
		for _, d := range bi.Deps {
			if d.Path != modulePath {
				continue
			}
			info.Version = d.Version
			if d.Replace != nil {
				// A replacement by a directory has no version: a dev build.
				info.Version = d.Replace.Version
			}
		}
	}
	return info
}

// semverRE is semver.org's suggested expression, the one nats.go's micro
// package validates a service's version with; compiled when first asked
// for, not at start-up, since harness-sandbox-init, which starts for every
// sandbox, holds this package for its --version.
var semverRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
})

// devVersion stands for a build that carries no module version.
const devVersion = "0.0.0-dev"

// Semver is the version as a semantic version without the leading "v", as
// micro services must give it: the stamped tag or pseudo-version, else
// (a build without one) 0.0.0-dev, with the first twelve digits of the
// revision and "dirty" as build metadata where the build knows them:
// 0.0.0-dev+abcdef012345.dirty.
func (i Info) Semver() string {
	if v := strings.TrimPrefix(i.Version, "v"); v != i.Version && semverRE().MatchString(v) {
		return v
	}
	var meta []string
	if rev := i.Revision[:min(len(i.Revision), 12)]; rev != "" && semverRE().MatchString(devVersion+"+"+rev) {
		meta = append(meta, rev)
	}
	if i.Modified {
		meta = append(meta, "dirty")
	}
	if len(meta) == 0 {
		return devVersion
	}
	return devVersion + "+" + strings.Join(meta, ".")
}

// String is the line every binary's --version prints: the module path,
// the version (Semver), the VCS revision and the Go version.
//
//	github.com/ioharness/harness 0.2.0 revision abcdef0123456789abcdef0123456789abcdef01 go1.26.1
func (i Info) String() string {
	rev := i.Revision
	switch {
	case rev == "":
		rev = "unknown"
	case i.Modified:
		rev += "+dirty"
	}
	goVersion := i.GoVersion
	if goVersion == "" {
		goVersion = "go-unknown"
	}
	return fmt.Sprintf("%s %s revision %s %s", i.Module, i.Semver(), rev, goVersion)
}
