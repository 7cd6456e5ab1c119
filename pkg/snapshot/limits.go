package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
)

// Default limits of a snapshot.
const (
	DefaultMaxArchiveBytes = 64 << 20  // the compressed archive
	DefaultMaxBytes        = 512 << 20 // the content of its files, unpacked
	DefaultMaxFiles        = 100000    // entries: files, directories and links
	// MaxPathLen bounds one entry's path, in bytes.
	MaxPathLen = 4096
)

// Limits bound a snapshot. Zero fields take the defaults.
type Limits struct {
	// MaxArchiveBytes bounds the compressed archive; default 64 MiB.
	MaxArchiveBytes int64
	// MaxBytes bounds the total size of the files once unpacked; default
	// 512 MiB.
	MaxBytes int64
	// MaxFiles bounds the entries (files, directories, links); default
	// 100000.
	MaxFiles int
}

// WithDefaults returns l with every zero or negative field at its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// Info describes a snapshot: its entries and the bytes of its files, and
// what Pack left out.
type Info struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// LeftOut lists the entries of the directory Pack did not carry, in
	// name order, each with the reason; nil when it carried everything
	// not excluded.
	LeftOut []LeftOut `json:"left_out,omitempty"`
}

// LeftOut is one entry Pack did not carry, and why.
type LeftOut struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Ref returns the content address of data: "sha256-" and its hex SHA-256.
// Archives and patches are stored under their ref.
func Ref(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256-" + hex.EncodeToString(sum[:])
}
