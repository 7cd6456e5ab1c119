package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"

	"github.com/ioharness/harness/pkg/protocol"
)

// Unpack materialises the snapshot archive read from r into dir, which it
// creates (its parent must exist; dir itself must not). Directories and
// regular files are created as the archive lists them, with mode 0755 or
// 0644 by the executable bit and no owner, set-id or sticky bits; symbolic
// links last, once every entry is known.
//
// Errors, each a *protocol.Error naming the entry: CodePathEscape for an
// absolute path, a path that climbs out with "..", an entry beneath a
// symbolic link, or a symbolic link whose target is absolute, climbs out,
// or passes through another link; CodeUnsupported for a hard link,
// device, FIFO or any other kind of entry; CodeMalformed for an archive
// that does not decode, a duplicate entry, or a name holding a newline;
// CodeTooLarge when the compressed archive, the files' total size or their
// number exceeds lim. On an error dir may hold part of the archive; the
// caller removes it.
func Unpack(r io.Reader, dir string, lim Limits) (*Info, error) {
	lim = lim.WithDefaults()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("materialise snapshot: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("materialise snapshot: %w", err)
	}
	defer root.Close()
	cr := &capReader{r: r, left: lim.MaxArchiveBytes}
	info, err := unpack(cr, root, lim)
	if cr.over {
		return nil, refuse(protocol.CodeTooLarge, "exclude what the run does not need when the snapshot is made",
			"the compressed snapshot is over %d bytes", lim.MaxArchiveBytes)
	}
	return info, err
}

func unpack(r io.Reader, root *os.Root, lim Limits) (*Info, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, refuse(protocol.CodeMalformed, "make the snapshot with harness submit --workspace or snapshot.Pack", "the snapshot is not a gzip-compressed tar: %s", err.Error())
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	info := &Info{}
	seen := map[string]byte{}
	links := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, refuse(protocol.CodeMalformed, "make the snapshot again", "the snapshot's archive does not decode: %s", err.Error())
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue // metadata for the archive, not an entry
		}
		name, err := cleanName(h.Name)
		if err != nil {
			return nil, err
		}
		if name == "" {
			if h.Typeflag == tar.TypeDir {
				continue // the root itself ("./")
			}
			return nil, refuse(protocol.CodeMalformed, "make the snapshot again", "an entry of kind %q names the workspace root", h.Typeflag)
		}
		if _, dup := seen[name]; dup {
			return nil, refuse(protocol.CodeMalformed, "make the snapshot again", "the entry %s appears twice", name)
		}
		seen[name] = h.Typeflag
		info.Files++
		if info.Files > lim.MaxFiles {
			return nil, refuse(protocol.CodeTooLarge, "exclude what the run does not need", "the snapshot has more than %d entries", lim.MaxFiles)
		}
		if l := underLink(name, links); l != "" {
			return nil, refuse(protocol.CodePathEscape, "make the snapshot again", "the entry %s lies beneath the symbolic link %s", name, l)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return nil, entryError(name, err)
			}
		case tar.TypeReg, '\x00':
			if h.Size < 0 || h.Size > lim.MaxBytes-info.Bytes {
				return nil, refuse(protocol.CodeTooLarge, "exclude what the run does not need", "the snapshot's files are over %d bytes", lim.MaxBytes)
			}
			if err := writeFile(root, name, tr, h); err != nil {
				return nil, err
			}
			info.Bytes += h.Size
		case tar.TypeSymlink:
			links[name] = h.Linkname
		case tar.TypeLink:
			return nil, refuse(protocol.CodeUnsupported, "make the snapshot with harness submit --workspace, which stores hard links as files",
				"the entry %s is a hard link", name)
		default:
			return nil, refuse(protocol.CodeUnsupported, "a snapshot holds files, directories and symbolic links only",
				"the entry %s is of a kind a snapshot may not hold (%s)", name, typeName(h.Typeflag))
		}
	}
	// Links last: a link may only be checked once every link is known, and
	// nothing may be written through one.
	names := make([]string, 0, len(links))
	for n := range links {
		names = append(names, n)
	}
	sort.Strings(names)
	for other := range seen {
		if l := underLink(other, links); l != "" {
			return nil, refuse(protocol.CodePathEscape, "make the snapshot again", "the entry %s lies beneath the symbolic link %s", other, l)
		}
	}
	for _, n := range names {
		if err := checkLink(n, links[n], links); err != nil {
			return nil, err
		}
		if err := root.MkdirAll(path.Dir(n), 0o755); err != nil {
			return nil, entryError(n, err)
		}
		if err := root.Symlink(links[n], n); err != nil {
			return nil, entryError(n, err)
		}
	}
	return info, nil
}

// writeFile creates name (which must not exist) and copies exactly the
// entry's size into it.
func writeFile(root *os.Root, name string, r io.Reader, h *tar.Header) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return entryError(name, err)
		}
	}
	perm := os.FileMode(0o644)
	if h.Mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return entryError(name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, h.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse(protocol.CodeMalformed, "make the snapshot again", "the entry %s could not be read whole: %s", name, err.Error())
	}
	if n != h.Size {
		return refuse(protocol.CodeMalformed, "make the snapshot again", "the entry %s is cut short", name)
	}
	return nil
}

// entryError turns a failure to create an entry into a protocol error:
// an escape through the file system when os.Root refused it, else
// internal.
func entryError(name string, err error) error {
	if errors.Is(err, os.ErrExist) {
		return refuse(protocol.CodeMalformed, "make the snapshot again", "the entry %s collides with another", name)
	}
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
		return refuse(protocol.CodePathEscape, "make the snapshot again", "the entry %s would be written outside the workspace", name)
	}
	return protocol.Errorf(protocol.CodeInternal, "materialise %s: %s", name, err.Error())
}

func typeName(t byte) string {
	switch t {
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	case tar.TypeGNUSparse:
		return "sparse file"
	}
	return fmt.Sprintf("type %q", t)
}

// capReader passes reads on until left bytes are read, then fails them.
type capReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a stream that ends exactly at the cap from
		// one that goes on.
		var b [1]byte
		n, err := c.r.Read(b[:])
		if n > 0 {
			c.over = true
			return 0, errCap
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
