// Package redistest starts a real redis-server for tests: on a free port of
// the loopback interface, without persistence, in the test's temporary
// directory, and killed when the test ends. It also stops and restarts that
// server so tests can inject the faults a production Redis has (a crash, a
// restart that lost every key).
//
// If redis-server is not on PATH the test is skipped with the reason, unless
// the environment sets HARNESS_REQUIRE_REDIS=1 (as CI does), in which case it
// fails.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure.
const RequireEnv = "HARNESS_REQUIRE_REDIS"

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process owned by one test. Its methods may be
// called from several goroutines.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on a free loopback port with no persistence
// (an empty --save and --appendonly no) and returns once it answers PING. The server
// is killed when the test and its subtests finish. Start skips the test if
// redis-server is not installed (fails instead if HARNESS_REQUIRE_REDIS=1),
// and fails the test if the server does not come up.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("redistest: redis-server is not installed and %s=1: %v (install it with: apt-get install -y redis-server)", RequireEnv, err)
		}
		t.Skipf("redistest: redis-server is not installed (apt-get install -y redis-server); set %s=1 to fail instead", RequireEnv)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: pick a port: %v", err)
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// Addr returns the server's host:port, such as "127.0.0.1:41234". It stays
// the same across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns the server's address as a redis:// URL, the form REDIS_URL
// takes.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server with SIGKILL and waits for it to exit. Clients see
// connection errors until Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Restart kills the server if it runs and starts it again on the same port.
// Nothing is persisted, so every key is lost. It fails the test if the
// server does not come back, so call it from the test's goroutine.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	s.stopLocked()
	s.mu.Unlock()
	var err error
	deadline := time.Now().Add(startTimeout)
	for {
		// The port may be briefly unavailable; retry until the deadline.
		if err = s.start(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
		}
		time.Sleep(10 * time.Millisecond) // back off before the next launch
	}
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// start runs redis-server on s.port and waits until it answers PING or
// exits. On failure the process is gone and the error carries its log.
func (s *Server) start() error {
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	out := &lockedWriter{w: new(bytes.Buffer)}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Dir = s.dir
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", out.String())
		default:
		}
		if err := ping(s.Addr()); err == nil {
			s.mu.Lock()
			s.cmd, s.done = cmd, done
			s.mu.Unlock()
			return nil
		} else if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d did not answer PING within %v: %w", s.port, startTimeout, err)
		}
		select {
		case <-done:
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// ping sends one PING in the inline protocol and expects +PONG. A server
// still loading answers -LOADING, which counts as not ready.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New("PING answered " + strconv.Quote(line))
	}
	return nil
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before redis-server binds it; Start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedWriter lets the exec package's copying goroutine and start's error
// path share one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
