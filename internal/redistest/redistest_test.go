package redistest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// do sends one inline command and returns the first reply line.
func do(t *testing.T, addr, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatalf("write %q: %v", cmd, err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read reply to %q: %v", cmd, err)
	}
	if strings.HasPrefix(line, "$") && line != "$-1\r\n" {
		line, err = r.ReadString('\n')
		if err != nil {
			t.Fatalf("read bulk reply to %q: %v", cmd, err)
		}
	}
	return strings.TrimRight(line, "\r\n")
}

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Errorf("URL() = %q, want redis://127.0.0.1:<port>/0", s.URL())
	}
	if got := do(t, s.Addr(), "SET k v"); got != "+OK" {
		t.Fatalf("SET = %q, want +OK", got)
	}
	if got := do(t, s.Addr(), "DBSIZE"); got != ":1" {
		t.Errorf("DBSIZE = %q, want :1", got)
	}

	s.Stop()
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatalf("dial %s after Stop succeeded, want refused", s.Addr())
	}
	s.Stop() // a second Stop does nothing

	addr := s.Addr()
	s.Restart()
	if s.Addr() != addr {
		t.Errorf("Addr() after Restart = %q, want %q", s.Addr(), addr)
	}
	if got := do(t, s.Addr(), "GET k"); got != "$-1" {
		t.Errorf("GET k after Restart = %q, want $-1 (keys lost)", got)
	}
	s.Restart() // restarting a running server works too
	if got := do(t, s.Addr(), "PING"); got != "+PONG" {
		t.Errorf("PING = %q, want +PONG", got)
	}
}

func TestTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share %s", a.Addr())
	}
}

// TestMissingServer runs the test binary again with an empty PATH: Start
// skips, and fails instead when HARNESS_REQUIRE_REDIS=1.
func TestMissingServer(t *testing.T) {
	tests := []struct {
		name    string
		require string
		want    string
		fails   bool
	}{
		{"skips", "", "--- SKIP: TestHelperStart", false},
		{"fails when required", "1", "--- FAIL: TestHelperStart", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStart$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "PATH=", "REDISTEST_HELPER=1", RequireEnv+"="+tt.require)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tt.fails || !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "redis-server is not installed") {
				t.Errorf("helper exited with %v, output:\n%s\nwant %q and the reason", err, out, tt.want)
			}
		})
	}
}

// TestHelperStart is not a test: TestMissingServer runs it without
// redis-server on PATH.
func TestHelperStart(t *testing.T) {
	if os.Getenv("REDISTEST_HELPER") != "1" {
		return
	}
	Start(t)
	t.Error("Start returned without redis-server on PATH")
}
