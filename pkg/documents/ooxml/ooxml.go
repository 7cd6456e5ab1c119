// Package ooxml reads Office Open XML packages, the zip files that hold
// an .xlsx, .docx or .pptx (the Open Packaging Conventions), under the
// document limits, for the xlsx, docx and pptx format packages. Open
// counts a package's members and the sizes they declare before any is
// read; every byte read from a part is then counted against the
// expanded-size limit, whatever the sizes declared; an XML part is read
// token by token and refused when it nests past the depth limit. On top
// of that it resolves a part's relationships and media types, finds the
// main part, and collects a document's text up to a number of
// characters (Text).
//
// Every refusal is a documents.Errorf error (protocol.CodeBadArguments)
// whose message says what is wrong with the file and what to do. The
// package uses only the standard library, so it needs no build tag of
// its own: each format package imports it behind its tag.
package ooxml

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/documents"
)

// Package is an office file opened under limits. A Package is not safe
// for concurrent use: its parts share one count of the bytes read.
type Package struct {
	ctx   context.Context
	kind  string // what the file should be, for messages: "a Word document"
	lim   documents.Limits
	parts map[string]*zip.File // by lower-cased part name, without a leading slash
	left  int64                // decompressed bytes still allowed
	types *contentTypes        // read on first use
}

// oleMagic begins an OLE compound file: an encrypted office document, or
// an old binary one.
var oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}

// Open opens in as a package of kind, a phrase for messages ("a Word
// document (.docx)"), under lim. ctx is checked now and then while its XML
// parts are read. Open reads no part; it refuses, with a documents.Errorf
// message naming the rule: an OLE compound file (an encrypted or an old
// binary office file), a file that is not a zip, one of more than
// lim.MaxEntries members, and one whose members declare more than
// lim.MaxExpandedBytes together. Part names are matched without regard to
// case, a backslash is read as a slash, and of two members of one name
// the first is the part.
func Open(ctx context.Context, in []byte, kind string, lim documents.Limits) (*Package, error) {
	if bytes.HasPrefix(in, oleMagic) {
		return nil, documents.Errorf("the file is not %s the tools can read: it is an OLE compound file, which is either a password-protected (encrypted) office document or one in the old binary format (.doc, .xls, .ppt); save it unencrypted in the current format and try again", kind)
	}
	zr, err := zip.NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		return nil, documents.Errorf("the file is not %s: it is not a zip package (%v); give a file saved by an office program", kind, err)
	}
	if n := len(zr.File); n > lim.MaxEntries {
		return nil, documents.Errorf("the file has %d zip members, over the document tools' limit of %d; it is not %s an office program would write, or is built to exhaust a reader", n, lim.MaxEntries, kind)
	}
	var declared uint64
	parts := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		declared += f.UncompressedSize64
		if declared > uint64(lim.MaxExpandedBytes) {
			return nil, documents.Errorf("the file's zip members expand to more than the document tools' limit of %d bytes; it is a zip bomb or too large to read: work on a smaller file", lim.MaxExpandedBytes)
		}
		name := strings.ToLower(strings.TrimPrefix(strings.ReplaceAll(f.Name, `\`, "/"), "/"))
		if _, dup := parts[name]; !dup {
			parts[name] = f
		}
	}
	return &Package{ctx: ctx, kind: kind, lim: lim, parts: parts, left: lim.MaxExpandedBytes}, nil
}

// Has reports whether the package holds the part name.
func (p *Package) Has(name string) bool {
	_, ok := p.parts[strings.ToLower(name)]
	return ok
}

// Names returns the names of the package's parts, lower-cased, without a
// leading slash, in order.
func (p *Package) Names() []string {
	names := make([]string, 0, len(p.parts))
	for name := range p.parts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Part returns the part name's decompressed bytes as a stream. The caller
// closes it. Errors: a documents.Errorf refusal when the package has no
// such part or it cannot be opened. Reading it fails with a refusal once
// the bytes read from all the package's parts, each time a part is read,
// pass the expanded-size limit, and when the part holds more than its zip
// header declares, fails its checksum or cannot be decompressed.
func (p *Package) Part(name string) (io.ReadCloser, error) {
	f, ok := p.parts[strings.ToLower(name)]
	if !ok {
		return nil, documents.Errorf("the file is not %s: it has no part %s; the file is damaged or of another kind", p.kind, name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, documents.Errorf("the file is damaged: its part %s cannot be opened (%v)", name, err)
	}
	return &counted{rc: rc, p: p, name: name}, nil
}

// counted counts the bytes read from one part against the package's
// expanded-size limit.
type counted struct {
	rc   io.ReadCloser
	p    *Package
	name string
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	c.p.left -= int64(n)
	if c.p.left < 0 {
		return n, documents.Errorf("the file's parts expand to more than the document tools' limit of %d bytes (reached in %s); it is a zip bomb or too large to read: work on a smaller file", c.p.lim.MaxExpandedBytes, c.name)
	}
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, zip.ErrFormat):
		return n, documents.Errorf("the file's part %s holds more bytes than its zip header declares; the file is damaged or built to mislead a reader", c.name)
	case errors.Is(err, zip.ErrChecksum):
		return n, documents.Errorf("the file is damaged: its part %s fails its checksum", c.name)
	}
	return n, documents.Errorf("the file is damaged: its part %s cannot be read (%v)", c.name, err)
}

func (c *counted) Close() error { return c.rc.Close() }
