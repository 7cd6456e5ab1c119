//go:build linux && (amd64 || arm64)

package native

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCgroupMounts(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		own       string // /proc/self/cgroup
		want      map[string]string
	}{
		{
			name: "hybrid, as on the dev machine",
			mountinfo: `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
			own: "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/59f2\n1:cpu:/\n0::/\n",
			want: map[string]string{
				"":       "/sys/fs/cgroup/unified",
				"memory": "/sys/fs/cgroup/memory/process_api/59f2",
				"pids":   "/sys/fs/cgroup/pids",
				"cpu":    "/sys/fs/cgroup/cpu",
			},
		},
		{
			name:      "cgroup v2 under systemd",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			own:       "0::/system.slice/harness-sandboxer.service\n",
			want:      map[string]string{"": "/sys/fs/cgroup/system.slice/harness-sandboxer.service"},
		},
		{
			name:      "v1 co-mounted controllers in a container whose mount shows a subtree",
			mountinfo: "40 31 0:35 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n41 31 0:36 /docker/abc /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory\n",
			own:       "3:cpu,cpuacct:/docker/abc/job\n2:memory:/elsewhere\n",
			want:      map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct/job", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct/job"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own := parseOwnCgroups([]byte(tt.own))
			got := map[string]string{}
			for _, m := range parseCgroupMounts([]byte(tt.mountinfo)) {
				key := strings.Join(m.controllers, ",") // "" for v2, as in /proc/self/cgroup
				dir, ok := cgroupDir(m, own[key])
				if !ok {
					continue
				}
				if m.v2 {
					got[""] = dir
				}
				for _, c := range m.controllers {
					got[c] = dir
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cgroup directories (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSweepCgroups checks that New's sweep removes the cgroups of a
// sandboxer process that no longer runs, and only those.
func TestSweepCgroups(t *testing.T) {
	l, err := detectCgroups([]string{"memory", "pids"})
	if err != nil {
		if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no writable cgroups here: %v", err)
	}
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	dead := c.Process.Pid // exited and reaped
	parents := []string{l.unified}
	for _, d := range l.v1 {
		parents = append(parents, d)
	}
	var stale, live []string
	for _, p := range parents {
		if p == "" {
			continue
		}
		s := filepath.Join(p, fmt.Sprintf("%s%d-1-1", cgroupPrefix, dead))
		v := filepath.Join(p, fmt.Sprintf("%s%d-1-1", cgroupPrefix, os.Getpid()))
		for _, d := range []string{s, v} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { os.Remove(s); os.Remove(v) })
		stale, live = append(stale, s), append(live, v)
	}
	if left := sweepCgroups(l); len(left) > 0 {
		t.Errorf("sweepCgroups left %q", left)
	}
	for _, d := range stale {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s of a dead sandboxer is still there", d)
		}
	}
	for _, d := range live {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s of this live process was removed: %v", d, err)
		}
	}
}

// TestNewCgroupWithoutCounters checks that a cgroup whose memory.events
// and pids.events cannot be opened is still created, its caps' hits not
// counted: a directory that is no cgroup stands in for the hierarchy.
func TestNewCgroupWithoutCounters(t *testing.T) {
	l := &cgroupLayout{mode: "cgroup2", unified: t.TempDir(), v2: map[string]bool{"memory": true, "pids": true}, v1: map[string]string{}}
	cg, err := newCgroup(l, "test", 0)
	if err != nil {
		t.Fatalf("newCgroup without memory.events and pids.events: %v, want a cgroup whose cap hits are not counted", err)
	}
	if cg.memEvents != -1 || cg.pidsEvents != -1 {
		t.Errorf("memEvents, pidsEvents = %d, %d; want -1, -1", cg.memEvents, cg.pidsEvents)
	}
	if c := cg.capHit(); c != "" {
		t.Errorf("capHit() = %q, want none", c)
	}
	if err := cg.remove(); err != nil {
		t.Errorf("remove: %v", err)
	}
}

// TestNewCgroupFails checks that newCgroup returns its error, having
// removed what it made, when it cannot make a cgroup directory.
func TestNewCgroupFails(t *testing.T) {
	made := t.TempDir()
	l := &cgroupLayout{mode: "hybrid", unified: made, v2: map[string]bool{}, v1: map[string]string{"pids": filepath.Join(made, "absent")}}
	cg, err := newCgroup(l, "test", 0)
	if err == nil {
		cg.remove()
		t.Fatal("newCgroup under a missing v1 directory succeeded, want an error")
	}
	if left, _ := os.ReadDir(made); len(left) > 0 {
		t.Errorf("newCgroup's failure left %d entries in %s, want none", len(left), made)
	}
}
