//go:build linux && (amd64 || arm64)

package native_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/native"
	"github.com/ioharness/harness/pkg/sandbox/sandboxtest"
)

// TestMain lets the test binary serve as the native backend's shim, as
// cmd/sandboxer's main does.
func TestMain(m *testing.M) {
	native.RunShimIfRequested()
	if os.Getenv(unprivilegedChild) == "1" {
		os.Exit(unprivilegedMain())
	}
	switch os.Getenv(killRestChild) {
	case "init":
		os.Exit(killRestInit())
	case "caller":
		os.Exit(killRestCaller())
	}
	code := m.Run()
	if native.InitDir != "" {
		os.RemoveAll(native.InitDir)
	}
	os.Exit(code)
}

// requireNative is HARNESS_REQUIRE_NATIVE=1: CI sets it, so that a
// machine that cannot run the native sandbox fails its tests instead of
// skipping them.
func requireNative() bool { return os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" }

// newNative returns the native backend, closed at the end of the test, or
// skips (fails under HARNESS_REQUIRE_NATIVE=1) when this machine cannot
// run it: it needs root, or user namespaces plus cgroup write access.
func newNative(t testing.TB, cfg native.Config) *native.Backend {
	t.Helper()
	n, err := native.New(cfg)
	if err != nil {
		if requireNative() {
			t.Fatalf("New: %v (HARNESS_REQUIRE_NATIVE=1)", err)
		}
		t.Skipf("the native sandbox cannot run here (set HARNESS_REQUIRE_NATIVE=1 to fail instead): %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// TestNativeConformance runs the suite as a sandboxer beside
// harness-sandbox-init runs it: each sandbox's init is that program.
func TestNativeConformance(t *testing.T) {
	n := newNative(t, native.Config{Init: native.BuiltInit(t)})
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return n })
}

// TestNativeConformanceUserNamespace runs the suite with a user namespace
// (what an unprivileged sandboxer gets) and without warm sandboxes, so
// that every command starts its sandbox afresh, and with the running
// program (this test binary) as each sandbox's init, as a sandboxer
// without harness-sandbox-init beside it has.
func TestNativeConformanceUserNamespace(t *testing.T) {
	n := newNative(t, native.Config{UserNamespace: true, Warm: -1})
	if !slices.Contains(n.Layers()[0:1], "namespaces:mnt,pid,uts,ipc,net,user") {
		t.Errorf("Layers() = %q, want a user namespace first", n.Layers())
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return n })
}

// TestNativeInit: New finds harness-sandbox-init beside the running
// program and otherwise falls back to the program itself; an Init that is
// not a program, or an init of another build, leaves the backend
// unavailable, saying why; run by hand, the init exits 2.
func TestNativeInit(t *testing.T) {
	beside := t.TempDir()
	exe := filepath.Join(beside, "sandboxer")
	if got, err := native.FindInit("", exe); err != nil || got != "/proc/self/exe" {
		t.Errorf("FindInit with no init beside = %q, %v; want the running program", got, err)
	}
	init := filepath.Join(beside, native.InitName)
	if err := os.WriteFile(init, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := native.FindInit("", exe); got != "/proc/self/exe" {
		t.Errorf("FindInit with an init beside that is not executable = %q, want the running program", got)
	}
	if err := os.Chmod(init, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := native.FindInit("", exe); err != nil || got != init {
		t.Errorf("FindInit with an init beside = %q, %v; want %s", got, err, init)
	}
	for _, bad := range []string{filepath.Join(beside, "missing"), beside} {
		_, err := native.New(native.Config{Init: bad})
		if !errors.Is(err, native.ErrUnavailable) || !strings.Contains(err.Error(), bad) {
			t.Errorf("New with Init %s = %v, want ErrUnavailable naming it", bad, err)
		}
	}

	built := native.BuiltInit(t)
	out, err := exec.Command(built).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "sandboxer starts it") {
		t.Errorf("%s run by hand = %v, %q; want exit 2 saying what it is", native.InitName, err, out)
	}

	// The init New checked is the one every sandbox runs: a copy of it,
	// so that a file put in its place afterwards (an upgrade under a
	// running sandboxer, or worse) changes nothing.
	copied := filepath.Join(t.TempDir(), native.InitName)
	b, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, b, 0o755); err != nil {
		t.Fatal(err)
	}
	n := newNative(t, native.Config{Init: copied, Warm: -1})
	if l := n.Layers(); l[len(l)-1] != "init:"+native.InitName {
		t.Errorf("Layers() with Init set = %q, want init:%s last", l, native.InitName)
	}
	if p := n.Programs(); len(p) != 1 || p[0] != copied {
		t.Errorf("Programs() = %q, want the init %s, whose directory no workspace may overlap", p, copied)
	}
	if err := os.WriteFile(copied, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Argv: []string{"/bin/true"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv()}
	if res, err := n.Run(t.Context(), spec); err != nil || !res.Report.Exited || res.Report.ExitCode != 0 {
		t.Errorf("Run after the init's file was replaced = %+v, %v; want /bin/true run by the init New checked", res, err)
	}
	self := newNative(t, native.Config{Warm: -1})
	if l := self.Layers(); l[len(l)-1] != "init:self" {
		t.Errorf("Layers() of a test binary with no init beside = %q, want init:self last", l)
	}
	if p := self.Programs(); len(p) != 0 {
		t.Errorf("Programs() with the running program as the init = %q, want none", p)
	}

	// An init of another build (here a program that answers --build with
	// "--build"): New starts itself as the init instead, saying why; and
	// each init a Backend starts refuses to work for a Backend that asks
	// for another build than its own.
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	other := newNative(t, native.Config{Init: echo, Warm: -1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if l := other.Layers(); l[len(l)-1] != "init:self" || !strings.Contains(logged.String(), "is of build --build and this program of build "+native.ShimBuild()) {
		t.Errorf("New with an init of another build: Layers() = %q, logged %q; want init:self, and a warning naming both builds", l, logged.String())
	}
	restore := native.AskBuild("go1.0-00000000")
	defer restore()
	res, err := n.Run(t.Context(), spec)
	if pe := protocol.AsError(err); pe == nil || pe.Code != protocol.CodeSandbox || !strings.Contains(pe.Message, "different builds") {
		t.Errorf("Run by an init of another build = %+v, %v; want a sandbox error saying they are of different builds", res, err)
	}
}

// TestInitLinksNoCgo: harness-sandbox-init links neither net nor cgo, so
// that it is a static program however it is built, started without the
// dynamic loader (a millisecond of every sandbox's start).
func TestInitLinksNoCgo(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/ioharness/harness/cmd/harness-sandbox-init").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "net" || p == "runtime/cgo" || p == "os/user" {
			t.Errorf("harness-sandbox-init links %s, which makes it a cgo program where cgo is enabled", p)
		}
	}
}

// TestInitBuildCoversThePackage: the build an init is checked against
// covers every file of the package's code, so no change to the code a
// sandbox is confined by leaves it the same.
func TestInitBuildCoversThePackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("build.go")
	if err != nil {
		t.Fatal(err)
	}
	var embedded []string
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:embed "); ok {
			embedded = append(embedded, strings.Fields(rest)...)
		}
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && !slices.Contains(embedded, f) {
			t.Errorf("%s is not among the files build.go embeds: add it, or a change to it would not change the init's build", f)
		}
	}
	if b := native.ShimBuild(); !strings.HasPrefix(b, runtime.Version()+"-") {
		t.Errorf("ShimBuild() = %q, want it to begin with the Go release", b)
	}
}

func TestNativeConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  native.Config
		ok   bool
	}{
		{"zero", native.Config{}, true},
		{"all set", native.Config{ReadOnly: []string{"/opt/go"}, Hide: []string{"/etc/secret"}, CPUs: 1.5, Warm: -1}, true},
		{"relative read-only", native.Config{ReadOnly: []string{"opt"}}, false},
		{"root read-only", native.Config{ReadOnly: []string{"/"}}, false},
		{"relative hide", native.Config{Hide: []string{"etc/x"}}, false},
		{"negative CPUs", native.Config{CPUs: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate(%+v) = %v, want ok %v", tt.cfg, err, tt.ok)
			}
		})
	}
}

// TestNativeDeclarations checks what the backend claims on this machine,
// which has cgroups, Landlock and seccomp: everything.
func TestNativeDeclarations(t *testing.T) {
	var logged bytes.Buffer
	n := newNative(t, native.Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	want := []string{sandbox.CapCPU, sandbox.ConfineFilesystem, sandbox.CapMemory, sandbox.CapNetwork, sandbox.CapOpenFiles, sandbox.CapPids, sandbox.ConfineProcesses, sandbox.CapWall}
	if got := n.Enforces(); !slices.Equal(got, want) {
		t.Errorf("Enforces() = %q, want %q", got, want)
	}
	if n.Name() != "native" {
		t.Errorf("Name() = %q, want native", n.Name())
	}
	layers := strings.Join(n.Layers(), " ")
	for _, w := range []string{"namespaces:mnt,pid,uts,ipc,net", "cgroup", "landlock-abi", "seccomp"} {
		if !strings.Contains(layers, w) {
			t.Errorf("Layers() = %q, want %q among them", layers, w)
		}
	}
	// Root may clone the workspace's mounts: a fallback to binding it
	// from the host's root is a regression, logged with its reason.
	if os.Geteuid() == 0 && !slices.Contains(n.Layers(), "workspace:passed") {
		t.Errorf("Layers() = %q, want workspace:passed for a root sandboxer; New logged: %s", n.Layers(), logged.String())
	}
	if logged.Len() > 0 {
		t.Errorf("New logged %q, want nothing", logged.String())
	}
}

// TestNativeSandboxView checks, from inside, what a command sees and what
// it cannot do. Each check prints "ok NAME" or "FAIL NAME".
func TestNativeSandboxView(t *testing.T) {
	n := newNative(t, native.Config{})
	checks := []struct{ name, script string }{
		{"uid 0", `[ "$(id -u)" = 0 ]`},
		{"no capabilities", `grep -q '^CapEff:.0000000000000000$' /proc/self/status && grep -q '^CapBnd:.0000000000000000$' /proc/self/status`},
		{"no_new_privs", `grep -q '^NoNewPrivs:.1$' /proc/self/status`},
		{"seccomp filter", `grep -q '^Seccomp:.2$' /proc/self/status`},
		{"hostname", `[ "$(hostname)" = sandbox ]`},
		{"only loopback", `[ "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ')" = lo ]`},
		{"PID 1 is the sandbox init", `[ "$(cat /proc/1/comm)" != sh ] && [ $$ -gt 1 ]`},
		{"init environment unreadable", `! cat /proc/1/environ`},
		{"init binary unreadable", `! readlink /proc/1/exe && ! head -c1 /proc/1/exe`},
		{"init survives signals", `kill -TERM 1; kill -ABRT 1; kill -KILL 1; kill -0 1`},
		{"root read-only", `! touch /harness-probe`},
		{"/dev read-only", `! touch /dev/harness-probe`},
		{"/dev holds only the safe devices", `[ "$(ls /dev | tr '\n' ' ')" = "fd full null random shm stderr stdin stdout urandom zero " ]`},
		{"/dev/null writable", `echo x > /dev/null`},
		{"no home directories", `! ls /root && ! ls /home`},
		{"shadow hidden", `[ -e /etc/passwd ] && [ ! -s /etc/shadow ]`},
		{"kernel knobs read-only", `! sh -c 'echo x > /proc/sys/kernel/hostname'`},
		{"no mount", `! mount -t tmpfs none /tmp`},
		{"no new user namespace", `! unshare -U true`},
		{"no kernel log", `! dmesg`},
		{"workspace writable", `touch ./harness-probe && rm ./harness-probe`},
		{"workspace nosuid, nodev", `awk -v d="$PWD" '$5 == d { print $6 }' /proc/self/mountinfo | grep -q '^rw,nosuid,nodev'`},
		{"workspace not shared with the host", `awk -v d="$PWD" '$5 == d' /proc/self/mountinfo | grep -q . && ! awk -v d="$PWD" '$5 == d' /proc/self/mountinfo | grep -q 'shared:\|master:'`},
		{"host root gone", `[ ! -e /.host ] && ! grep -q ' /\.host' /proc/self/mountinfo`},
		{"private /tmp writable", `touch /tmp/harness-probe`},
		{"/dev/shm writable", `touch /dev/shm/harness-probe`},
	}
	var script strings.Builder
	for _, c := range checks {
		script.WriteString("if ( " + c.script + " ) >/dev/null 2>&1; then echo 'ok " + c.name + "'; else echo 'FAIL " + c.name + "'; fi\n")
	}
	dir := t.TempDir()
	res, err := n.Run(context.Background(), sandbox.Spec{Argv: []string{"sh", "-c", script.String()}, Dir: dir, Env: sandbox.MinimalEnv(), Limits: protocol.Limits{WallSecs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !strings.Contains(res.Stdout, "ok "+c.name+"\n") {
			t.Errorf("inside the sandbox, %q does not hold", c.name)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
}

// TestNativeRuns covers how Run treats its spec: errors before the start,
// the working directory, and limits other than the defaults on a warm
// sandbox.
func TestNativeRuns(t *testing.T) {
	n := newNative(t, native.Config{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "noexec.sh"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errTests := []struct {
		name string
		spec sandbox.Spec
		want protocol.Code
	}{
		{"missing dir", sandbox.Spec{Argv: []string{"true"}, Dir: filepath.Join(dir, "nope")}, protocol.CodeSandbox},
		{"root as workspace", sandbox.Spec{Argv: []string{"true"}, Dir: "/"}, protocol.CodeSandbox},
		{"not executable", sandbox.Spec{Argv: []string{"./noexec.sh"}, Dir: dir}, protocol.CodeSandbox},
		{"not visible in the sandbox", sandbox.Spec{Argv: []string{os.Args[0]}, Dir: dir}, protocol.CodeNotFound},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := n.Run(context.Background(), tt.spec)
			if pe := protocol.AsError(err); pe == nil || pe.Code != tt.want {
				t.Errorf("Run(%q) = %v, %v; want code %v", tt.spec.Argv, res, err, tt.want)
			}
		})
	}
	t.Run("symlinked workspace", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "ws")
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		res, err := n.Run(context.Background(), sandbox.Spec{Argv: []string{"sh", "-c", "pwd; echo hi > f"}, Dir: link})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(res.Stdout); got != dir {
			t.Errorf("pwd = %q, want the resolved workspace %q", got, dir)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "hi\n" {
			t.Errorf("file written through the symlinked workspace = %q, want %q", b, "hi\n")
		}
	})
	t.Run("limits other than the defaults", func(t *testing.T) {
		for range 3 { // the first runs take warm sandboxes
			res, err := n.Run(context.Background(), sandbox.Spec{
				Argv:   []string{"sh", "-c", "ulimit -n; ulimit -t; df -k /tmp | tail -1"},
				Dir:    dir,
				Limits: protocol.Limits{OpenFiles: 99, CPUSecs: 7, MemoryBytes: 32 << 20},
			})
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(res.Stdout)
			if len(f) < 4 || f[0] != "99" || f[1] != "7" || f[3] != strconv.Itoa(32<<10) {
				t.Errorf("open files, CPU seconds, /tmp KiB = %q, want 99, 7, %d", res.Stdout, 32<<10)
			}
		}
	})
}

// TestNativeCPUBandwidth checks NativeConfig.CPUs: a busy loop given one
// second of wall time gets about CPUs seconds of CPU time.
func TestNativeCPUBandwidth(t *testing.T) {
	n := newNative(t, native.Config{CPUs: 0.05, Warm: -1})
	res, err := n.Run(context.Background(), sandbox.Spec{
		Argv:   []string{"sh", "-c", `timeout 1 sh -c 'while :; do :; done'; times`},
		Dir:    t.TempDir(),
		Env:    sandbox.MinimalEnv(),
		Limits: protocol.Limits{WallSecs: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	// times prints the shell's user and system time, then its children's:
	// "0m0.001s 0m0.002s\n0m0.050s 0m0.001s".
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	var used time.Duration
	for _, f := range strings.Fields(lines[len(lines)-1]) {
		d, err := time.ParseDuration(f)
		if err != nil {
			t.Fatalf("times printed %q", res.Stdout)
		}
		used += d
	}
	if used > 300*time.Millisecond {
		t.Errorf("a busy loop with 0.05 CPUs for 1 s used %v of CPU time, want about 50ms", used)
	}
}

// TestNativeClose checks that Close kills the warm sandboxes, can be
// called twice, and leaves a backend that still runs commands.
func TestNativeClose(t *testing.T) {
	before := childCount(t)
	n, err := native.New(native.Config{Warm: 3})
	if err != nil {
		if requireNative() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	sandboxtest.WaitUntil(t, 10*time.Second, func() bool { return childCount(t) >= before+3 })
	n.Close()
	n.Close()
	if got := childCount(t); got != before {
		t.Errorf("after Close, %d child processes, want %d as before NewNative", got, before)
	}
	res, err := n.Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Dir: t.TempDir()})
	if err != nil || !res.Report.Exited {
		t.Errorf("Run after Close = %v, %v; want it to run", res, err)
	}
	if left, err := n.Leftovers(); err != nil || len(left) > 0 {
		t.Errorf("Leftovers() after Close and a run = %q, %v; want none", left, err)
	}
}

// TestNativeRunsHoldNoDescriptors checks that the sandboxer's process
// holds no more descriptors after a number of commands than before its
// backend existed, once Close has stopped the warm sandboxes (which hold
// their pipes while they wait) and the reaper. The garbage collector is
// off meanwhile, so that a descriptor left to an *os.File's finalizer
// shows as held.
func TestNativeRunsHoldNoDescriptors(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	newNative(t, native.Config{Warm: -1}).Close() // skips where it cannot run; opens what the process keeps
	before := openFDs(t)
	n := newNative(t, native.Config{})
	dir := t.TempDir()
	const runs = 20
	for i := range runs {
		res, err := n.Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Dir: dir})
		if err != nil || !res.Report.Exited || res.Report.ExitCode != 0 {
			t.Fatalf("Run %d = %+v, %v; want exit 0", i, res, err)
		}
	}
	n.Close()
	after := openFDs(t)
	var extra []string
	for fd, target := range after {
		if _, ok := before[fd]; !ok {
			extra = append(extra, fmt.Sprintf("%s -> %s", fd, target))
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		t.Errorf("after %d Runs and Close, %d descriptors more than before New: %q", runs, len(extra), extra)
	}
}

// openFDs returns this process's open descriptors, with what each names.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out[e.Name()] = target
	}
	return out
}

// TestNativeUnprivileged runs this test binary again as uid 65534, where
// the sandbox needs a user namespace and the cgroups are not writable:
// NewNative must say so, and with AllowMissingCgroups run commands that
// report memory and pids as unenforced.
func TestNativeUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged uid")
	}
	newNative(t, native.Config{}) // skips where the native backend cannot run at all
	// The binary must be reachable by the unprivileged uid.
	dir, err := os.MkdirTemp("", "harness-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Copied by cp, not written here: a file this process held open for
	// writing would be inherited by any process it forks meanwhile (the
	// backend's pool of inits, other tests) until that process execs, and
	// running the copy then fails with ETXTBSY.
	bin := filepath.Join(dir, "sandbox.test")
	if out, err := exec.Command("cp", os.Args[0], bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the test binary: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{unprivilegedChild + "=1", "PATH=" + os.Getenv("PATH")}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the unprivileged run failed: %v\n%s", err, out)
	}
}

// unprivilegedChild marks the run of TestNativeUnprivileged's child.
const unprivilegedChild = "HARNESS_SANDBOX_TEST_UNPRIVILEGED"

// unprivilegedMain is the child of TestNativeUnprivileged, running as an
// unprivileged uid. It returns the exit code.
func unprivilegedMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "unprivileged: "+format+"\n", args...)
		return 1
	}
	_, err := native.New(native.Config{})
	if !errors.Is(err, native.ErrUnavailable) || !strings.Contains(err.Error(), "cgroup") {
		return fail("New without cgroups = %v, want ErrNativeUnavailable naming the cgroups", err)
	}
	n, err := native.New(native.Config{AllowMissingCgroups: true})
	if err != nil {
		return fail("New(AllowMissingCgroups) = %v", err)
	}
	defer n.Close()
	if e := n.Enforces(); slices.Contains(e, sandbox.CapMemory) || slices.Contains(e, sandbox.CapPids) || !slices.Contains(e, sandbox.ConfineFilesystem) {
		return fail("Enforces() = %q, want no memory or pids, and the filesystem", e)
	}
	ws, err := os.MkdirTemp("", "ws-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(ws)
	res, err := n.Run(context.Background(), sandbox.Spec{
		Argv: []string{"sh", "-c", "id -u; echo hi > f; touch /etc/x 2>/dev/null && echo wrote /etc; sleep 30 & echo started"},
		Dir:  ws, Env: sandbox.MinimalEnv(), Limits: protocol.Limits{WallSecs: 20},
	})
	if err != nil {
		return fail("Run: %v", err)
	}
	if !res.Report.Exited || res.Stdout != "0\nstarted\n" || !slices.Equal(res.Report.Unenforced, []string{sandbox.CapMemory, sandbox.CapPids}) {
		return fail("Run = %+v stdout %q stderr %q; want uid 0 inside, no write to /etc, memory and pids unenforced", res.Report, res.Stdout, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "hi\n" {
		return fail("the workspace file = %q, want %q", b, "hi\n")
	}
	return 0
}

// childCount counts this process's live children (of all its threads).
func childCount(t testing.TB) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("list this process's threads: %v", err)
	}
	var kids []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		kids = append(kids, strings.Fields(string(b))...)
	}
	n := 0
	for _, f := range kids {
		st, err := os.ReadFile("/proc/" + f + "/stat")
		if s := string(st); err == nil && !strings.Contains(s[strings.LastIndexByte(s, ')'):], ") Z") {
			n++
		}
	}
	return n
}

// killRestChild marks the runs of TestShimKillsOnlyAsPID1's children:
// "init", PID 1 of a new PID namespace, and "caller", another process of
// it.
const killRestChild = "HARNESS_TEST_KILLREST"

// TestShimKillsOnlyAsPID1 checks that the shim's teardown kills nothing
// from a process that is not PID 1 of its PID namespace, where kill(-1)
// would reach every process it may signal. It runs in a PID namespace of
// its own, where that is only its own processes: an init starts a
// process to outlive the teardown and a second one that runs it with a
// child of its own; the init exits 0 if the first still runs after.
func TestShimKillsOnlyAsPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a new PID namespace")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{killRestChild + "=init", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the teardown run by a process of a PID namespace other than its PID 1: %v, %s; want the namespace's other process left running", err, out)
	}
}

// killRestCaller runs the shim's teardown with a child of its own, as the
// shim has when it tears down.
func killRestCaller() int {
	child := exec.Command("sleep", "600")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	native.KillRest()
	child.Process.Kill()
	child.Wait()
	return 0
}

// killRestInit is the init of TestShimKillsOnlyAsPID1.
func killRestInit() int {
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "init is PID %d, not 1\n", os.Getpid())
		return 2
	}
	bystander := exec.Command("sleep", "600")
	bystander.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := bystander.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer bystander.Process.Kill()
	caller := exec.Command(os.Args[0], "-test.run=^$")
	caller.Env = []string{killRestChild + "=caller", "PATH=" + os.Getenv("PATH")}
	if out, err := caller.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "caller: %v, %s\n", err, out)
		return 2
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(bystander.Process.Pid, &ws, syscall.WNOHANG, nil); err != nil || pid != 0 {
		fmt.Fprintf(os.Stderr, "the other process of the namespace ended (%v, %v): the teardown killed it from PID %d\n", ws, err, caller.Process.Pid)
		return 1
	}
	return 0
}
