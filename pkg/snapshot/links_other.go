//go:build !unix

package snapshot

import "io/fs"

// linkCount is 1 where the link count is not available.
func linkCount(fs.FileInfo) uint64 { return 1 }
