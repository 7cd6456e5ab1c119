//go:build linux

package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ioharness/harness/pkg/sandbox"
)

// A running container's cgroup is read every cgroupPollFast during its
// first cgroupFastFor, then every cgroupPoll.
const (
	cgroupPollFast = 10 * time.Millisecond
	cgroupFastFor  = time.Second
	cgroupPoll     = 50 * time.Millisecond
)

// cgroupUsage is what the cgroup of a container said while it ran.
type cgroupUsage struct {
	cpu    time.Duration // CPU time of all its processes, as last read
	capHit string        // sandbox.CapMemory, sandbox.CapPids or sandbox.CapCPU: the first cap hit, or ""
}

// cgroupWatch polls the cgroup of one container until stopped, and is
// told by inotify the moment the pids cap refuses a fork where the kernel
// notifies it (cgroup v2). The engine removes the cgroup as soon as the
// container exits, so what it reports is the last reading before that.
type cgroupWatch struct {
	files  cgroupFiles
	cpuMax time.Duration // CPU time of the container that is a cap hit

	onCap    func(capHit string) // called once, with the first cap hit
	done     chan struct{}
	finished chan struct{}
	poked    chan struct{}
	once     sync.Once
	notify   *os.File // inotify instance, or nil
	notified chan struct{}

	mu    sync.Mutex
	usage cgroupUsage
}

// cgroupFiles are the candidate paths of each file the watch reads; the
// first that exists is used.
type cgroupFiles struct {
	pids, memory, cpu []string
}

// watchCgroup starts watching the cgroup of the running container id,
// under the engine's default cgroup parents (cgroupfs "docker/<id>" or
// systemd "system.slice/docker-<id>.scope", cgroup v1 or v2). onCap is
// called, from another goroutine and at most once, when the kernel
// enforces the memory cap (an OOM kill) or the pids cap (a refused fork),
// or when the container's processes have used cpuMax of CPU time.
func (d *Backend) watchCgroup(id string, cpuMax time.Duration, onCap func(capHit string)) *cgroupWatch {
	w := &cgroupWatch{
		cpuMax:   cpuMax,
		onCap:    onCap,
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		poked:    make(chan struct{}, 1),
	}
	root := d.cfg.CgroupRoot
	for _, rel := range []string{filepath.Join("docker", id), filepath.Join("system.slice", "docker-"+id+".scope")} {
		w.files.pids = append(w.files.pids,
			filepath.Join(root, "pids", rel, "pids.events"),
			filepath.Join(root, rel, "pids.events"))
		w.files.memory = append(w.files.memory,
			filepath.Join(root, "memory", rel, "memory.oom_control"),
			filepath.Join(root, rel, "memory.events"))
		w.files.cpu = append(w.files.cpu,
			filepath.Join(root, "cpuacct", rel, "cpuacct.usage"),
			filepath.Join(root, "cpu,cpuacct", rel, "cpuacct.usage"),
			filepath.Join(root, rel, "cpu.stat"))
	}
	w.notifyPids()
	go func() {
		defer close(w.finished)
		start := time.Now()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				w.read() // often gone by now; worth a try
				return
			case <-w.poked:
				w.read()
			case <-t.C:
				w.read()
				if time.Since(start) < cgroupFastFor {
					t.Reset(cgroupPollFast)
				} else {
					t.Reset(cgroupPoll)
				}
			}
		}
	}()
	return w
}

// hit records that the kernel enforced capHit; the first one is kept and
// reported to onCap.
func (w *cgroupWatch) hit(capHit string) {
	w.mu.Lock()
	first := w.usage.capHit == ""
	if first {
		w.usage.capHit = capHit
	}
	w.mu.Unlock()
	if first && w.onCap != nil {
		w.onCap(capHit)
	}
}

// read updates the usage from the cgroup files.
func (w *cgroupWatch) read() {
	if dockerKeyed(w.files.memory, "oom_kill") > 0 {
		w.hit(sandbox.CapMemory)
	}
	if dockerKeyed(w.files.pids, "max") > 0 {
		w.hit(sandbox.CapPids)
	}
	for _, f := range w.files.cpu {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var used time.Duration
		if strings.HasSuffix(f, "cpu.stat") {
			used = time.Duration(dockerKeyedIn(string(b), "usage_usec")) * time.Microsecond
		} else {
			n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			used = time.Duration(n)
		}
		w.mu.Lock()
		w.usage.cpu = max(w.usage.cpu, used)
		w.mu.Unlock()
		if w.cpuMax > 0 && used >= w.cpuMax {
			w.hit(sandbox.CapCPU)
		}
		break
	}
}

// dockerKeyed returns the value of key in the first of files that exists, a
// flat-keyed cgroup file ("key value" lines), or 0.
func dockerKeyed(files []string, key string) int64 {
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			return dockerKeyedIn(string(b), key)
		}
	}
	return 0
}

// dockerKeyedIn returns the value of key in the "key value" lines of s, or 0.
func dockerKeyedIn(s, key string) int64 {
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// poke asks for a reading now: the command's output has just closed, so
// it is ending, and the engine is about to remove its cgroup.
func (w *cgroupWatch) poke() {
	select {
	case w.poked <- struct{}{}:
	default:
	}
}

// stop ends the watch and returns what it saw. It may be called more than
// once.
func (w *cgroupWatch) stop() cgroupUsage {
	w.once.Do(func() {
		close(w.done)
		if w.notify != nil {
			w.notify.Close()
			<-w.notified
		}
	})
	<-w.finished
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usage
}

// notifyPids starts an inotify watch on the container's pids.events: on
// cgroup v2 the kernel notifies a change each time the pids cap refuses a
// fork (v1 does not, and polling remains).
func (w *cgroupWatch) notifyPids() {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return
	}
	watched := false
	for _, f := range w.files.pids {
		if _, err := syscall.InotifyAddWatch(fd, f, syscall.IN_MODIFY); err == nil {
			watched = true
			break
		}
	}
	if !watched {
		syscall.Close(fd)
		return
	}
	w.notify = os.NewFile(uintptr(fd), "inotify") // non-blocking: reads use the poller, Close wakes them
	w.notified = make(chan struct{})
	go func() {
		defer close(w.notified)
		buf := make([]byte, 4096)
		for {
			n, err := w.notify.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&syscall.IN_MODIFY != 0 {
					w.hit(sandbox.CapPids)
				}
				off += syscall.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}()
}
