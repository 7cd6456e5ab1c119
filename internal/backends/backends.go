// Package backends builds the sandbox backends a sandboxer offers from a
// list of names, probing each once: a backend this machine cannot run is
// left out with the reason logged, so "auto" means the best that really
// works here, and every exec still records the backend that ran it.
package backends

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/docker"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// Options are the settings of the backends Build makes. The zero value
// means the defaults.
type Options struct {
	// DockerImage is the image the docker backend runs ("" for its
	// default, harness-sandbox:latest); it must be on the engine already:
	// nothing is pulled.
	DockerImage string
	// GoCache is a host Go build cache the native backend's sandboxes
	// read through an overlay (native.Config.GoCache); "" for none.
	GoCache string
	// Unreachable are addresses a native sandbox that may use the network
	// must not reach (native.Config.Unreachable): the cluster's, from
	// ControlPlane.
	Unreachable []string
}

// ControlPlane returns the IP addresses of the servers the given URLs name
// (NATS URLs, comma-separated lists of them, a Redis URL, a tcp:// Docker
// host), for Options.Unreachable: what no sandboxed command may dial. A
// host name is resolved now; one that does not resolve is left out, and so
// is a URL that does not parse.
func ControlPlane(urls ...string) []string {
	var out []string
	for _, list := range urls {
		for _, raw := range strings.Split(list, ",") {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			if !strings.Contains(raw, "://") {
				raw = "nats://" + raw
			}
			u, err := url.Parse(raw)
			if err != nil || u.Hostname() == "" {
				continue
			}
			if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
				out = append(out, ip.String())
				continue
			}
			ips, err := net.LookupIP(u.Hostname())
			if err != nil {
				continue
			}
			for _, ip := range ips {
				out = append(out, ip.String())
			}
		}
	}
	return out
}

// UserGoCache returns the Go build cache of this user, for Options.GoCache:
// $GOCACHE if set, else the go-build directory of the user's cache
// directory, if it exists; "" when there is none.
func UserGoCache(getenv func(string) string) string {
	if c := getenv("GOCACHE"); c != "" && c != "off" && filepath.IsAbs(c) {
		return c
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	c := filepath.Join(dir, "go-build")
	if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
		return ""
	}
	return c
}

// Build returns the backends named in order (a comma-separated list of
// "native", "docker" and "floor"), best first, leaving out those that do
// not start here, and why each was left out (by name), so a sandboxer can
// say what it lacks when it refuses a contract. The floor always starts,
// but runs commands only where the operator allows it
// (sandboxer.Config.AllowFloor). Errors: an unknown name, or no backend
// left.
func Build(ctx context.Context, names string, o Options, log *slog.Logger) ([]sandbox.Backend, map[string]string, error) {
	var out []sandbox.Backend
	missing := map[string]string{}
	for _, name := range strings.Split(names, ",") {
		switch strings.TrimSpace(name) {
		case "native":
			b, err := native.New(native.Config{GoCache: o.GoCache, Unreachable: o.Unreachable, Logger: log})
			if err != nil {
				log.Warn("native sandbox unavailable; leaving it out", "err", err)
				missing["native"] = err.Error()
				continue
			}
			log.Info("native sandbox ready", "layers", strings.Join(b.Layers(), " "))
			out = append(out, b)
		case "docker":
			b, err := docker.New(docker.Config{Image: o.DockerImage})
			if err != nil {
				log.Warn("docker sandbox unavailable; leaving it out", "err", err)
				missing["docker"] = err.Error()
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = b.Ping(pctx)
			cancel()
			if err != nil {
				log.Warn("docker engine does not answer; leaving the docker sandbox out", "err", err)
				missing["docker"] = "the docker engine does not answer: " + err.Error()
				continue
			}
			out = append(out, b)
		case "floor":
			out = append(out, floor.New())
		case "":
		default:
			return nil, nil, fmt.Errorf("unknown sandbox backend %q: use native, docker and floor", name)
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("no sandbox backend of %q works here; add floor (with --allow-floor) to run commands unsandboxed", names)
	}
	return out, missing, nil
}
