package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// PackOptions tune Pack. The zero value packs everything within the
// default limits.
type PackOptions struct {
	// Limits bound the archive; zero fields take the defaults.
	Limits Limits
	// Exclude lists path.Match patterns; an entry whose base name or
	// slash-separated path relative to the directory matches one is left
	// out, with everything under it (".git", "node_modules", "*.log").
	Exclude []string
}

// epoch is the modification time of every entry: the archive of the same
// content is the same bytes, so it has the same ref.
var epoch = time.Unix(0, 0).UTC()

type entry struct {
	name   string // clean, slash-separated, relative
	kind   byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	exec   bool
	size   int64
	target string // of a symbolic link
}

// Pack writes the directory dir to w as a snapshot archive: a
// gzip-compressed tar of its directories, regular files (with their
// executable bit) and symbolic links, in name order, with no owners and a
// fixed time, so the same content always packs to the same bytes.
//
// Pack leaves out, and lists in Info.LeftOut with the reason, what would
// let the materialised workspace reach what the directory's own rules
// keep apart: a symbolic link that is absolute, leads out of dir, passes
// through another link or has a target no path can be (Unpack would refuse
// it), and a regular file with more than one hard link (its other name
// may be a file outside, or one the policy denies; carried as a plain
// file it would become readable under the name that is allowed). The
// sandboxer's file tools refuse both in a workspace served in place. The
// caller reports what was left out.
//
// Errors, each a *protocol.Error naming the entry: CodeUnsupported for a
// FIFO, socket or device; CodeMalformed for a name holding a newline;
// CodeTooLarge when the archive, the files' total size or their number
// exceeds the limits; CodeNotFound when dir is not a directory. Nothing is
// excluded unless asked: exclude ".git" to leave a repository's history
// behind. I/O failures are returned wrapped.
func Pack(w io.Writer, dir string, opts PackOptions) (*Info, error) {
	lim := opts.Limits.WithDefaults()
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeNotFound, "workspace %s: %s", dir, err.Error())
	}
	if !fi.IsDir() {
		return nil, protocol.Errorf(protocol.CodeNotFound, "workspace %s is not a directory", dir)
	}
	for _, p := range opts.Exclude {
		if _, err := path.Match(p, ""); err != nil {
			return nil, protocol.FieldError(protocol.CodeInvalidField, "exclude", "write a glob such as .git or *.log", "bad exclude pattern %q", p)
		}
	}
	entries, info, err := list(dir, opts.Exclude, lim)
	if err != nil {
		return nil, err
	}
	cw := &capWriter{w: w, left: lim.MaxArchiveBytes}
	zw, err := gzip.NewWriterLevel(cw, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := writeEntry(tw, dir, e); err != nil {
			if cw.over {
				return nil, tooLargeArchive(lim)
			}
			return nil, err
		}
	}
	if err := tw.Close(); err == nil {
		err = zw.Close()
	} else {
		_ = zw.Close()
	}
	if cw.over {
		return nil, tooLargeArchive(lim)
	}
	if err != nil {
		return nil, fmt.Errorf("write snapshot: %w", err)
	}
	return info, nil
}

func tooLargeArchive(lim Limits) error {
	return refuse(protocol.CodeTooLarge, "exclude what the run does not need (--exclude), such as build output or .git",
		"the compressed snapshot is over %d bytes", lim.MaxArchiveBytes)
}

// list walks dir and returns what Pack will write, checked against the
// limits and the rules Unpack applies.
func list(dir string, exclude []string, lim Limits) ([]entry, *Info, error) {
	var entries []entry
	info := &Info{}
	links := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read workspace: %w", err)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name, err := cleanName(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if excluded(name, exclude) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		e := entry{name: name}
		switch t := d.Type(); {
		case t.IsDir():
			e.kind = tar.TypeDir
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return fmt.Errorf("read workspace: %w", err)
			}
			if n := linkCount(fi); n > 1 {
				info.LeftOut = append(info.LeftOut, LeftOut{Path: name,
					Reason: fmt.Sprintf("it has %d hard links, and another name of it may be a file outside the workspace or one the policy denies", n)})
				return nil
			}
			e.kind, e.size, e.exec = tar.TypeReg, fi.Size(), fi.Mode().Perm()&0o111 != 0
			info.Bytes += e.size
			if info.Bytes > lim.MaxBytes {
				return refuse(protocol.CodeTooLarge, "exclude what the run does not need (--exclude)", "the workspace's files are over %d bytes", lim.MaxBytes)
			}
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("read workspace: %w", err)
			}
			e.kind, e.target = tar.TypeSymlink, filepath.ToSlash(target)
			links[name] = e.target
		default:
			return refuse(protocol.CodeUnsupported, "remove it or exclude it; a snapshot holds files, directories and symbolic links",
				"%s is a %s", name, kindName(t))
		}
		info.Files++
		if info.Files > lim.MaxFiles {
			return refuse(protocol.CodeTooLarge, "exclude what the run does not need (--exclude)", "the workspace has more than %d entries", lim.MaxFiles)
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// A link whose target Unpack would refuse is left out. One pass is
	// enough: leaving a link out can only spare another from passing
	// through it, and such a link is left out already.
	kept := entries[:0]
	for _, e := range entries {
		if e.kind == tar.TypeSymlink {
			if err := checkLink(e.name, e.target, links); err != nil {
				info.Files--
				info.LeftOut = append(info.LeftOut, LeftOut{Path: e.name, Reason: protocol.AsError(err).Message})
				continue
			}
		}
		kept = append(kept, e)
	}
	slices.SortFunc(info.LeftOut, func(a, b LeftOut) int { return strings.Compare(a.Path, b.Path) })
	return kept, info, nil
}

func excluded(name string, patterns []string) bool {
	base := path.Base(name)
	for _, p := range patterns {
		if ok, _ := path.Match(p, base); ok {
			return true
		}
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func kindName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func writeEntry(tw *tar.Writer, dir string, e entry) error {
	h := &tar.Header{Name: e.name, Typeflag: e.kind, ModTime: epoch, Mode: 0o644}
	switch e.kind {
	case tar.TypeDir:
		h.Name += "/"
		h.Mode = 0o755
		return tw.WriteHeader(h)
	case tar.TypeSymlink:
		h.Linkname = e.target
		h.Mode = 0o777
		return tw.WriteHeader(h)
	}
	if e.exec {
		h.Mode = 0o755
	}
	h.Size = e.size
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(e.name)))
	if err != nil {
		return fmt.Errorf("read workspace: %w", err)
	}
	defer f.Close()
	// A file that changes while it is packed must not change the header's
	// promise: exactly Size bytes follow.
	n, err := io.CopyN(tw, f, e.size)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read workspace %s: %w", e.name, err)
	}
	if n < e.size {
		return fmt.Errorf("read workspace: %s shrank while it was packed; pack again", e.name)
	}
	return nil
}

// capWriter passes writes on until left bytes are spent, then fails them.
type capWriter struct {
	w    io.Writer
	left int64
	over bool
}

var errCap = errors.New("size cap reached")

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, errCap
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}
