package version

import (
	"runtime/debug"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/internal/testkit"
)

const rev = "bd80886807c31fd97b9f023b9b4b0a849c44edd3"

func vcs(modified string) []debug.BuildSetting {
	return []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
}

func TestFromBuildInfo(t *testing.T) {
	const mod = "github.com/ioharness/harness"
	tests := []struct {
		name       string
		bi         *debug.BuildInfo
		wantSemver string
		wantLine   string
	}{
		{"no build information", nil, "0.0.0-dev",
			mod + " 0.0.0-dev revision unknown go-unknown"},
		{"go test or -buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "(devel)"}},
			"0.0.0-dev", mod + " 0.0.0-dev revision unknown go1.26.8"},
		{"devel with a clean revision", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "(devel)"}, Settings: vcs("false")},
			"0.0.0-dev+bd80886807c3", mod + " 0.0.0-dev+bd80886807c3 revision " + rev + " go1.26.8"},
		{"devel with a dirty tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "(devel)"}, Settings: vcs("true")},
			"0.0.0-dev+bd80886807c3.dirty", mod + " 0.0.0-dev+bd80886807c3.dirty revision " + rev + "+dirty go1.26.8"},
		{"a pseudo-version stamped from the tree", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: mod, Version: "v0.0.0-20261201221742-bd80886807c3+dirty"}, Settings: vcs("true")},
			"0.0.0-20261201221742-bd80886807c3+dirty", mod + " 0.0.0-20261201221742-bd80886807c3+dirty revision " + rev + "+dirty go1.26.8"},
		{"a tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.2.0"}, Settings: vcs("false")},
			"0.2.0", mod + " 0.2.0 revision " + rev + " go1.26.8"},
		{"a dependency of another module", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/embedder", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "github.com/nats-io/nats.go", Version: "v1.40.0"}, {Path: mod, Version: "v0.3.1"}}, Settings: vcs("true")},
			"0.3.1", mod + " 0.3.1 revision unknown go1.26.8"},
		{"a dependency replaced by a directory", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/embedder"},
			Deps: []*debug.Module{{Path: mod, Version: "v0.3.1", Replace: &debug.Module{Path: "../harness"}}}},
			"0.0.0-dev", mod + " 0.0.0-dev revision unknown go1.26.8"},
		{"a version that is not semver", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v1.2"}},
			"0.0.0-dev", mod + " 0.0.0-dev revision unknown go-unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := fromBuildInfo(tt.bi)
			if got := info.Semver(); got != tt.wantSemver {
				t.Errorf("Semver() = %q, want %q", got, tt.wantSemver)
			}
			if !semverRE().MatchString(info.Semver()) {
				t.Errorf("Semver() = %q is not semver", info.Semver())
			}
			if got := info.String(); got != tt.wantLine {
				t.Errorf("String() = %q, want %q", got, tt.wantLine)
			}
		})
	}
}

// TestModulePath: the module path comes out of this package's import path.
func TestModulePath(t *testing.T) {
	if got, want := Get().Module, "github.com/ioharness/harness"; got != want {
		t.Errorf("Get().Module = %q, want %q", got, want)
	}
}

// TestMicroAcceptsEveryShape registers a micro service under each shape
// of version a build can carry, this test binary's own (a dev build)
// among them: micro refuses a version that is not semver, and a role
// whose service does not register does not run.
func TestMicroAcceptsEveryShape(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	for _, v := range []string{Semver(), Info{Revision: rev}.Semver(), Info{Revision: rev, Modified: true}.Semver(),
		Info{Version: "v0.0.0-20261201221742-bd80886807c3+dirty"}.Semver(), Info{Version: "v1.2.3-rc.1"}.Semver()} {
		svc, err := micro.AddService(nc, micro.Config{Name: "version-test", Version: v})
		if err != nil {
			t.Errorf("micro.AddService with version %q: %v", v, err)
			continue
		}
		if got := svc.Info().Version; got != v {
			t.Errorf("service version = %q, want %q", got, v)
		}
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
	}
}
