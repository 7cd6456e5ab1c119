package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/wire"
)

// NATSCLI is the nats command line the suite drives the cluster with,
// built from its module (never added to go.mod).
const NATSCLI = "github.com/nats-io/natscli/nats@v0.5.0"

// Users of deploy/nats/auth.conf whose passwords the suite makes up.
var users = []string{"admin", "approver", "console", "coordinator", "worker", "sandboxer-sb1", "sandboxer-sb2", "tenant-acme", "tenant-bravo", "redis"}

// Options shape a cluster.
type Options struct {
	// Workers is how many workers start; default 1.
	Workers int
	// WorkerConcurrency is each worker's provider calls at once; default 1,
	// so throughput follows the number of workers.
	WorkerConcurrency int
	// Delay is how long each fake model turn takes; default 200ms.
	Delay time.Duration
	// Cassettes is a directory with e2e.json, the cassette the worker-replay
	// service answers pool "replay" from.
	Cassettes string
	// Workspaces is the directory both sandboxers serve as /srv/work.
	Workspaces string
}

// Cluster is a running compose project.
type Cluster struct {
	t          testing.TB
	Root       string // the repository
	Project    string
	Bin        string // nats, harness and the role binaries
	Workspaces string
	files      []string
	env        []string
	passwords  map[string]string
	client     *harness.Client
}

// Start builds what the cluster needs (once per machine, then from the
// build cache), brings it up with per-role credentials under a unique
// project name on its own network, waits until every role has registered,
// and takes it all down, volumes included, when t ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.WorkerConcurrency == 0 {
		o.WorkerConcurrency = 1
	}
	if o.Delay == 0 {
		o.Delay = 200 * time.Millisecond
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	c := &Cluster{t: t, Root: root, Project: project(), Workspaces: o.Workspaces, passwords: map[string]string{}}
	c.files = []string{"compose.yaml", "compose.secure.yaml", "e2e/compose.e2e.yaml"}
	c.Bin = Build(t, root)
	for _, u := range users {
		c.passwords[u] = randomHex(16)
	}
	c.env = append(os.Environ(),
		"HARNESS_TAG=dev",
		"HARNESS_NATS_LISTEN=127.0.0.1:0",
		"HARNESS_WORKSPACES="+o.Workspaces,
		"HARNESS_CASSETTES="+o.Cassettes,
		fmt.Sprintf("HARNESS_WORKER_CONCURRENCY=%d", o.WorkerConcurrency),
		"HARNESS_E2E_DELAY="+o.Delay.String(),
		"HARNESS_ACK_WAIT=10s",
		"HARNESS_ADMIN_PASSWORD="+c.passwords["admin"],
		"HARNESS_APPROVER_PASSWORD="+c.passwords["approver"],
		"HARNESS_CONSOLE_PASSWORD="+c.passwords["console"],
		"HARNESS_COORDINATOR_PASSWORD="+c.passwords["coordinator"],
		"HARNESS_WORKER_PASSWORD="+c.passwords["worker"],
		"HARNESS_SANDBOXER_SB1_PASSWORD="+c.passwords["sandboxer-sb1"],
		"HARNESS_SANDBOXER_SB2_PASSWORD="+c.passwords["sandboxer-sb2"],
		"HARNESS_TENANT_ACME_PASSWORD="+c.passwords["tenant-acme"],
		"HARNESS_TENANT_BRAVO_PASSWORD="+c.passwords["tenant-bravo"],
		"HARNESS_REDIS_PASSWORD="+c.passwords["redis"],
	)
	t.Cleanup(c.down)
	c.Compose("up", "-d", "--scale", fmt.Sprintf("worker=%d", o.Workers))
	c.WaitServices(map[string]int{"harness-coordinator": 2, "harness-sandboxer": 2, "harness-worker": o.Workers + 2}) // and worker-replay, worker-example
	return c
}

// project names this run's compose project; scripts/e2e passes one so its
// trap can clean up after a killed test.
func project() string {
	if p := os.Getenv("HARNESS_E2E_PROJECT"); p != "" {
		return p
	}
	return "hxe2e" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Build builds the images (deploy/build), the fake model's image and the
// nats command line, and returns the directory holding nats and harness.
func Build(t testing.TB, root string) string {
	t.Helper()
	run(t, root, nil, "deploy/build", "dev")
	out := filepath.Join(root, "deploy", ".build")
	ctx := filepath.Join(out, "fakellm")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", filepath.Join(ctx, "fakellm"), "./e2e/fakellm")
	run(t, root, nil, "docker", "build", "-q", "-t", "harness-e2e/fakellm:dev", "-f", "e2e/fakellm/Dockerfile", ctx)
	// The nats CLI is built once per machine into the user's cache.
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	gobin := filepath.Join(cache, "harness-e2e", "natscli-v0.5.0")
	if _, err := os.Stat(filepath.Join(gobin, "nats")); err != nil {
		run(t, os.TempDir(), []string{"GOBIN=" + gobin, "GOFLAGS="}, "go", "install", NATSCLI)
	}
	bin := filepath.Join(out, "bin")
	if err := copyFile(filepath.Join(gobin, "nats"), filepath.Join(bin, "nats")); err != nil {
		t.Fatal(err)
	}
	return bin
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// run runs a command in dir and fails t with its output if it fails.
func run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Compose runs docker-compose on the project and fails the test if it
// fails.
func (c *Cluster) Compose(args ...string) string {
	c.t.Helper()
	out, err := c.ComposeErr(args...)
	if err != nil {
		c.t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// ComposeErr runs docker-compose on the project.
func (c *Cluster) ComposeErr(args ...string) (string, error) {
	full := []string{"-p", c.Project}
	for _, f := range c.files {
		full = append(full, "-f", f)
	}
	cmd := exec.Command("docker-compose", append(full, args...)...)
	cmd.Dir, cmd.Env = c.Root, c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// down removes every container, network and volume of the project, and
// checks nothing of it is left.
func (c *Cluster) down() {
	if c.client != nil {
		c.client.Close()
	}
	if c.t.Failed() {
		c.dumpGoroutines()
		out, _ := c.ComposeErr("logs", "--no-color", "--tail=40")
		c.t.Logf("logs of %s:\n%s", c.Project, out)
		// Every line, for the failure's whole story.
		if all, err := c.ComposeErr("logs", "--no-color", "--timestamps"); err == nil {
			path := filepath.Join(os.TempDir(), c.Project+".log")
			if os.WriteFile(path, []byte(all), 0o644) == nil {
				c.t.Logf("all logs of %s: %s", c.Project, path)
			}
		}
	}
	out, err := c.ComposeErr("down", "-v", "--remove-orphans", "-t", "2")
	leaked := false
	if err != nil && strings.Contains(out, "has active endpoints") {
		// docker-compose stops at the network and leaves the volumes. The
		// engine (20.10) can count an endpoint of a container already
		// gone, most often after a network disconnect and connect like the
		// fault phase's: the volumes go all the same, the network is tried
		// again, and a count no container holds is the engine's leak, said
		// in the log rather than failed on.
		leaked = c.removeLeftovers()
	} else if err != nil {
		c.t.Errorf("docker-compose down: %v\n%s", err, out)
	}
	label := "label=com.docker.compose.project=" + c.Project
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		if kind[0] == "network" && leaked {
			continue
		}
		out, err := runErr(c.Root, nil, "docker", append(kind, "--filter", label)...)
		if err != nil || strings.TrimSpace(out) != "" {
			c.t.Errorf("after teardown, docker %s still lists %q (%v)", kind[0], out, err)
		}
	}
}

// removeLeftovers removes what docker-compose down left when the engine
// refused to remove the project's network: the volumes, then the network,
// tried again for a while. It reports whether the network stayed with no
// container attached (the engine's leaked endpoint count), which it logs;
// a network a container still holds is a failure.
func (c *Cluster) removeLeftovers() (leaked bool) {
	label := "label=com.docker.compose.project=" + c.Project
	if vols, err := runErr(c.Root, nil, "docker", "volume", "ls", "-q", "--filter", label); err == nil && strings.TrimSpace(vols) != "" {
		if out, err := runErr(c.Root, nil, "docker", append([]string{"volume", "rm"}, strings.Fields(vols)...)...); err != nil {
			c.t.Errorf("docker volume rm: %v\n%s", err, out)
		}
	}
	var out string
	for range 10 {
		var err error
		if out, err = runErr(c.Root, nil, "docker", "network", "rm", c.Network()); err == nil {
			return false
		}
		if ps, _ := runErr(c.Root, nil, "docker", "ps", "-aq", "--filter", "network="+c.Network()); strings.TrimSpace(ps) != "" {
			c.t.Errorf("the network %s is still held by containers %q", c.Network(), ps)
			return false
		}
		time.Sleep(time.Second) // the engine letting go of an endpoint; there is no event to wait on
	}
	c.t.Logf("the docker engine keeps the network %s with no container attached (its endpoint count leaked: %s); a restart of the engine removes it", c.Network(), strings.TrimSpace(out))
	return true
}

// roleServices are the compose services running harness's own binaries.
var roleServices = []string{"coordinator-1", "coordinator-2", "worker", "worker-replay", "worker-example", "sandboxer-1", "sandboxer-2"}

// dumpGoroutines sends SIGQUIT to every harness role container still
// running, so each writes the stacks of all its goroutines to its log
// before it exits: where a role that stopped making progress was waiting.
func (c *Cluster) dumpGoroutines() {
	var ids []string
	for _, svc := range roleServices {
		out, err := runErr(c.Root, nil, "docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+c.Project,
			"--filter", "label=com.docker.compose.service="+svc)
		if err == nil {
			ids = append(ids, strings.Fields(out)...)
		}
	}
	if len(ids) == 0 {
		return
	}
	if out, err := runErr(c.Root, nil, "docker", append([]string{"kill", "--signal", "QUIT"}, ids...)...); err != nil {
		c.t.Logf("SIGQUIT to the roles: %v\n%s", err, out)
		return
	}
	time.Sleep(2 * time.Second) // the dumps reach the logs
}

// Container returns the id of the index-th container (1-based) of a
// service.
func (c *Cluster) Container(service string, index int) string {
	c.t.Helper()
	out := run(c.t, c.Root, nil, "docker", "ps", "-aq",
		"--filter", "label=com.docker.compose.project="+c.Project,
		"--filter", "label=com.docker.compose.service="+service,
		"--filter", fmt.Sprintf("label=com.docker.compose.container-number=%d", index))
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		c.t.Fatalf("container %d of %s: %q", index, service, out)
	}
	return id
}

// Docker runs a docker command and fails the test if it fails.
func (c *Cluster) Docker(args ...string) string {
	c.t.Helper()
	return run(c.t, c.Root, nil, "docker", args...)
}

// Kill sends SIGKILL to the index-th container of a service.
func (c *Cluster) Kill(service string, index int) {
	c.t.Helper()
	c.Docker("kill", "-s", "KILL", c.Container(service, index))
}

// Network is the project's network.
func (c *Cluster) Network() string { return c.Project + "_harness" }

// Scale sets the number of workers, leaving running ones alone.
func (c *Cluster) Scale(service string, n int) {
	c.t.Helper()
	c.Compose("up", "-d", "--no-recreate", "--scale", fmt.Sprintf("%s=%d", service, n), service)
}

// NATSURL lists the NATS nodes by their addresses on the project network,
// which the host reaches directly.
func (c *Cluster) NATSURL() string {
	c.t.Helper()
	var urls []string
	for i := 1; i <= 3; i++ {
		out, err := runErr(c.Root, nil, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
			c.Project+fmt.Sprintf("_nats-%d_1", i))
		if ip := strings.TrimSpace(out); err == nil && ip != "" {
			urls = append(urls, "nats://"+ip+":4222")
		}
	}
	if len(urls) == 0 {
		c.t.Fatal("no NATS node has an address")
	}
	return strings.Join(urls, ",")
}

// Password returns a user's password.
func (c *Cluster) Password(user string) string { return c.passwords[user] }

// NATS runs the nats command line as user (its password in the
// environment, never on the command line) and returns its output. Every
// user but the admin reads answers under its own inbox prefix, as
// deploy/nats/auth.conf allows.
func (c *Cluster) NATS(user string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.NATSCommand(ctx, user, args...)()
}

// NATSCommand prepares the nats command line as NATS runs it (finding the
// nodes' addresses, which takes a few docker calls) and returns what runs
// it, so a caller can time the command alone.
func (c *Cluster) NATSCommand(ctx context.Context, user string, args ...string) (run func() (string, error)) {
	if user != "admin" {
		args = append([]string{"--inbox-prefix", wire.InboxPrefix + natsUser(user)}, args...)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "nats"), args...)
	cmd.Env = append(os.Environ(), "NATS_URL="+c.NATSURL(), "NATS_USER="+natsUser(user), "NATS_PASSWORD="+c.passwords[user])
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return func() (string, error) {
		err := cmd.Run()
		return out.String(), err
	}
}

// natsUser maps the suite's user names to auth.conf's.
func natsUser(u string) string { return strings.TrimPrefix(u, "tenant-") }

// Harness runs the harness command line as the admin and returns its
// output.
func (c *Cluster) Harness(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.Bin, "harness"), args...)
	cmd.Env = append(os.Environ(), "NATS_URL="+c.NATSURL(), "NATS_USER=admin", "NATS_PASSWORD="+c.passwords["admin"])
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Client returns a Go client connected as the admin, for watching events
// and reading traces while the CLIs act.
func (c *Cluster) Client() *harness.Client {
	c.t.Helper()
	if c.client != nil {
		return c.client
	}
	opts, err := streams.Auth{User: "admin", Password: c.passwords["admin"]}.Options()
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := harness.Connect(ctx, c.NATSURL(), append(opts, nats.ReconnectWait(250*time.Millisecond))...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.client = cl
	return cl
}

// WaitServices waits until the micro services answering `nats micro ls`
// include at least want of each name.
func (c *Cluster) WaitServices(want map[string]int) {
	c.t.Helper()
	testkit.CheckFor(c.t, 3*time.Minute, 250*time.Millisecond, func() error {
		out, err := c.NATS("admin", "micro", "ls", "--json")
		if err != nil {
			return fmt.Errorf("nats micro ls: %v: %s", err, out)
		}
		for name, n := range want {
			if got := strings.Count(out, `"name": "`+name+`"`) + strings.Count(out, `"name":"`+name+`"`); got < n {
				return fmt.Errorf("%d of %s registered, want %d:\n%s", got, name, n, out)
			}
		}
		return nil
	})
}
