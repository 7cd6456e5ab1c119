//go:build unix

package sandboxtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/sandbox"
)

// requireEnforced skips t unless b declares, through sandbox.Enforcer,
// that it enforces label.
func requireEnforced(t *testing.T, b sandbox.Backend, label string) {
	t.Helper()
	e, ok := b.(sandbox.Enforcer)
	if !ok {
		t.Skipf("backend %s does not declare what it enforces (sandbox.Enforcer); %q is not tested", b.Name(), label)
	}
	if !slices.Contains(e.Enforces(), label) {
		t.Skipf("backend %s does not enforce %q", b.Name(), label)
	}
}

// notPassed fails t if r looks like a command that passed.
func notPassed(t *testing.T, what string, r *sandbox.Result) {
	t.Helper()
	if rep := r.Report; rep.Exited && rep.ExitCode == 0 && rep.CapHit == "" {
		t.Errorf("%s = exited 0 with no cap hit, want a failure", what)
	}
}

func testPidsCap(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.CapPids)
	sleep := uniqueSleep()
	s := spec(t, "sh", "-c", "i=0; while [ $i -lt 500 ]; do "+sleep+" & i=$((i+1)); done; wait")
	s.Limits.Pids = 16
	s.Limits.WallSecs = 20
	start := time.Now()
	res := run(t, b, s)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Run(fork bomb) took %v, want it stopped by the pids cap, not the wall clock", took)
	}
	notPassed(t, "Run(fork bomb)", res)
	if r := res.Report; r.CapHit != sandbox.CapPids {
		t.Errorf("Run(fork bomb) with pids 16 = exited %v code %d cap %q, want cap %q", r.Exited, r.ExitCode, r.CapHit, sandbox.CapPids)
	}
	waitNoProcess(t, sleep)
}

func testMemoryCap(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.CapMemory)
	// tail keeps the last lines of its input; /dev/zero has no line end,
	// so it keeps everything it reads.
	s := spec(t, "tail", "/dev/zero")
	s.Limits.MemoryBytes = 64 << 20
	s.Limits.WallSecs = 30
	res := run(t, b, s)
	if r := res.Report; r.Exited || r.CapHit != sandbox.CapMemory {
		t.Errorf("Run(tail /dev/zero) with 64 MiB = exited %v cap %q signal %q, want killed by cap %q", r.Exited, r.CapHit, r.Signal, sandbox.CapMemory)
	}
}

// listeners opens TCP listeners on the host's loopback address and on the
// address of each local container bridge (docker0, br-*), never on an
// address reachable from outside the machine, and returns their
// addresses.
func listeners(t *testing.T) []string {
	t.Helper()
	hosts := []string{"127.0.0.1"}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Name != "docker0" && !strings.HasPrefix(ifc.Name, "br-") {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsPrivate() {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	var out []string
	for _, h := range hosts {
		l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
		if err != nil {
			continue
		}
		t.Cleanup(func() { l.Close() })
		out = append(out, l.Addr().String())
	}
	if len(out) == 0 {
		t.Fatal("could not listen on loopback")
	}
	return out
}

// connectScript returns a bash script that tries each address and prints
// "reached ADDR" for each it could connect to.
func connectScript(addrs []string) string {
	var sb strings.Builder
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		fmt.Fprintf(&sb, "(exec 3<>/dev/tcp/%s/%s) 2>/dev/null && echo reached %s; ", host, port, a)
	}
	sb.WriteString("exit 0")
	return sb.String()
}

func testNetworkDenied(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.CapNetwork)
	addrs := listeners(t)
	s := spec(t, "bash", "-c", connectScript(addrs))
	s.Limits.WallSecs = 15
	res := run(t, b, s)
	if strings.Contains(res.Stdout, "reached") {
		t.Errorf("with the network denied, the command reached the host's listeners:\n%s", res.Stdout)
	}
	if r := res.Report; !r.Exited || r.ExitCode != 0 {
		t.Errorf("Run(connect) = %+v stderr %q, want exit 0 (the probe script itself must run)", r, res.Stderr)
	}
}

func testNetworkAllowed(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.CapNetwork)
	addrs := listeners(t)
	s := spec(t, "bash", "-c", connectScript(addrs))
	s.Network = true
	s.Limits.WallSecs = 15
	res := run(t, b, s)
	if !strings.Contains(res.Stdout, "reached") {
		t.Errorf("with the network allowed, the command reached none of the host's listeners %q: stdout %q stderr %q", addrs, res.Stdout, res.Stderr)
	}
}

func testWritesConfined(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.ConfineFilesystem)
	other := t.TempDir() // another workspace
	token := fmt.Sprintf("harness-probe-%d", time.Now().UnixNano())
	targets := []string{
		"/etc/" + token,
		"/root/" + token,
		"/usr/" + token,
		filepath.Join(other, token),
	}
	if exe, err := os.Executable(); err == nil {
		targets = append(targets, filepath.Join(filepath.Dir(exe), token)) // the sandboxer's own files
	}
	hostTmp := filepath.Join(os.TempDir(), token) // the sandbox's own /tmp may hide the host's
	for _, p := range append(targets, hostTmp) {
		t.Cleanup(func() { os.Remove(p) })
	}
	var script strings.Builder
	for _, p := range targets {
		fmt.Fprintf(&script, "echo x > %s && echo wrote %s; ", p, p)
	}
	fmt.Fprintf(&script, "echo ok > inside && cat inside && echo x > %s && echo tmp ok", hostTmp)
	s := spec(t, "sh", "-c", script.String())
	res := run(t, b, s)
	if strings.Contains(res.Stdout, "wrote ") {
		t.Errorf("the command wrote outside its workspace:\n%s", res.Stdout)
	}
	for _, p := range append(targets, hostTmp) {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists on the host after the command tried to write it", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "inside")); err != nil || string(b) != "ok\n" {
		t.Errorf("the workspace file = %q, %v; want %q (the workspace must be writable)", b, err, "ok\n")
	}
	if !strings.Contains(res.Stdout, "tmp ok") {
		t.Errorf("writing /tmp in the sandbox failed: stdout %q stderr %q; want a private writable /tmp", res.Stdout, res.Stderr)
	}
}

func testHostFilesInvisible(t *testing.T, b sandbox.Backend) {
	requireEnforced(t, b, sandbox.ConfineFilesystem)
	const secret = "-----BEGIN OPENSSH PRIVATE KEY----- harness-sandboxtest"
	home := t.TempDir()
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	// The sandboxer's own environment, as /proc shows it to the sandbox.
	environ := fmt.Sprintf("/proc/%d/environ", os.Getpid())
	own, err := os.ReadFile(environ)
	if err != nil {
		t.Fatal(err)
	}
	s := spec(t, "sh", "-c", "cat "+key+"; cat "+environ+"; ls "+home)
	res := run(t, b, s)
	if strings.Contains(res.Stdout, secret) {
		t.Errorf("the command read a key planted outside its workspace")
	}
	if len(own) > 0 && strings.Contains(res.Stdout, string(own)) {
		t.Errorf("the command read the sandboxer's environment from %s", environ)
	}
	if strings.Contains(res.Stdout, ".ssh") {
		t.Errorf("the command listed a directory outside its workspace: %q", res.Stdout)
	}
}
