//go:build unix

package docker

import (
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// The pure core of the backend: what a command's container is made of,
// and what its end means. Run does the I/O around them (the engine calls,
// the cgroup watch, the timers); these decide, and are tested without an
// engine.

// command is a command as its container is made for it: a Spec resolved
// against the host.
type command struct {
	argv    []string
	dir     string          // the working directory, links resolved: bind-mounted at its own path
	owner   string          // "uid:gid" of dir, the user when Config.User is empty; "" if unknown
	env     []string        // exactly Spec.Env
	lim     protocol.Limits // with the defaults (sandbox.LimitsOf)
	network bool            // Spec.Network
	run, op string          // named by sandbox.WithRun, or ""
}

// containerConfig returns the configuration of the container that runs c
// in image, confined and capped as Backend documents. cfg has its
// defaults.
func containerConfig(cfg Config, image string, c command) (*container.Config, *container.HostConfig) {
	user := cfg.User
	if user == "" {
		user = c.owner
	}
	env := c.env
	if env == nil {
		env = []string{} // nil would mean the image's environment
	}
	netMode := "none"
	if c.network {
		netMode = cfg.Network
	}
	pids := int64(c.lim.Pids)
	yes := true
	cc := &container.Config{
		Hostname:   "sandbox",
		User:       user,
		Env:        env,
		Entrypoint: c.argv,
		Cmd:        []string{},
		Image:      image,
		WorkingDir: c.dir,
		Labels:     map[string]string{LabelSandboxer: cfg.SandboxerID, LabelRun: c.run, LabelOp: c.op},
		StopSignal: "SIGKILL",
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(netMode),
		LogConfig:      container.LogConfig{Type: "none"}, // output comes from attach
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		IpcMode:        "private",
		Init:           &yes,
		Tmpfs:          map[string]string{"/tmp": "rw,exec,nosuid,nodev,size=" + strconv.FormatInt(cfg.TmpfsBytes, 10)},
		Mounts: []mount.Mount{{
			Type: mount.TypeBind, Source: c.dir, Target: c.dir,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		}},
		Resources: container.Resources{
			Memory:     c.lim.MemoryBytes,
			MemorySwap: c.lim.MemoryBytes, // no swap
			NanoCPUs:   int64(cfg.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				// A backstop: the cgroup watch kills the container when
				// its processes have used CPUSecs in all.
				{Name: "cpu", Soft: int64(c.lim.CPUSecs) + 1, Hard: int64(c.lim.CPUSecs) + 2},
				{Name: "nofile", Soft: int64(c.lim.OpenFiles), Hard: int64(c.lim.OpenFiles)},
			},
		},
	}
	return cc, hc
}

// ending is how a command's container ended, as Run saw it.
type ending struct {
	status  int64            // the engine's exit status, -1 if it gave none
	wallHit bool             // the wall-clock cap fired, and Run killed the container
	killed  bool             // Run killed the container: for the wall clock, or because ctx ended
	usage   cgroupUsage      // what the container's cgroup said while it ran
	state   *container.State // the engine's inspect state after the exit; nil if the inspect failed
	stderr  string           // the command's error output, bounded
}

// attribute decides how a command ended, as Backend documents it: whether
// it exited on its own and with what code, the signal that killed it, and
// which cap ended it. It fills Exited, ExitCode, Signal and CapHit of the
// report and nothing else.
func attribute(e ending, lim protocol.Limits) protocol.ExecReport {
	rep := protocol.ExecReport{ExitCode: -1}
	capHit := ""
	if e.wallHit {
		capHit = sandbox.CapWall
	}
	oom := e.state != nil && e.state.OOMKilled
	st := decodeStatus(e.status)
	if st.exited && capHit == sandbox.CapWall {
		capHit = "" // it ended on its own before the kill landed
	}
	switch {
	case capHit != "":
	case e.usage.capHit != "":
		capHit = e.usage.capHit
	case oom:
		capHit = sandbox.CapMemory
	case e.killed:
	case st.sig == syscall.SIGXCPU || e.usage.cpu >= time.Duration(lim.CPUSecs)*time.Second:
		capHit = sandbox.CapCPU
	case st.exited && st.code != 0 && lim.Pids > 0 && forkRefused(e.stderr):
		// The engine removes a container's cgroup as soon as its last
		// process ends, so a command that gave up the moment a fork was
		// refused can be gone before the pids counter is read. A fork
		// refused inside a container whose only process limit is the pids
		// cap was refused by that cap.
		capHit = sandbox.CapPids
	}
	switch {
	case capHit != "":
		// A cap ended the command, or struck one of its processes: not an
		// exit of its own, even when its first process then exited 0.
		rep.Signal = st.signal
		if rep.Signal == "" && (capHit == sandbox.CapMemory || capHit == sandbox.CapPids) {
			rep.Signal = sandbox.SignalName(syscall.SIGKILL) // what the sandbox ends it with
		}
	case st.exited:
		rep.Exited, rep.ExitCode = true, st.code
	default:
		rep.Signal = st.signal
	}
	rep.CapHit = capHit
	return rep
}

// exitStatus is a status as the engine reports it, decoded.
type exitStatus struct {
	exited bool
	code   int
	sig    syscall.Signal
	signal string
}

// decodeStatus decodes an engine status: 128+N is death by signal N.
func decodeStatus(status int64) exitStatus {
	if status > 128 && status <= 128+64 {
		sig := syscall.Signal(status - 128)
		return exitStatus{code: -1, sig: sig, signal: sandbox.SignalName(sig)}
	}
	if status < 0 {
		return exitStatus{code: -1}
	}
	return exitStatus{exited: true, code: int(status)}
}

// forkRefused reports whether a command's error output says a fork was
// refused for want of processes (EAGAIN), as shells and runtimes word it.
func forkRefused(stderr string) bool {
	for _, m := range []string{"Cannot fork", "fork: retry", "fork: Resource temporarily unavailable", "can't fork", "Resource temporarily unavailable"} {
		if strings.Contains(stderr, m) {
			return true
		}
	}
	return false
}

// discarded returns the caps that the engine's warnings on creating a
// container say it discarded (a kernel without the pids or memory
// controller), for Report.Unenforced.
func discarded(warnings []string) []string {
	var caps []string
	for _, w := range warnings {
		lw := strings.ToLower(w)
		if !strings.Contains(lw, "discarded") {
			continue
		}
		switch {
		case strings.Contains(lw, "pids"):
			caps = append(caps, sandbox.CapPids)
		case strings.Contains(lw, "memory"):
			caps = append(caps, sandbox.CapMemory)
		}
	}
	return caps
}

// tiniFatal starts what the engine's init (tini) writes to stderr when it
// cannot execute the command.
const tiniFatal = "[FATAL tini ("

// notStarted returns the error for a command the init could not execute:
// it exited 126 or 127 with its fatal message as the only output.
func notStarted(name, image string, res *sandbox.Result) error {
	r := res.Report
	if !r.Exited || (r.ExitCode != 126 && r.ExitCode != 127) || res.Stdout != "" || !strings.HasPrefix(res.Stderr, tiniFatal) {
		return nil
	}
	if !strings.Contains(res.Stderr, "exec "+name+" failed:") {
		return nil
	}
	if r.ExitCode == 127 {
		what := "is not installed"
		if strings.Contains(name, "/") {
			what = "does not exist (or the interpreter named on its #! line is not installed)"
		}
		return protocol.Errorf(protocol.CodeNotFound, "program %q %s in the sandbox image %s on the sandboxer", name, what, image)
	}
	return protocol.Errorf(protocol.CodeSandbox, "program %q cannot be executed in the sandbox image %s: permission denied (is it marked executable?)", name, image)
}
