//go:build linux

package docker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/docker"
	"github.com/ioharness/harness/pkg/sandbox/sandboxtest"
)

// requireDocker returns a client of the local engine, or skips tb when no
// engine answers, unless HARNESS_REQUIRE_DOCKER=1 (as in CI), which makes
// it a failure.
func requireDocker(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.New(client.WithHost(docker.DefaultHost))
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
	}
	if err != nil {
		if os.Getenv("HARNESS_REQUIRE_DOCKER") == "1" {
			tb.Fatalf("HARNESS_REQUIRE_DOCKER=1 but no Docker engine answers at %s: %v", docker.DefaultHost, err)
		}
		tb.Skipf("no Docker engine answers at %s (%v); set HARNESS_REQUIRE_DOCKER=1 to make this a failure", docker.DefaultHost, err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// testDocker is a docker backend on the local engine with an image built
// for the test, and a sandboxer ID of its own so that its containers can
// be told apart from anyone else's.
type testDocker struct {
	*docker.Backend
	cli   *client.Client
	image string
	id    string
}

// newTestDocker builds the image, returns the backend, and at the end of
// tb checks that no container with its label is left and closes it.
func newTestDocker(tb testing.TB) *testDocker {
	tb.Helper()
	cli := requireDocker(tb)
	image := buildTestImage(tb, cli)
	id := "sandboxtest-" + strings.ToLower(rand.Text()[:10])
	d, err := docker.New(docker.Config{Image: image, SandboxerID: id})
	if err != nil {
		tb.Fatal(err)
	}
	td := &testDocker{Backend: d, cli: cli, image: image, id: id}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		if left := td.containers(tb, docker.LabelSandboxer+"="+id); len(left) > 0 {
			tb.Errorf("%d containers of sandboxer %s are left behind: %v", len(left), id, left)
			for _, c := range left {
				cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
	})
	return td
}

// containers lists the containers, running or not, with label (k or k=v).
func (td *testDocker) containers(tb testing.TB, label string) []container.Summary {
	tb.Helper()
	list, err := td.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		tb.Fatalf("list containers: %v", err)
	}
	return list.Items
}

func TestDocker(t *testing.T) {
	td := newTestDocker(t)
	t.Run("Conformance", func(t *testing.T) {
		sandboxtest.Run(t, func(*testing.T) sandbox.Backend { return td })
	})
	t.Run("ContainerSettings", func(t *testing.T) { t.Parallel(); testDockerSettings(t, td) })
	t.Run("Reconcile", func(t *testing.T) { t.Parallel(); testDockerReconcile(t, td) })
	t.Run("MissingImage", func(t *testing.T) { t.Parallel(); testDockerMissingImage(t, td) })
	t.Run("OpenFiles", func(t *testing.T) { t.Parallel(); testDockerOpenFiles(t, td) })
}

// testDockerSettings inspects the container of a running command: our
// labels, and every setting that confines it.
func testDockerSettings(t *testing.T, td *testDocker) {
	run := "settings-" + strings.ToLower(rand.Text()[:8])
	ctx, cancel := context.WithCancel(sandbox.WithRun(context.Background(), run, "op-7"))
	defer cancel()
	dir := t.TempDir()
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := td.Run(ctx, sandbox.Spec{
			Argv: []string{"sleep", "30"}, Dir: dir, Env: sandbox.MinimalEnv(),
			Limits: protocol.Limits{MemoryBytes: 128 << 20, Pids: 33, OpenFiles: 77, CPUSecs: 9, WallSecs: 60},
		})
		done <- outcome{res, err}
	}()
	var id string
	sandboxtest.WaitUntil(t, 20*time.Second, func() bool {
		for _, c := range td.containers(t, docker.LabelRun+"="+run) {
			if c.State == container.StateRunning {
				id = c.ID
			}
		}
		return id != ""
	})
	info, err := td.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, hc := info.Container.Config, info.Container.HostConfig
	wantLabels := map[string]string{docker.LabelSandboxer: td.id, docker.LabelRun: run, docker.LabelOp: "op-7"}
	for k, v := range wantLabels {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Image", c.Image, td.image},
		{"Entrypoint", strings.Join(c.Entrypoint, " "), "sleep 30"},
		{"WorkingDir", c.WorkingDir, dir},
		{"NetworkMode", string(hc.NetworkMode), "none"},
		{"ReadonlyRootfs", hc.ReadonlyRootfs, true},
		{"Privileged", hc.Privileged, false},
		{"CapDrop", strings.Join(hc.CapDrop, ","), "ALL"},
		{"CapAdd", len(hc.CapAdd), 0},
		{"SecurityOpt", strings.Join(hc.SecurityOpt, ","), "no-new-privileges"},
		{"Init", hc.Init != nil && *hc.Init, true},
		{"Memory", hc.Memory, int64(128 << 20)},
		{"MemorySwap", hc.MemorySwap, int64(128 << 20)},
		{"NanoCPUs", hc.NanoCPUs, int64(1e9)},
		{"PidsLimit", hc.PidsLimit != nil && *hc.PidsLimit == 33, true},
		{"Tmpfs /tmp", hc.Tmpfs["/tmp"] != "", true},
		{"Mounts", len(hc.Mounts), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("container %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(hc.Mounts) == 1 {
		if m := hc.Mounts[0]; m.Source != dir || m.Target != dir || m.ReadOnly {
			t.Errorf("mount = %+v, want %s bind-mounted read-write at the same path", m, dir)
		}
	}
	var ulimits []string
	for _, u := range hc.Ulimits {
		ulimits = append(ulimits, fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	sort.Strings(ulimits)
	if got, want := strings.Join(ulimits, " "), "cpu=10:11 nofile=77:77"; got != want {
		t.Errorf("ulimits = %q, want %q", got, want)
	}
	if env := strings.Join(c.Env, "\n"); strings.Contains(env, "HARNESS") && !strings.Contains(strings.Join(sandbox.MinimalEnv(), "\n"), "HARNESS") {
		t.Errorf("container env has the sandboxer's variables:\n%s", env)
	}
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if r := o.res.Report; r.Exited || r.CapHit != "" {
		t.Errorf("Run(sleep 30) cancelled = %+v, want killed with no cap", r)
	}
	sandboxtest.WaitUntil(t, 20*time.Second, func() bool { return len(td.containers(t, docker.LabelRun+"="+run)) == 0 })
}

// testDockerReconcile plants containers as a crashed sandboxer would leave
// them, and checks that Reconcile removes exactly the orphans and never a
// container a Run is using.
func testDockerReconcile(t *testing.T, td *testDocker) {
	prefix := "reconcile-" + strings.ToLower(rand.Text()[:8]) + "-"
	other := td.id + "-other"
	plant := func(sandboxer, run string) string {
		t.Helper()
		labels := map[string]string{docker.LabelSandboxer: sandboxer, docker.LabelOp: "op"}
		if run != "" {
			labels[docker.LabelRun] = run
		}
		c, err := td.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
			Config:     &container.Config{Image: td.image, Entrypoint: []string{"true"}, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			td.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		})
		return c.ID
	}
	mineDead := plant(td.id, prefix+"dead")
	mineLive := plant(td.id, prefix+"live") // a previous process's: no one waits for it
	otherDead := plant(other, prefix+"dead")
	otherLive := plant(other, prefix+"live")
	otherNoRun := plant(other, "")

	// A command running now, of a run the reconciler is told is dead.
	ctx, cancel := context.WithCancel(sandbox.WithRun(context.Background(), prefix+"dead", "op"))
	defer cancel()
	done := make(chan *sandbox.Result, 1)
	go func() {
		res, err := td.Run(ctx, sandbox.Spec{Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv(), Limits: protocol.Limits{WallSecs: 60}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var running string
	sandboxtest.WaitUntil(t, 20*time.Second, func() bool {
		for _, c := range td.containers(t, docker.LabelSandboxer+"="+td.id) {
			if c.State == container.StateRunning && c.Labels[docker.LabelRun] == prefix+"dead" {
				running = c.ID
			}
		}
		return running != ""
	})

	// Runs outside this test are all treated as live, so that the test
	// never touches another test's containers.
	live := func(run string) bool { return !strings.HasPrefix(run, prefix) || run == prefix+"live" }
	removed, err := td.Reconcile(context.Background(), live)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(id string) bool {
		_, err := td.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		return err == nil
	}
	tests := []struct {
		name string
		id   string
		want bool // still there
	}{
		{"ours, dead run", mineDead, false},
		{"ours, live run, not running here", mineLive, false},
		{"another sandboxer's, dead run", otherDead, false},
		{"another sandboxer's, live run", otherLive, true},
		{"another sandboxer's, no run", otherNoRun, true},
		{"running now", running, true},
	}
	for _, tt := range tests {
		if got := exists(tt.id); got != tt.want {
			t.Errorf("after Reconcile, %s: exists = %v, want %v", tt.name, got, tt.want)
		}
	}
	if removed < 3 {
		t.Errorf("Reconcile removed %d containers, want at least 3", removed)
	}
	cancel()
	if res := <-done; res == nil || res.Report.Exited {
		t.Errorf("the running command = %+v, want it killed by the cancel, not by the reconciler", res)
	}
}

func testDockerMissingImage(t *testing.T, td *testDocker) {
	d, err := td.WithImage("harness-no-such-image:" + strings.ToLower(rand.Text()[:8]))
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv()})
	pe := protocol.AsError(err)
	if pe == nil || pe.Code != protocol.CodeSandbox {
		t.Fatalf("Run with a missing image = %v, %v; want a sandbox error", res, err)
	}
	if !strings.Contains(pe.Message, d.Image()) || !strings.Contains(pe.Hint, "load") || !strings.Contains(pe.Hint, "never pulls") {
		t.Errorf("error = %q (hint %q), want it to name the image and say to build or load it", pe.Message, pe.Hint)
	}
	if _, err := td.cli.ImageInspect(context.Background(), d.Image()); err == nil {
		t.Errorf("the missing image %s is on the engine after Run: it was pulled", d.Image())
	}
	if _, err := docker.New(docker.Config{Image: "Not A Valid:Ref"}); !errors.Is(err, protocol.ErrInvalidField) {
		t.Errorf("New with an invalid image = %v, want invalid_field", err)
	}
}

func testDockerOpenFiles(t *testing.T, td *testDocker) {
	res, err := td.Run(context.Background(), sandbox.Spec{
		Argv: []string{"sh", "-c", "ulimit -n; ulimit -t; ulimit -Ht"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv(),
		Limits: protocol.Limits{OpenFiles: 37, CPUSecs: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(res.Stdout), []string{"37", "6", "7"}; !slices.Equal(got, want) {
		t.Errorf("ulimit -n, -t, -Ht in the container = %q, want %q", got, want)
	}
}

func TestDockerNoEngine(t *testing.T) {
	d, err := docker.New(docker.Config{Host: "unix://" + t.TempDir() + "/no.sock", SandboxerID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Ping(ctx); !errors.Is(err, protocol.ErrSandbox) {
		t.Errorf("Ping with no engine = %v, want a sandbox error", err)
	}
	res, err := d.Run(ctx, sandbox.Spec{Argv: []string{"true"}, Dir: t.TempDir()})
	if !errors.Is(err, protocol.ErrSandbox) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("Run with no engine = %v, %v; want a sandbox error saying the engine does not answer", res, err)
	}
	if _, err := d.Reconcile(ctx, nil); !errors.Is(err, protocol.ErrSandbox) {
		t.Errorf("Reconcile with no engine = %v, want a sandbox error", err)
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown again = %v", err)
	}
	if _, err := d.Run(ctx, sandbox.Spec{Argv: []string{"true"}, Dir: t.TempDir()}); !errors.Is(err, protocol.ErrSandbox) || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Run after Shutdown = %v, want a sandbox error saying it is shutting down", err)
	}
}

func TestDockerConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  docker.Config
		ok   bool
	}{
		{"zero", docker.Config{}, true},
		{"image", docker.Config{Image: "golang:1.26"}, true},
		{"bad image", docker.Config{Image: "UPPER CASE"}, false},
		{"negative cpus", docker.Config{CPUs: -1}, false},
		{"negative tmpfs", docker.Config{TmpfsBytes: -1}, false},
		{"negative timeout", docker.Config{Timeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate(%+v) = %v, want ok %v", tt.cfg, err, tt.ok)
			}
			if err != nil && !errors.Is(err, protocol.ErrInvalidField) {
				t.Errorf("Validate(%+v) = %v, want an invalid_field error", tt.cfg, err)
			}
		})
	}
}

// BenchmarkDockerTrue measures a request to true through the docker
// backend, cold: a container created, started, waited for and removed
// per op. It reports the median beside the mean.
func BenchmarkDockerTrue(b *testing.B) {
	td := newTestDocker(b)
	spec := sandbox.Spec{Argv: []string{"true"}, Dir: b.TempDir(), Env: sandbox.MinimalEnv()}
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if res, err := td.Run(context.Background(), spec); err != nil || !res.Report.Exited {
			b.Fatalf("Run(true) = %v, %v", res, err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median")
}
