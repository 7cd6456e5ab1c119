package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// A data directory has one owner at a time: the process whose embedded
// server opened its store. Two servers on one store would corrupt it, so
// Start and Open take an exclusive lock on DIR/lock first, and a second
// process is refused at once, told who holds it.

// holder is what the lock file says of the process holding it.
type holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// dirLock is a data directory's lock, held until release.
type dirLock struct{ f *os.File }

// lockDataDir takes the data directory's lock. Errors: a *protocol.Error
// with CodeUnavailable naming the process that holds it; the directory
// cannot be used.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
		}
		who := "another process"
		var h holder
		if b, rerr := os.ReadFile(path); rerr == nil && json.Unmarshal(b, &h) == nil && h.PID > 0 {
			who = fmt.Sprintf("process %d (%s, since %s)", h.PID, h.Command, h.Since.Format(time.RFC3339))
		}
		return nil, &protocol.Error{Code: protocol.CodeUnavailable, Name: protocol.CodeUnavailable.String(),
			Message: fmt.Sprintf("data directory %s is in use by %s", dir, who),
			Hint:    "stop that process, talk to it (harness commands find it through DATA/server.json), or pass another --data"}
	}
	h := holder{PID: os.Getpid(), Command: strings.Join(os.Args, " "), Since: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(h)
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(b, '\n'), 0)
	}
	return &dirLock{f: f}, nil
}

// release gives the lock up.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing the descriptor drops the flock
	l.f = nil
}

// listenFree fails at once when host:port cannot be listened on (a port
// in use), which the NATS server would only report after its start
// timed out.
func listenFree(addr string) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return &protocol.Error{Code: protocol.CodeUnavailable, Name: protocol.CodeUnavailable.String(),
			Message: fmt.Sprintf("cannot listen on %s: %v", addr, err), Hint: "pick another address (port 0 picks a free one), or stop what listens there"}
	}
	return l.Close()
}
