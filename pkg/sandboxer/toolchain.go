package sandboxer

import (
	"os"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/toolchain"
)

// toolchain returns what the workspace at dir looks like, for the reply to
// its open, or nil when no marker says (or dir cannot be opened, which the
// open itself reports). It reads through an os.Root, so that nothing it
// reads lies outside the workspace, even if the workspace changes as it
// reads: a handful of lookups in the root and at most a few bounded reads.
func (s *Sandboxer) toolchain(dir string) *protocol.Toolchain {
	root, err := os.OpenRoot(dir)
	if err != nil {
		s.log.Debug("detect toolchain", "dir", dir, "err", err)
		return nil
	}
	defer root.Close()
	return toolchain.Detect(root.FS())
}
