package native

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
)

// ErrUnavailable is wrapped by the error New returns when this machine or
// process cannot run the native backend; the message says what is missing
// (a kernel feature, cgroup write access, the shim hook in main). A caller
// choosing a backend falls back to another on it.
var ErrUnavailable = errors.New("the native sandbox is unavailable")

// Config configures the native backend. The zero value is the default:
// the system directories visible read-only, the built-in list of
// secrets hidden, no CPU bandwidth cap, a user namespace only when the
// sandboxer is not root, cgroups required, and two warm sandboxes.
type Config struct {
	// ReadOnly lists further host paths (absolute) shown read-only at the
	// same path inside the sandbox, such as a shared Go module cache. The
	// system directories /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32
	// and /etc are always shown; nothing else of the host is. Default none.
	ReadOnly []string
	// Hide lists further paths (absolute) inside the visible tree to mask
	// with an empty file or directory. Always hidden: /etc/shadow,
	// /etc/gshadow (and their "-" backups), /etc/ssh/ssh_host_*_key,
	// /etc/ssl/private, /etc/sudoers, /etc/sudoers.d and
	// /etc/security/opasswd. Default none.
	Hide []string
	// CPUs caps each command's CPU bandwidth, in cores, through the cgroup
	// CPU controller (a throttle, unlike the CPU-seconds cap, which kills).
	// Default 0: no bandwidth cap.
	CPUs float64
	// UserNamespace runs every sandbox in a new user namespace even when
	// the sandboxer is root (the command is uid 0 inside, mapped to the
	// sandboxer's uid). Default false: a user namespace only when the
	// sandboxer is not root, which needs one to create the others.
	UserNamespace bool
	// AllowMissingCgroups lets New succeed when the sandboxer cannot
	// create cgroups for the memory or pids controllers (an unprivileged
	// sandboxer without delegation). The caps it cannot apply are then
	// absent from Enforces and listed in every Report.Unenforced; every
	// process still dies with the sandbox's PID namespace. Default false:
	// New returns ErrUnavailable naming what is missing.
	AllowMissingCgroups bool
	// GoCache is a host directory holding a Go build cache (a GOCACHE)
	// that every sandbox reads through an overlay of its own at
	// SandboxGoCache, where its GOCACHE then points: a command's builds
	// reuse what the cache holds, and what they write goes to the
	// sandbox's private /tmp only, never to the host's cache or another
	// sandbox. The cache's contents (compiled packages, cached test
	// output) become readable to commands, so share only a cache of
	// builds they may see. Default "": each command starts with an empty
	// cache, and a Go build compiles the standard library again.
	GoCache string
	// NetworkHelper is the path of slirp4netns, which gives a command that
	// may use the network (Spec.Network) a route out of its own network
	// namespace, with the host's loopback out of reach. Default: found on
	// PATH. Without one, such a command is refused (CodeUnsupported), never
	// run in the host's network namespace.
	NetworkHelper string
	// Unreachable lists addresses (an IP, or a prefix such as
	// 10.1.0.0/16) that a command which may use the network must not
	// reach through its route out: the cluster's NATS and Redis, a Docker
	// engine's TCP socket (cmd/sandboxer gives those of its own NATS,
	// REDIS_URL and DOCKER_HOST). Each sandbox's network namespace routes
	// them nowhere. The host's loopback is out of reach whatever this
	// says; its other addresses are not, unless listed. Default none.
	Unreachable []string
	// Warm is how many sandboxes for network-denied commands are kept
	// started and waiting, each used by one command only, so that a
	// command does not wait for the sandbox's init to start (the
	// sandboxer's binary starting up again: several milliseconds). A
	// waiting sandbox has its namespaces, its cgroups and its root (all
	// but the workspace) ready; it gets the workspace and its caps from
	// the command that takes it. A sandbox taken is replaced once the
	// Runs under way end (after 20 ms at most), at once when fewer than
	// Warm are left waiting. Close stops them. Default 0 means 2; a
	// negative value keeps none.
	Warm int
	// Init is the path of harness-sandbox-init (cmd/harness-sandbox-init),
	// the program each sandbox's init runs. Default: harness-sandbox-init
	// in the directory of the running program when it is there (go build
	// -o bin/ ./cmd/... puts it beside the sandboxer), else the running
	// program itself, which must then call RunShimIfRequested. Either
	// confines the same; a sandbox starts several times faster with the
	// small program than with a large one such as the sandboxer, whose
	// start-up initialises every package it holds. New runs a copy of the
	// file, taken once (a file put in its place later is not run), and
	// only if it is of this program's build; otherwise, when the program
	// calls RunShimIfRequested, it uses the program itself and logs why.
	// Keep it out of every workspace: Backend.Programs names it, and a
	// sandboxer refuses workspaces that overlap its directory.
	Init string
	// Logger receives what an operator needs and a caller does not: a
	// way of setting sandboxes up that New tried and fell back from, with
	// the reason. Default: discard.
	Logger *slog.Logger
}

// InitName is the name of the program that is nothing but a sandbox's
// init (cmd/harness-sandbox-init, whose main is InitMain), which New looks
// for beside the running program.
const InitName = "harness-sandbox-init"

// defaultWarm is the number of warm sandboxes when Config.Warm is 0.
const defaultWarm = 2

// Validate reports the first field of c that cannot be used.
func (c Config) Validate() error {
	for _, p := range c.ReadOnly {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("native sandbox: read-only path %q must be absolute and not /", p)
		}
	}
	for _, p := range c.Hide {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("native sandbox: hidden path %q must be absolute and not /", p)
		}
	}
	if c.GoCache != "" && !filepath.IsAbs(c.GoCache) {
		return fmt.Errorf("native sandbox: Go cache %q must be an absolute path", c.GoCache)
	}
	if c.CPUs < 0 {
		return fmt.Errorf("native sandbox: CPUs is %v; use a positive number of cores, or 0 for no bandwidth cap", c.CPUs)
	}
	return nil
}

// systemDirs are the host directories every sandbox shows read-only.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// secretPaths are hidden inside /etc in every sandbox (globs).
var secretPaths = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/ssh/ssh_host_*_key", "/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/security/opasswd",
}
