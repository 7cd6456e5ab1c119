//go:build linux && (amd64 || arm64)

package native_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// requireNetHelper is HARNESS_REQUIRE_NATIVE=1's demand on the network
// helper too: scripts/test installs slirp4netns, so CI never skips this.
func requireNetHelper(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/" + native.NetworkHelperName); err != nil {
		if requireNative() {
			t.Fatalf("%s is missing (HARNESS_REQUIRE_NATIVE=1; scripts/test installs it)", native.NetworkHelperName)
		}
		t.Skipf("%s is not installed", native.NetworkHelperName)
	}
}

// TestNativeNetworkKeepsHostLoopbackOut: a command that may use the
// network has a route out of a namespace of its own, and still cannot
// reach a service on the host's loopback (the harness's own NATS, Redis),
// by 127.0.0.1 or by [::1].
func TestNativeNetworkKeepsHostLoopbackOut(t *testing.T) {
	requireNetHelper(t)
	n := newNative(t, native.Config{})
	var listeners []*net.TCPListener
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("no listener on %s: %v", addr, err)
			continue
		}
		t.Cleanup(func() { ln.Close() })
		listeners = append(listeners, ln.(*net.TCPListener))
	}
	if len(listeners) == 0 {
		t.Fatal("no loopback listener could be opened")
	}
	dir := t.TempDir()
	for _, ln := range listeners {
		a := ln.Addr().(*net.TCPAddr)
		host := a.IP.String()
		if a.IP.To4() == nil {
			host = "[" + host + "]"
		}
		// bash's /dev/tcp dials without any tool the sandbox may lack;
		// the slirp gateway 10.0.2.2 is the host's loopback when allowed.
		script := "for h in " + host + " 10.0.2.2; do if exec 3<>/dev/tcp/$h/" + strconv.Itoa(a.Port) + "; then echo reached $h; fi; done 2>/dev/null; grep -c tap0 /proc/net/route"
		res, err := n.Run(t.Context(), sandbox.Spec{Argv: []string{"/bin/bash", "-c", script}, Dir: dir, Env: sandbox.MinimalEnv(), Network: true,
			Limits: protocol.Limits{WallSecs: 30}})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if strings.Contains(res.Stdout, "reached") {
			t.Errorf("a sandboxed command reached the host's loopback service %s: %q", ln.Addr(), res.Stdout)
		}
		if !strings.HasSuffix(strings.TrimSpace(res.Stdout), "2") && !strings.HasSuffix(strings.TrimSpace(res.Stdout), "1") {
			t.Errorf("no route through tap0 inside the sandbox: stdout %q stderr %q", res.Stdout, res.Stderr)
		}
		// Nothing was accepted: a connection that got through would be
		// waiting in the backlog now that the command has ended.
		_ = ln.SetDeadline(time.Now())
		if c, err := ln.Accept(); err == nil {
			c.Close()
			t.Errorf("the host's listener %s accepted a connection from the sandbox", ln.Addr())
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("Accept: %v", err)
		}
	}
}

// TestNativeNetworkWithoutHelperRefuses: without slirp4netns a command
// that may use the network is refused, never run in the host's network
// namespace.
func TestNativeNetworkWithoutHelperRefuses(t *testing.T) {
	n := newNative(t, native.Config{NetworkHelper: "/nonexistent/" + native.NetworkHelperName})
	_, err := n.Run(t.Context(), sandbox.Spec{Argv: []string{"/bin/true"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv(), Network: true})
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Run with the network and no helper = %v, want a *protocol.Error", err)
	}
	if !strings.Contains(pe.Message, native.NetworkHelperName) {
		t.Errorf("the refusal does not name %s: %s", native.NetworkHelperName, pe.Message)
	}
}

// TestNativeGoCacheIsReadThroughAnOverlay: a sandbox reads the shared Go
// build cache, and what its command writes there stays in the sandbox:
// the host's cache and the next sandbox never see it.
func TestNativeGoCacheIsReadThroughAnOverlay(t *testing.T) {
	cache := t.TempDir()
	if err := os.WriteFile(cache+"/marker", []byte("warm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := newNative(t, native.Config{GoCache: cache})
	run := func(script string) string {
		t.Helper()
		res, err := n.Run(t.Context(), sandbox.Spec{Argv: []string{"/bin/sh", "-c", script}, Dir: t.TempDir(), Env: sandbox.MinimalEnv()})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		return res.Stdout + res.Stderr
	}
	out := run(`echo "$GOCACHE"; cat "$GOCACHE/marker"; echo planted > "$GOCACHE/planted" && echo wrote; rm -f "$GOCACHE/marker"`)
	if !strings.Contains(out, native.SandboxGoCache) || !strings.Contains(out, "warm") || !strings.Contains(out, "wrote") {
		t.Fatalf("the sandbox's cache: %q; want GOCACHE at %s, the marker read, a write that works", out, native.SandboxGoCache)
	}
	if _, err := os.Stat(cache + "/planted"); err == nil {
		t.Error("a sandbox's write reached the host's cache")
	}
	if _, err := os.Stat(cache + "/marker"); err != nil {
		t.Errorf("a sandbox's delete reached the host's cache: %v", err)
	}
	if out := run(`cat "$GOCACHE/planted" 2>&1; cat "$GOCACHE/marker"`); strings.Contains(out, "planted\n") || !strings.Contains(out, "warm") {
		t.Errorf("the next sandbox sees %q; want the host's cache as it was", out)
	}
}

// TestNativeNetworkRoutesTheControlPlaneNowhere: a sandbox that may use
// the network routes the addresses its operator names (the cluster's NATS
// and Redis) nowhere, so its route out cannot reach them; a loopback
// address among them stays the sandbox's own. Checked in the sandbox's
// routing table, with no traffic sent.
func TestNativeNetworkRoutesTheControlPlaneNowhere(t *testing.T) {
	requireNetHelper(t)
	n := newNative(t, native.Config{Unreachable: []string{"192.0.2.0/24", "198.51.100.7", "127.0.0.1"}})
	res, err := n.Run(t.Context(), sandbox.Spec{Argv: []string{"/bin/cat", "/proc/net/route"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv(), Network: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	routes := map[string]bool{} // destination/mask in /proc/net/route's hex, with the reject flag
	for _, line := range strings.Split(res.Stdout, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags, _ := strconv.ParseUint(f[3], 16, 32)
		if flags&0x0200 != 0 { // RTF_REJECT
			routes[f[1]+"/"+f[7]] = true
		}
	}
	hexOf := func(ip net.IP) string {
		ip = ip.To4()
		return strings.ToUpper(fmt.Sprintf("%02x%02x%02x%02x", ip[3], ip[2], ip[1], ip[0]))
	}
	all := hexOf(net.IPv4(255, 255, 255, 255))
	for name, key := range map[string]string{
		"192.0.2.0/24": hexOf(net.IPv4(192, 0, 2, 0)) + "/" + hexOf(net.IPv4(255, 255, 255, 0)),
		"198.51.100.7": hexOf(net.IPv4(198, 51, 100, 7)) + "/" + all,
	} {
		if !routes[key] {
			t.Errorf("no unreachable route for %s (%s) in the sandbox:\n%s", name, key, res.Stdout)
		}
	}
	if routes[hexOf(net.IPv4(127, 0, 0, 1))+"/"+all] {
		t.Errorf("the sandbox's own loopback was routed nowhere:\n%s", res.Stdout)
	}
}
