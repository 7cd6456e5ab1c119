//go:build unix

package docker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// TestContainerConfig spells out every setting that confines and caps a
// command's container, and how each input changes them. No engine is
// needed: the configuration is a function of the spec, its limits and the
// backend's Config.
func TestContainerConfig(t *testing.T) {
	baseCmd := func() command {
		return command{
			argv: []string{"sleep", "30"}, dir: "/srv/ws", owner: "1000:1001", env: []string{"PATH=/usr/bin"},
			lim: sandbox.LimitsOf(protocol.Limits{MemoryBytes: 128 << 20, Pids: 33, OpenFiles: 77, CPUSecs: 9}),
			run: "run-1", op: "op-7",
		}
	}
	baseCfg := func() Config { return Config{SandboxerID: "sb-1"}.withDefaults() }
	// want is the configuration of baseCmd under baseCfg, in full.
	want := func() (*container.Config, *container.HostConfig) {
		yes := true
		pids := int64(33)
		return &container.Config{
				Hostname:   "sandbox",
				User:       "1000:1001",
				Env:        []string{"PATH=/usr/bin"},
				Entrypoint: []string{"sleep", "30"},
				Cmd:        []string{},
				Image:      "harness-test:1",
				WorkingDir: "/srv/ws",
				Labels:     map[string]string{LabelSandboxer: "sb-1", LabelRun: "run-1", LabelOp: "op-7"},
				StopSignal: "SIGKILL",
			}, &container.HostConfig{
				NetworkMode:    "none",
				LogConfig:      container.LogConfig{Type: "none"},
				CapDrop:        []string{"ALL"},
				SecurityOpt:    []string{"no-new-privileges"},
				ReadonlyRootfs: true,
				IpcMode:        "private",
				Init:           &yes,
				Tmpfs:          map[string]string{"/tmp": "rw,exec,nosuid,nodev,size=536870912"},
				Mounts: []mount.Mount{{
					Type: mount.TypeBind, Source: "/srv/ws", Target: "/srv/ws",
					BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
				}},
				Resources: container.Resources{
					Memory:     128 << 20,
					MemorySwap: 128 << 20,
					NanoCPUs:   1e9,
					PidsLimit:  &pids,
					Ulimits: []*container.Ulimit{
						{Name: "cpu", Soft: 10, Hard: 11},
						{Name: "nofile", Soft: 77, Hard: 77},
					},
				},
			}
	}
	tests := []struct {
		name string
		edit func(*Config, *command)
		want func(*container.Config, *container.HostConfig)
	}{
		{"defaults", func(*Config, *command) {}, func(*container.Config, *container.HostConfig) {}},
		{
			"network allowed takes the configured network",
			func(_ *Config, c *command) { c.network = true },
			func(_ *container.Config, hc *container.HostConfig) { hc.NetworkMode = "bridge" },
		},
		{
			"a network of the operator's",
			func(cfg *Config, c *command) { cfg.Network, c.network = "harness-egress", true },
			func(_ *container.Config, hc *container.HostConfig) { hc.NetworkMode = "harness-egress" },
		},
		{
			"the network of the operator's is not used when the command may not",
			func(cfg *Config, _ *command) { cfg.Network = "harness-egress" },
			func(*container.Config, *container.HostConfig) {},
		},
		{
			"the configured user overrides the owner of the workspace",
			func(cfg *Config, _ *command) { cfg.User = "65534:65534" },
			func(cc *container.Config, _ *container.HostConfig) { cc.User = "65534:65534" },
		},
		{
			"no owner known and no user configured",
			func(_ *Config, c *command) { c.owner = "" },
			func(cc *container.Config, _ *container.HostConfig) { cc.User = "" },
		},
		{
			"a nil environment is an empty one, not the image's",
			func(_ *Config, c *command) { c.env = nil },
			func(cc *container.Config, _ *container.HostConfig) { cc.Env = []string{} },
		},
		{
			"CPUs and tmpfs of the operator's",
			func(cfg *Config, _ *command) { cfg.CPUs, cfg.TmpfsBytes = 2.5, 64<<20 },
			func(_ *container.Config, hc *container.HostConfig) {
				hc.NanoCPUs = 2.5e9
				hc.Tmpfs["/tmp"] = "rw,exec,nosuid,nodev,size=67108864"
			},
		},
		{
			"the default limits",
			func(_ *Config, c *command) { c.lim = sandbox.LimitsOf(protocol.Limits{}) },
			func(_ *container.Config, hc *container.HostConfig) {
				d := protocol.Limits{}.WithDefaults()
				pids := int64(d.Pids)
				hc.Memory, hc.MemorySwap, hc.PidsLimit = d.MemoryBytes, d.MemoryBytes, &pids
				hc.Ulimits = []*container.Ulimit{
					{Name: "cpu", Soft: int64(d.CPUSecs) + 1, Hard: int64(d.CPUSecs) + 2},
					{Name: "nofile", Soft: int64(d.OpenFiles), Hard: int64(d.OpenFiles)},
				}
			},
		},
		{
			"no run named",
			func(_ *Config, c *command) { c.run, c.op = "", "" },
			func(cc *container.Config, _ *container.HostConfig) {
				cc.Labels = map[string]string{LabelSandboxer: "sb-1", LabelRun: "", LabelOp: ""}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, c := baseCfg(), baseCmd()
			tt.edit(&cfg, &c)
			wantC, wantH := want()
			tt.want(wantC, wantH)
			gotC, gotH := containerConfig(cfg, "harness-test:1", c)
			if d := cmp.Diff(wantC, gotC); d != "" {
				t.Errorf("container config (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantH, gotH); d != "" {
				t.Errorf("host config (-want +got):\n%s", d)
			}
			// What confines the command holds in every row.
			if gotH.Privileged || len(gotH.CapAdd) > 0 || !gotH.ReadonlyRootfs || len(gotH.Mounts) != 1 || gotH.Mounts[0].ReadOnly {
				t.Errorf("host config %+v: want unprivileged, no capability added, a read-only root and only the workspace mounted read-write", gotH)
			}
		})
	}
}

// TestAttribute covers how a command's end is read: which cap ended it,
// whether it exited on its own, and the signal that killed it.
func TestAttribute(t *testing.T) {
	lim := sandbox.LimitsOf(protocol.Limits{CPUSecs: 5, Pids: 64})
	oom := &container.State{OOMKilled: true}
	type report struct {
		Exited   bool
		ExitCode int
		Signal   string
		CapHit   string
	}
	tests := []struct {
		name string
		e    ending
		want report
	}{
		{"exit 0", ending{status: 0}, report{Exited: true}},
		{"exit 3", ending{status: 3}, report{Exited: true, ExitCode: 3}},
		{"no status", ending{status: -1}, report{ExitCode: -1}},
		{"killed by a signal of its own", ending{status: 128 + 9}, report{ExitCode: -1, Signal: "SIGKILL"}},
		{"128+N is signal N", ending{status: 128 + 15}, report{ExitCode: -1, Signal: "SIGTERM"}},
		{"a status beyond the signals is an exit", ending{status: 200}, report{Exited: true, ExitCode: 200}},
		{"wall clock", ending{status: 137, wallHit: true, killed: true}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapWall}},
		{"wall clock, but it exited first", ending{status: 0, wallHit: true, killed: true}, report{Exited: true}},
		{"wall clock before the cgroup's cap", ending{status: 137, wallHit: true, killed: true, usage: cgroupUsage{capHit: sandbox.CapMemory}}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapWall}},
		{"cancelled", ending{status: 137, killed: true}, report{ExitCode: -1, Signal: "SIGKILL"}},
		{"cancelled, but it exited first", ending{status: 0, killed: true}, report{Exited: true}},
		{"cancelled after its CPU time ran out is not a cap", ending{status: 137, killed: true, usage: cgroupUsage{cpu: time.Minute}}, report{ExitCode: -1, Signal: "SIGKILL"}},
		{"cancelled while the OOM killer struck", ending{status: 137, killed: true, state: oom}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapMemory}},
		{"OOM kill per the engine", ending{status: 137, state: oom}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapMemory}},
		{"OOM kill of a child, then exit 0", ending{status: 0, state: oom}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapMemory}},
		{"the cgroup's cap before the engine's OOM flag", ending{status: 0, state: oom, usage: cgroupUsage{capHit: sandbox.CapPids}}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapPids}},
		{"pids cap seen in the cgroup, then exit 0", ending{status: 0, usage: cgroupUsage{capHit: sandbox.CapPids}}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapPids}},
		{"CPU time seen in the cgroup", ending{status: 137, usage: cgroupUsage{capHit: sandbox.CapCPU}}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapCPU}},
		{"SIGXCPU", ending{status: 128 + 24}, report{ExitCode: -1, Signal: "SIGXCPU", CapHit: sandbox.CapCPU}},
		{"CPU time used up, then exit 0", ending{status: 0, usage: cgroupUsage{cpu: 5 * time.Second}}, report{ExitCode: -1, CapHit: sandbox.CapCPU}},
		{"CPU time short of the cap", ending{status: 0, usage: cgroupUsage{cpu: 4 * time.Second}}, report{Exited: true}},
		{"a refused fork, then exit 2", ending{status: 2, stderr: "sh: 1: Cannot fork\n"}, report{ExitCode: -1, Signal: "SIGKILL", CapHit: sandbox.CapPids}},
		{"a refused fork, then exit 0", ending{status: 0, stderr: "sh: 1: Cannot fork\n"}, report{Exited: true}},
		{"inspect failed", ending{status: 137, state: nil}, report{ExitCode: -1, Signal: "SIGKILL"}},
		{"inspect without OOM", ending{status: 1, state: &container.State{}}, report{Exited: true, ExitCode: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := attribute(tt.e, lim)
			got := report{Exited: r.Exited, ExitCode: r.ExitCode, Signal: r.Signal, CapHit: r.CapHit}
			if got != tt.want {
				t.Errorf("attribute(%+v) = %+v, want %+v", tt.e, got, tt.want)
			}
			if !cmp.Equal(r, protocol.ExecReport{Exited: r.Exited, ExitCode: r.ExitCode, Signal: r.Signal, CapHit: r.CapHit}) {
				t.Errorf("attribute(%+v) set more than the outcome: %+v", tt.e, r)
			}
		})
	}
	t.Run("a fork refused without a pids cap is not one", func(t *testing.T) {
		if r := attribute(ending{status: 2, stderr: "fork: retry: Resource temporarily unavailable"}, protocol.Limits{CPUSecs: 5}); r.CapHit != "" || !r.Exited {
			t.Errorf("attribute with Pids 0 = %+v, want an exit with no cap", r)
		}
	})
}

func TestDiscarded(t *testing.T) {
	tests := []struct {
		name     string
		warnings []string
		want     []string
	}{
		{"none", nil, nil},
		{"unrelated", []string{"Published ports are discarded when using host network mode"}, nil},
		{"pids", []string{"Your kernel does not support pids limit capabilities or the cgroup is not mounted. PIDs limit discarded."}, []string{sandbox.CapPids}},
		{"memory", []string{"Your kernel does not support memory limit capabilities or the cgroup is not mounted. Limitation discarded."}, []string{sandbox.CapMemory}},
		{"swap is not a cap", []string{"Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap."}, nil},
		{"both", []string{"PIDs limit discarded.", "Memory limit discarded."}, []string{sandbox.CapPids, sandbox.CapMemory}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := discarded(tt.warnings); !slices.Equal(got, tt.want) {
				t.Errorf("discarded(%q) = %q, want %q", tt.warnings, got, tt.want)
			}
		})
	}
}

func TestNotStarted(t *testing.T) {
	res := func(code int, stderr string) *sandbox.Result {
		return &sandbox.Result{Report: protocol.ExecReport{Exited: true, ExitCode: code}, Stderr: stderr}
	}
	tests := []struct {
		name string
		prog string
		res  *sandbox.Result
		want protocol.Code // 0 for none
	}{
		{"not installed", "nope", res(127, `[FATAL tini (7)] exec nope failed: No such file or directory`), protocol.CodeNotFound},
		{"not executable", "./x.sh", res(126, `[FATAL tini (7)] exec ./x.sh failed: Permission denied`), protocol.CodeSandbox},
		{"a program that exits 127 itself", "sh", res(127, "sh: 1: nope: not found\n"), 0},
		{"tini's message about another program", "sh", res(127, `[FATAL tini (7)] exec nope failed: No such file or directory`), 0},
		{"output besides the message", "nope", &sandbox.Result{Report: protocol.ExecReport{Exited: true, ExitCode: 127}, Stdout: "x", Stderr: `[FATAL tini (7)] exec nope failed: x`}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := notStarted(tt.prog, "img", tt.res)
			var got protocol.Code
			if pe := protocol.AsError(err); pe != nil {
				got = pe.Code
				if !strings.Contains(pe.Message, "img") {
					t.Errorf("notStarted = %q, want it to name the image", pe.Message)
				}
			}
			if got != tt.want {
				t.Errorf("notStarted(%q, %+v) = %v, want code %v", tt.prog, tt.res, err, tt.want)
			}
		})
	}
}
