//go:build unix

package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// DefaultSearchPath is where a program is looked for when a command's
// environment has no PATH, as execvp(3) does.
const DefaultSearchPath = "/usr/local/bin:/usr/bin:/bin"

// PipeGrace is how long a backend waits, once a command's processes are
// gone, for its output pipes to close. A process that escaped (setsid, or
// an engine that keeps the stream open) may hold them open for ever; after
// the grace the backend stops reading.
const PipeGrace = time.Second

// EscapedNote ends Stderr when a process outside the command's process
// group held the output pipes open after the command ended.
const EscapedNote = "\n…[the sandbox stopped reading here: a process that left the command's process group (setsid) still holds the output open and may still be running]…\n"

// Argv0 returns the program of argv quoted, for a message, or `""` when
// argv is empty.
func Argv0(argv []string) string {
	if len(argv) == 0 {
		return `""`
	}
	return strconv.Quote(argv[0])
}

// NotInstalled is the error for a program the sandboxer does not have.
func NotInstalled(name string) *protocol.Error {
	return protocol.Errorf(protocol.CodeNotFound, "program %q is not installed on the sandboxer", name)
}

// WaitTimeout waits for wg for at most d and reports whether it finished.
func WaitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// LookPath finds the program to run for name, searching the PATH of env
// (not the sandboxer's). A name with a slash is taken relative to dir.
// It returns a *protocol.Error with CodeNotFound when nothing is found.
func LookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	search := DefaultSearchPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v // the last PATH wins, as in exec.Cmd's dedup
		}
	}
	for _, d := range filepath.SplitList(search) {
		if d == "" || !filepath.IsAbs(d) {
			continue // never run a program from the working directory by accident
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", NotInstalled(name)
}

// StartError turns the error of a failed start of name (exec.Cmd.Start's,
// or an execve errno) into a *protocol.Error.
func StartError(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e := NotInstalled(name)
		if strings.Contains(name, "/") {
			e.Message = fmt.Sprintf("program %q does not exist on the sandboxer (or the interpreter named on its #! line is not installed)", name)
		}
		return e
	case errors.Is(err, fs.ErrPermission):
		return protocol.Errorf(protocol.CodeSandbox, "program %q cannot be executed: permission denied (is it marked executable?)", name)
	case errors.Is(err, syscall.ENOEXEC):
		return protocol.Errorf(protocol.CodeSandbox, "program %q is not an executable the sandboxer can run (a script needs a #! line)", name)
	default:
		return protocol.Errorf(protocol.CodeSandbox, "could not start %q: %v", name, err)
	}
}
