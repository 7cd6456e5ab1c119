package faults

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/internal/fault"
)

// Proc is one role process a Supervisor keeps running.
type Proc struct {
	Role string   // coordinator, worker or sandboxer
	Name string   // unique among the supervisor's processes; names its logs
	Bin  string   // the binary
	Env  []string // added to this process's environment
	Args []string
	// FreshID starts the process under a new --id NAME-GEN each time:
	// a coordinator started again is a new coordinator, not the dead one
	// back.
	FreshID bool

	gen    int       // starts so far, under Supervisor.mu
	cur    *exec.Cmd // the running one, under Supervisor.mu
	exited chan struct{}
}

// Exit is how a supervised process ended.
type Exit struct {
	Proc *Proc
	ID   string // the id it ran under: its name, or with FreshID NAME-GEN
	// Started is false when the process could not be started; it is not
	// started again.
	Started bool
	// Point is the point its fault line says it was killed at, "" when it
	// died otherwise.
	Point fault.Point
	Err   error     // what waiting for it returned, or why it did not start
	Log   string    // the path of its log
	Time  time.Time // when it died
}

// Supervisor starts role processes armed with fault specs, and starts each
// again when it dies, until Stop. It is safe for concurrent use.
type Supervisor struct {
	logs string
	died func(Exit) (spec string, restart time.Duration)

	mu       sync.Mutex
	stopping bool
	procs    []*Proc
}

// NewSupervisor returns a supervisor that writes each process's output to
// NAME.GEN.log under logs. After each death it calls died, on the dead
// process's own goroutine, for the spec to arm the next start with ("" for
// none) and how long to wait before it.
func NewSupervisor(logs string, died func(Exit) (spec string, restart time.Duration)) *Supervisor {
	return &Supervisor{logs: logs, died: died}
}

// Start starts p armed with spec (fault.EnvVar=spec; "" arms nothing) and
// keeps it running until Stop: each time it dies, the supervisor reads the
// point it was killed at from its log, tells died, and starts it again
// with the spec died returns. A process that cannot be started is reported
// to died with Started false, and not started again.
func (s *Supervisor) Start(p *Proc, spec string) {
	p.exited = make(chan struct{})
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	go func() {
		defer close(p.exited)
		restart := time.Duration(0)
		for {
			if restart > 0 {
				time.Sleep(restart)
			}
			cmd, id, logPath, err := s.start(p, spec)
			if cmd == nil {
				if err != nil {
					s.died(Exit{Proc: p, ID: id, Err: err, Log: logPath, Time: time.Now()})
				}
				return
			}
			err = cmd.Wait()
			died := time.Now()
			if s.stopped() {
				return
			}
			log, _ := os.ReadFile(logPath)
			spec, restart = s.died(Exit{Proc: p, ID: id, Started: true, Point: faultLine(string(log)), Err: err, Log: logPath, Time: died})
		}
	}()
}

// start starts p's next generation, unless the supervisor is stopping
// (then it returns a nil command and error).
func (s *Supervisor) start(p *Proc, spec string) (*exec.Cmd, string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, "", "", nil
	}
	p.gen++
	args := slices.Clone(p.Args)
	id := p.Name
	if p.FreshID {
		id = fmt.Sprintf("%s-%d", p.Name, p.gen)
		args = append(args, "--id", id)
	}
	cmd := exec.Command(p.Bin, args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Env = append(cmd.Env, fault.EnvVar+"="+spec)
	logPath := filepath.Join(s.logs, fmt.Sprintf("%s.%d.log", p.Name, p.gen))
	out, err := os.Create(logPath)
	if err == nil {
		cmd.Stdout, cmd.Stderr = out, out
		err = cmd.Start()
		out.Close()
	}
	if err != nil {
		return nil, id, logPath, fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cur = cmd
	return cmd, id, logPath, nil
}

func (s *Supervisor) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// Stop kills every process with SIGKILL and waits until each is down and
// none will be started again. Stopping again does nothing more.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	s.stopping = true
	var cmds []*exec.Cmd
	for _, p := range s.procs {
		if p.cur != nil {
			cmds = append(cmds, p.cur)
		}
	}
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	for _, c := range cmds {
		_ = c.Process.Kill()
	}
	for _, p := range procs {
		<-p.exited
	}
}

// faultLine is the point a process's fault line names, or "".
func faultLine(out string) fault.Point {
	_, rest, ok := strings.Cut(out, "harness fault: SIGKILL at ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return fault.Point(name)
}

// NATSServer is a nats-server process with JetStream on a store that
// survives its restarts, syncing every write before acknowledging it.
type NATSServer struct {
	URL string

	bin, conf, logs string
	mu              sync.Mutex
	cmd             *exec.Cmd
	gen             int
}

// StartNATS writes the configuration of a nats-server listening on a free
// loopback port with its store under dir, and starts bin on it (see
// Start); each start's output goes to nats-server.GEN.log under logs.
// Errors: the configuration cannot be written (and no server is
// returned), or the server does not start (it is returned, to Kill).
func StartNATS(bin, dir, logs string) (*NATSServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nats.conf")
	text := fmt.Sprintf("listen: %q\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", addr, filepath.Join(dir, "store"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	n := &NATSServer{bin: bin, conf: conf, URL: "nats://" + addr, logs: logs}
	return n, n.Start()
}

// Start starts the server and waits, up to thirty seconds, until it takes
// connections. Errors: it cannot be started, or does not come up (it is
// left running then; Kill kills it).
func (n *NATSServer) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := exec.Command(n.bin, "-c", n.conf)
	n.gen++
	out, err := os.Create(filepath.Join(n.logs, fmt.Sprintf("nats-server.%d.log", n.gen)))
	if err == nil {
		cmd.Stdout, cmd.Stderr = out, out
		err = cmd.Start()
		out.Close()
	}
	if err != nil {
		return fmt.Errorf("start nats-server: %w", err)
	}
	n.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(n.URL, nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server did not come up: %w (its log is in %s)", err, n.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server with SIGKILL and waits for it to end.
func (n *NATSServer) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}
