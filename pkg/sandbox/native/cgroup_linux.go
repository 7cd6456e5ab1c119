package native

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ioharness/harness/pkg/sandbox"
)

// Magic numbers of statfs(2) on /sys/fs/cgroup.
const (
	cgroup2Magic = 0x63677270
	tmpfsMagic   = 0x01021994
)

// Names of the cgroups the native backend creates. A command's cgroup is
// cgroupPrefix + "<sandboxer pid>-<backend number>-<sequence>" in every
// hierarchy it uses;
// on cgroup v2 the sandboxer may move itself into selfPrefix + "<pid>" to
// enable controllers for its children.
const (
	cgroupPrefix = "harness-sbx-"
	selfPrefix   = "harness-self-"
)

// shimTasks is how many tasks the pids cap allows beyond Limits.Pids for
// the sandbox's init (the shim and its Go runtime threads).
const shimTasks = 16

// cgroupSeq numbers the cgroups of this process, across Backend values;
// nativeSeq numbers the Backend values.
var cgroupSeq, nativeSeq atomic.Uint64

// cgroupLayout is where the native backend creates cgroups, found once by
// detectCgroups. Each controller comes from cgroup v2 when the sandboxer's
// v2 cgroup can delegate it, else from its v1 hierarchy.
type cgroupLayout struct {
	// mode is how /sys/fs/cgroup is mounted: "cgroup2", "hybrid" (a tmpfs
	// of v1 hierarchies plus cgroup2 at unified), "v1" or "none".
	mode string
	// unified is the sandboxer's own cgroup in the v2 hierarchy, where each
	// command gets a child cgroup: placed there at clone time
	// (CLONE_INTO_CGROUP) and killed with cgroup.kill. Empty without a
	// writable v2 hierarchy.
	unified string
	// kill: cgroup.kill exists (Linux 5.14).
	kill bool
	// v2 lists the controllers enabled for unified's children.
	v2 map[string]bool
	// v1 maps a controller to the sandboxer's own cgroup in its v1
	// hierarchy, for the controllers not taken from v2.
	v1 map[string]string
}

// has reports whether controller c is available in either version.
func (l *cgroupLayout) has(c string) bool {
	return l.v2[c] || l.v1[c] != ""
}

// describe names the hierarchies in use, for Backend.Layers.
func (l *cgroupLayout) describe() []string {
	var out []string
	if l.unified != "" {
		var cs []string
		for _, c := range []string{"memory", "pids", "cpu"} {
			if l.v2[c] {
				cs = append(cs, c)
			}
		}
		out = append(out, "cgroup2:"+strings.Join(cs, ","))
	}
	var cs []string
	for _, c := range []string{"memory", "pids", "cpu", "freezer"} {
		if l.v1[c] != "" {
			cs = append(cs, c)
		}
	}
	if len(cs) > 0 {
		out = append(out, "cgroup-v1:"+strings.Join(cs, ","))
	}
	return out
}

// mountInfo is one cgroup mount from /proc/self/mountinfo.
type mountInfo struct {
	root, point string
	v2          bool
	controllers []string // v1 only
}

// detectCgroups finds the hierarchies for the controllers in want
// ("memory", "pids", "cpu") and checks that the sandboxer can create
// cgroups in them. Missing controllers are left out of the layout; the
// error names what is missing or not writable, and the layout is still
// usable for what was found.
func detectCgroups(want []string) (*cgroupLayout, error) {
	l := &cgroupLayout{mode: "none", v2: map[string]bool{}, v1: map[string]string{}}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err == nil {
		switch st.Type {
		case cgroup2Magic:
			l.mode = "cgroup2"
		case tmpfsMagic:
			l.mode = "v1"
		}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return l, fmt.Errorf("read cgroup mounts: %w", err)
	}
	own, err := ownCgroups()
	if err != nil {
		return l, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var problems []string

	// cgroup v2: the sandboxer's own cgroup, if the hierarchy is mounted.
	for _, m := range mounts {
		if !m.v2 {
			continue
		}
		if l.mode == "v1" {
			l.mode = "hybrid"
		}
		dir, ok := cgroupDir(m, own[""])
		if !ok {
			break
		}
		if err := probeCgroup(dir); err != nil {
			problems = append(problems, fmt.Sprintf("cgroup v2 at %s is not writable (%v)", dir, err))
			break
		}
		l.unified = dir
		l.kill = kernelHasCgroupKill(dir)
		avail := fieldsOf(filepath.Join(dir, "cgroup.controllers"))
		var need []string
		for _, c := range want {
			if avail[c] {
				need = append(need, c)
			}
		}
		if len(need) > 0 {
			if err := enableControllers(dir, need); err != nil {
				problems = append(problems, fmt.Sprintf("cgroup v2 at %s cannot delegate %s to child cgroups (%v)", dir, strings.Join(need, ", "), err))
			} else {
				for _, c := range need {
					l.v2[c] = true
				}
			}
		}
		break
	}

	// cgroup v1: one hierarchy per controller not found in v2.
	v1want := append([]string(nil), want...)
	if l.unified == "" {
		v1want = append(v1want, "freezer") // to stop forks while killing
	}
	for _, c := range v1want {
		if l.v2[c] {
			continue
		}
		for _, m := range mounts {
			if m.v2 || !slices.Contains(m.controllers, c) {
				continue
			}
			dir, ok := cgroupDir(m, own[strings.Join(m.controllers, ",")])
			if !ok {
				break
			}
			if err := probeCgroup(dir); err != nil {
				problems = append(problems, fmt.Sprintf("cgroup v1 %s hierarchy at %s is not writable (%v)", c, dir, err))
				break
			}
			l.v1[c] = dir
			break
		}
	}
	var missing []string
	for _, c := range want {
		if !l.has(c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "no usable cgroup controller for "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		return l, errors.New(strings.Join(problems, "; "))
	}
	return l, nil
}

// kernelHasCgroupKill creates a probe child of dir and checks it for
// cgroup.kill.
func kernelHasCgroupKill(dir string) bool {
	p := filepath.Join(dir, fmt.Sprintf("%s%d-probe", cgroupPrefix, os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return false
	}
	defer os.Remove(p)
	_, err := os.Stat(filepath.Join(p, "cgroup.kill"))
	return err == nil
}

// probeCgroup checks that a child cgroup can be created in dir.
func probeCgroup(dir string) error {
	p := filepath.Join(dir, fmt.Sprintf("%s%d-probe", cgroupPrefix, os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Remove(p)
}

// enableControllers enables the controllers cs for the children of the
// v2 cgroup dir. When dir holds processes ("no internal processes" rule)
// and they are all this process's, the sandboxer moves itself into a leaf
// child, selfPrefix+pid, first.
func enableControllers(dir string, cs []string) error {
	enabled := fieldsOf(filepath.Join(dir, "cgroup.subtree_control"))
	var add []string
	for _, c := range cs {
		if !enabled[c] {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	err := writeCgroup(dir, "cgroup.subtree_control", strings.Join(add, " "))
	if err == nil || !errors.Is(err, syscall.EBUSY) {
		return err
	}
	procs, _ := readPids(filepath.Join(dir, "cgroup.procs"))
	for _, p := range procs {
		if p != os.Getpid() {
			return fmt.Errorf("%w: %s holds other processes (pid %d); run the sandboxer in a cgroup of its own with the controllers delegated", err, dir, p)
		}
	}
	leaf := filepath.Join(dir, selfPrefix+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := writeCgroup(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		return fmt.Errorf("move the sandboxer into %s: %w", leaf, err)
	}
	return writeCgroup(dir, "cgroup.subtree_control", strings.Join(add, " "))
}

// cgroupMounts lists the cgroup and cgroup2 mounts of this process.
func cgroupMounts() ([]mountInfo, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseCgroupMounts(b), nil
}

// parseCgroupMounts lists the cgroup and cgroup2 mounts of a mountinfo
// file.
func parseCgroupMounts(b []byte) []mountInfo {
	var out []mountInfo
	for _, line := range strings.Split(string(b), "\n") {
		// id parent maj:min root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := mountInfo{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				switch o {
				case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "clone_children", "xattr", "noprefix", "cpuset_v2_mode", "favordynmods":
				default:
					if !strings.HasPrefix(o, "release_agent=") && !strings.HasPrefix(o, "name=") {
						m.controllers = append(m.controllers, o)
					}
				}
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes the octal escapes of mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups maps the controller list of each hierarchy ("" for v2,
// "memory", "cpu,cpuacct", "name=systemd") to this process's cgroup path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	return parseOwnCgroups(b), nil
}

// parseOwnCgroups parses a /proc/<pid>/cgroup file.
func parseOwnCgroups(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out
}

// cgroupDir is the directory of cgroup path p in the hierarchy mounted by
// m, or false when p lies outside what m shows.
func cgroupDir(m mountInfo, p string) (string, bool) {
	if p == "" {
		return "", false
	}
	if m.root != "/" {
		rel, ok := strings.CutPrefix(p, m.root)
		if !ok || (rel != "" && rel[0] != '/') {
			return "", false
		}
		p = rel
	}
	return filepath.Join(m.point, p), true
}

// cgroup is one command's cgroups: a v2 cgroup (placement, kill, and the
// v2 controllers) and one v1 cgroup per v1 controller.
type cgroup struct {
	v2   string   // "" without cgroup v2
	fd   *os.File // open v2 directory, for CLONE_INTO_CGROUP
	kill bool     // v2 has cgroup.kill
	v2c  map[string]bool
	v1   map[string]string // controller -> directory

	// memEvents and pidsEvents are the open files that count the memory
	// cap's OOM kills and the pids cap's refused forks, read with pread at
	// every check rather than opened each time; -1 when there is no such
	// controller or the file could not be opened: that cap's hits are
	// then not counted.
	memEvents, pidsEvents int

	limited bool  // setLimits ran, with these values:
	memory  int64 //
	pids    int   //
}

// newCgroup creates the cgroups of one command in layout l, with a CPU
// bandwidth of cpus cores when cpus > 0; setLimits sets its other caps.
// On error nothing is left behind.
func newCgroup(l *cgroupLayout, owner string, cpus float64) (_ *cgroup, err error) {
	name := fmt.Sprintf("%s%s-%d", cgroupPrefix, owner, cgroupSeq.Add(1))
	cg := &cgroup{kill: l.kill, v2c: l.v2, v1: map[string]string{}, memEvents: -1, pidsEvents: -1}
	defer func() {
		if err != nil {
			cg.remove() // cg, not the result, which is nil by now
		}
	}()
	if l.unified != "" {
		dir := filepath.Join(l.unified, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		cg.v2 = dir
		if cg.fd, err = os.Open(dir); err != nil {
			return nil, err
		}
	}
	for c, parent := range l.v1 {
		if c == "cpu" && cpus <= 0 {
			continue
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		cg.v1[c] = dir
	}
	// A counter file that cannot be opened (a kernel or hierarchy without
	// it) means that cap's hits are not counted, not that the sandbox
	// cannot run.
	open := func(p string) int {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return -1
		}
		return fd
	}
	switch {
	case cg.v2c["memory"]:
		cg.memEvents = open(filepath.Join(cg.v2, "memory.events"))
	case cg.v1["memory"] != "":
		cg.memEvents = open(filepath.Join(cg.v1["memory"], "memory.oom_control"))
	}
	switch {
	case cg.v2c["pids"]:
		cg.pidsEvents = open(filepath.Join(cg.v2, "pids.events"))
	case cg.v1["pids"] != "":
		cg.pidsEvents = open(filepath.Join(cg.v1["pids"], "pids.events"))
	}
	if cpus > 0 {
		const period = 100000
		quota := strconv.FormatInt(int64(math.Ceil(cpus*period)), 10)
		if cg.v2c["cpu"] {
			if err := writeCgroup(cg.v2, "cpu.max", quota+" "+strconv.Itoa(period)); err != nil {
				return nil, err
			}
		} else if d := cg.v1["cpu"]; d != "" {
			if err := writeCgroup(d, "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
				return nil, err
			}
			if err := writeCgroup(d, "cpu.cfs_quota_us", quota); err != nil {
				return nil, err
			}
		}
	}
	return cg, nil
}

// setLimits sets the memory cap (bytes, no swap; on v2 an OOM kill takes
// the whole cgroup) and the pids cap (pids tasks, plus shimTasks for the
// sandbox's init). Setting them while the init already runs in the
// cgroups is safe: it waits for its configuration and holds little.
func (cg *cgroup) setLimits(memory int64, pids int) error {
	if cg.limited && cg.memory == memory && cg.pids == pids {
		return nil
	}
	cg.limited, cg.memory, cg.pids = true, memory, pids
	mem := strconv.FormatInt(memory, 10)
	if cg.v2c["memory"] {
		if err := writeCgroup(cg.v2, "memory.max", mem); err != nil {
			return err
		}
		_ = writeCgroup(cg.v2, "memory.swap.max", "0") // absent without swap accounting
		_ = writeCgroup(cg.v2, "memory.oom.group", "1")
	} else if d := cg.v1["memory"]; d != "" {
		if err := writeCgroup(d, "memory.limit_in_bytes", mem); err != nil {
			return err
		}
		_ = writeCgroup(d, "memory.memsw.limit_in_bytes", mem) // absent without swap accounting
	}
	pidsMax := strconv.Itoa(pids + shimTasks)
	if cg.v2c["pids"] {
		return writeCgroup(cg.v2, "pids.max", pidsMax)
	}
	if d := cg.v1["pids"]; d != "" {
		return writeCgroup(d, "pids.max", pidsMax)
	}
	return nil
}

// place moves process pid into the command's v1 cgroups (and into its v2
// cgroup when it was not placed there at clone time, inV2 false). Each
// move takes the kernel's cgroup_threadgroup_rwsem for writing, which
// waits for an RCU grace period: about a millisecond, more under load.
func (cg *cgroup) place(pid int, inV2 bool) error {
	s := strconv.Itoa(pid)
	if cg.v2 != "" && !inV2 {
		if err := writeCgroup(cg.v2, "cgroup.procs", s); err != nil {
			return err
		}
	}
	for _, d := range cg.v1 {
		if err := writeCgroup(d, "cgroup.procs", s); err != nil {
			return err
		}
	}
	return nil
}

// dirs lists the command's cgroup directories.
func (cg *cgroup) dirs() []string {
	var out []string
	if cg.v2 != "" {
		out = append(out, cg.v2)
	}
	for _, d := range cg.v1 {
		out = append(out, d)
	}
	return out
}

// killAll sends SIGKILL to every process in the command's cgroups.
func (cg *cgroup) killAll() {
	if cg.v2 != "" && cg.kill {
		_ = writeCgroup(cg.v2, "cgroup.kill", "1")
		return
	}
	fz := cg.v1["freezer"]
	if fz != "" {
		_ = writeCgroup(fz, "freezer.state", "FROZEN")
		defer writeCgroup(fz, "freezer.state", "THAWED")
	}
	for _, d := range cg.dirs() {
		pids, _ := readPids(filepath.Join(d, "cgroup.procs"))
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// populated reports whether a process is left in the command's cgroups.
// It takes no cgroup lock.
func (cg *cgroup) populated() bool {
	if cg.v2 != "" {
		return keyedValue(filepath.Join(cg.v2, "cgroup.events"), "populated") != 0
	}
	for _, d := range cg.dirs() {
		if pids, err := readPids(filepath.Join(d, "cgroup.procs")); err != nil || len(pids) > 0 {
			return true
		}
	}
	return false
}

// capHit reports which cap the kernel enforced in the cgroups so far:
// "memory" after an OOM kill, "pids" after a refused fork, else "".
func (cg *cgroup) capHit() string {
	switch {
	case cg.memEvents >= 0 && keyedValueAt(cg.memEvents, "oom_kill") > 0:
		return sandbox.CapMemory
	case cg.pidsEvents >= 0 && keyedValueAt(cg.pidsEvents, "max") > 0:
		return sandbox.CapPids
	}
	return ""
}

// remove kills what is left in the command's cgroups and removes them,
// retrying while the kernel finishes the kills. It returns an error
// naming the directories it could not remove within a few seconds.
func (cg *cgroup) remove() error {
	if cg.fd != nil {
		cg.fd.Close()
		cg.fd = nil
	}
	for _, fd := range []*int{&cg.memEvents, &cg.pidsEvents} {
		if *fd >= 0 {
			syscall.Close(*fd)
			*fd = -1
		}
	}
	dirs := cg.dirs()
	deadline := time.Now().Add(5 * time.Second)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 50*time.Millisecond) {
		var left []string
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				left = append(left, d)
			}
		}
		if len(left) == 0 {
			cg.v2, cg.v1 = "", map[string]string{}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroups %s: still busy", strings.Join(left, ", "))
		}
		dirs = left
		cg.killAll()
		time.Sleep(delay)
	}
}

// sweepCgroups removes the command cgroups (and self leaves) of
// sandboxers that no longer run, left behind by a crash. It returns the
// directories it could not remove.
func sweepCgroups(l *cgroupLayout) []string {
	parents := []string{}
	if l.unified != "" {
		parents = append(parents, l.unified)
	}
	for _, d := range l.v1 {
		parents = append(parents, d)
	}
	var left []string
	for _, parent := range parents {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			owner, ok := cgroupOwner(e.Name())
			if !ok || !e.IsDir() || owner == os.Getpid() || syscall.Kill(owner, 0) != syscall.ESRCH {
				continue
			}
			dir := filepath.Join(parent, e.Name())
			if strings.HasPrefix(e.Name(), selfPrefix) {
				_ = os.Remove(dir) // fails, harmlessly, while processes live in it
				continue
			}
			stale := &cgroup{v1: map[string]string{"stale": dir}, memEvents: -1, pidsEvents: -1}
			if err := stale.remove(); err != nil {
				left = append(left, dir)
			}
		}
	}
	return left
}

// cgroupOwner parses the sandboxer pid from a cgroup name made by this
// package.
func cgroupOwner(name string) (int, bool) {
	var rest string
	switch {
	case strings.HasPrefix(name, cgroupPrefix):
		rest = strings.TrimPrefix(name, cgroupPrefix)
	case strings.HasPrefix(name, selfPrefix):
		rest = strings.TrimPrefix(name, selfPrefix)
	default:
		return 0, false
	}
	p, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}

// ownCgroupDirs lists the command cgroups named for owner that exist.
func ownCgroupDirs(l *cgroupLayout, owner string) ([]string, error) {
	parents := []string{}
	if l.unified != "" {
		parents = append(parents, l.unified)
	}
	for _, d := range l.v1 {
		parents = append(parents, d)
	}
	prefix := cgroupPrefix + owner + "-"
	var out []string
	for _, parent := range parents {
		ents, err := os.ReadDir(parent)
		if err != nil {
			return out, err
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(parent, e.Name()))
			}
		}
	}
	return out, nil
}

// writeCgroup writes value to the control file dir/name.
func writeCgroup(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s to %s: %w", value, filepath.Join(dir, name), err)
	}
	return nil
}

// readPids reads a cgroup.procs file.
func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// keyedValue reads the value of key from a "key value" per line file such
// as memory.events, or -1 when it is not there.
func keyedValue(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if ok && string(k) == key {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// keyedValueAt is keyedValue of the open file fd, read from its start.
func keyedValueAt(fd int, key string) int64 {
	var buf [512]byte
	k, err := syscall.Pread(fd, buf[:], 0)
	if err != nil || k <= 0 {
		return -1
	}
	for line := range bytes.Lines(buf[:k]) {
		f, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if ok && string(f) == key {
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// fieldsOf reads a space-separated list file such as cgroup.controllers.
func fieldsOf(path string) map[string]bool {
	b, _ := os.ReadFile(path)
	out := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		out[f] = true
	}
	return out
}
