//go:build linux

package procguard

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Protect marks the calling process non-dumpable, so that a command
// running as the same user outside a namespace of its own (the floor
// backend) cannot read the process's /proc/PID/environ, mem or fds, nor
// ptrace it: the kernel then requires CAP_SYS_PTRACE, which an unprivileged
// command lacks. It also overwrites, in the environment block the kernel
// shows as /proc/PID/environ, the values of the variables that hold
// secrets (see Secret), so that not even a command running as root reads a
// provider key there; os.Getenv, which reads the runtime's own copy, still
// returns them. What it cannot stop, a root command reading the process's
// memory, is why the floor backend is the operator's to allow. Mains call
// it first thing; a library never does. Errors: the prctl call's, or the
// environment block could not be rewritten.
func Protect() error {
	// First the block, while /proc/self/mem is still this user's to open:
	// a non-dumpable process's /proc files belong to root.
	if err := scrubEnviron(); err != nil {
		return err
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, 4 /* PR_SET_DUMPABLE */, 0, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("mark the process non-dumpable: %w", e)
	}
	return nil
}

// scrubEnviron overwrites the secret values in the process's original
// environment block, found through /proc/self/stat (env_start and env_end)
// and written through /proc/self/mem.
func scrubEnviron() error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return fmt.Errorf("read /proc/self/stat: %w", err)
	}
	// The command name, field 2, may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return fmt.Errorf("unexpected /proc/self/stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// env_start and env_end are fields 50 and 51; f[0] is field 3.
	if len(f) < 49 {
		return nil // an old kernel without them: nothing to rewrite through
	}
	start, err1 := strconv.ParseUint(f[47], 10, 64)
	end, err2 := strconv.ParseUint(f[48], 10, 64)
	if err1 != nil || err2 != nil || end <= start || end-start > 1<<24 {
		return nil
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open /proc/self/mem: %w", err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("read the environment block: %w", err)
	}
	changed := false
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		if eq := bytes.IndexByte(kv, '='); eq > 0 && Secret(string(kv[:eq])) {
			for j := off + eq + 1; j < off+len(kv); j++ {
				block[j] = '*'
				changed = true
			}
		}
		off += len(kv) + 1
	}
	if !changed {
		return nil
	}
	if _, err := mem.WriteAt(block, int64(start)); err != nil {
		return fmt.Errorf("rewrite the environment block: %w", err)
	}
	return nil
}
