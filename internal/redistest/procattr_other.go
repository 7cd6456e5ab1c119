//go:build !linux

package redistest

import "os/exec"

// setProcAttr does nothing where the kernel cannot tie the server's life to
// the test binary's; the test's cleanup still kills it.
func setProcAttr(cmd *exec.Cmd) {}
