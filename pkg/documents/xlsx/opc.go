//go:build xlsx || documents

package xlsx

// This file reads an Open Packaging Conventions package (the zip that
// holds an xlsx, docx or pptx) under the document limits. The xlsx, docx
// and pptx packages each hold the same copy, since no one of them may
// depend on another's build tag.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
)

// opc is a package opened under limits: its members counted and their
// declared sizes added up before any is read, and every byte read from
// it counted against the expanded-size limit, whatever the sizes
// declared.
type opc struct {
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

// openOPC opens in as a package of kind. It refuses, with a
// documents.Errorf message naming the limit: a file that is not a zip (an
// encrypted or old binary office file named as such), one
// of more than lim.MaxEntries members, and one whose members declare more
// than lim.MaxExpandedBytes together.
func openOPC(ctx context.Context, in []byte, kind string, lim documents.Limits) (*opc, error) {
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
	return &opc{ctx: ctx, kind: kind, lim: lim, parts: parts, left: lim.MaxExpandedBytes}, nil
}

// has reports whether the package holds the part name.
func (p *opc) has(name string) bool {
	_, ok := p.parts[strings.ToLower(name)]
	return ok
}

// open returns the part name's decompressed bytes as a stream, counted
// against the expanded-size limit. The caller closes it. Errors: a
// documents.Errorf refusal when the part is missing or cannot be opened.
func (p *opc) open(name string) (io.ReadCloser, error) {
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
	p    *opc
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

// xmlPart is an XML part being read token by token, refused when it
// nests deeper than the limit.
type xmlPart struct {
	p     *opc
	name  string
	rc    io.ReadCloser
	d     *xml.Decoder
	depth int
	n     int // tokens read, for checking the context now and then
}

// xml opens the part name for reading as XML. The caller closes it.
func (p *opc) xml(name string) (*xmlPart, error) {
	rc, err := p.open(name)
	if err != nil {
		return nil, err
	}
	d := xml.NewDecoder(rc)
	d.Strict = true
	return &xmlPart{p: p, name: name, rc: rc, d: d}, nil
}

func (x *xmlPart) Close() error { return x.rc.Close() }

// next returns the part's next token, io.EOF at its end. A StartElement
// deeper than MaxXMLDepth is refused; malformed XML is refused as a
// damaged file. CharData is valid until the next call.
func (x *xmlPart) next() (xml.Token, error) {
	x.n++
	if x.n%4096 == 0 && x.p.ctx.Err() != nil {
		return nil, x.p.ctx.Err()
	}
	t, err := x.d.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		var pe *protocol.Error
		if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, documents.Errorf("the file is damaged: its part %s is not well-formed XML (%v)", x.name, err)
	}
	switch t.(type) {
	case xml.StartElement:
		x.depth++
		if x.depth > x.p.lim.MaxXMLDepth {
			return nil, documents.Errorf("the file's part %s nests its XML more than %d elements deep, over the document tools' limit; it is built to exhaust a parser, or damaged", x.name, x.p.lim.MaxXMLDepth)
		}
	case xml.EndElement:
		x.depth--
	}
	return t, nil
}

// skip reads past the end of the element whose start was just read.
func (x *xmlPart) skip() error {
	end := x.depth - 1
	for x.depth > end {
		if _, err := x.next(); err != nil {
			return unexpectedEOF(x, err)
		}
	}
	return nil
}

// unexpectedEOF turns an io.EOF inside an element into a refusal.
func unexpectedEOF(x *xmlPart, err error) error {
	if err == io.EOF {
		return documents.Errorf("the file is damaged: its part %s ends inside an element", x.name)
	}
	return err
}

// attr returns the value of the attribute local (in any namespace) of e.
func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// relAttr returns the value of the relationship-namespace attribute local
// ("id", "embed") of e.
func relAttr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local && strings.HasSuffix(a.Name.Space, "/relationships") {
			return a.Value
		}
	}
	return ""
}

// rel is one relationship of a part.
type rel struct {
	ID, Type, Target string // Target is a part name, resolved and cleaned
	External         bool
}

// rels returns the relationships of the part source ("" for the package
// itself), by id, and in the order they appear. A part with no
// relationships part has none.
func (p *opc) rels(source string) (map[string]rel, []rel, error) {
	name := "_rels/.rels"
	if source != "" {
		name = path.Join(path.Dir(source), "_rels", path.Base(source)+".rels")
	}
	byID := map[string]rel{}
	if !p.has(name) {
		return byID, nil, nil
	}
	x, err := p.xml(name)
	if err != nil {
		return nil, nil, err
	}
	defer x.Close()
	var order []rel
	for {
		t, err := x.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		e, ok := t.(xml.StartElement)
		if !ok || e.Name.Local != "Relationship" {
			continue
		}
		r := rel{ID: attr(e, "Id"), Type: attr(e, "Type"), External: strings.EqualFold(attr(e, "TargetMode"), "External")}
		r.Target = attr(e, "Target")
		if !r.External {
			r.Target = resolve(source, r.Target)
		}
		if _, dup := byID[r.ID]; !dup {
			byID[r.ID] = r
			order = append(order, r)
		}
	}
	return byID, order, nil
}

// resolve returns the part name a relationship of source targets.
func resolve(source, target string) string {
	if strings.HasPrefix(target, "/") {
		return path.Clean(strings.TrimPrefix(target, "/"))
	}
	return strings.TrimPrefix(path.Join(path.Dir(source), target), "/")
}

// relOfType returns the first relationship of rs whose type ends in
// "/"+suffix ("officeDocument"), so that both the transitional and the
// strict namespaces match.
func relOfType(rs []rel, suffix string) (rel, bool) {
	for _, r := range rs {
		if !r.External && strings.HasSuffix(r.Type, "/"+suffix) {
			return r, true
		}
	}
	return rel{}, false
}

// contentTypes is [Content_Types].xml: the media type of each part.
type contentTypes struct {
	defaults  map[string]string // by lower-cased extension
	overrides map[string]string // by lower-cased part name, no leading slash
}

// contentType returns the media type of the part name, "" when none is
// declared.
func (p *opc) contentType(name string) (string, error) {
	if err := p.loadTypes(); err != nil {
		return "", err
	}
	if t, ok := p.types.overrides[strings.ToLower(name)]; ok {
		return t, nil
	}
	return p.types.defaults[strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))], nil
}

// loadTypes reads [Content_Types].xml once.
func (p *opc) loadTypes() error {
	if p.types != nil {
		return nil
	}
	ct, err := p.readContentTypes()
	if err != nil {
		return err
	}
	p.types = ct
	return nil
}

func (p *opc) readContentTypes() (*contentTypes, error) {
	const name = "[Content_Types].xml"
	if !p.has(name) {
		return nil, documents.Errorf("the file is not %s: its zip has no [Content_Types].xml, so it is not an office document package", p.kind)
	}
	x, err := p.xml(name)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	ct := &contentTypes{defaults: map[string]string{}, overrides: map[string]string{}}
	for {
		t, err := x.next()
		if err == io.EOF {
			return ct, nil
		}
		if err != nil {
			return nil, err
		}
		e, ok := t.(xml.StartElement)
		if !ok {
			continue
		}
		switch e.Name.Local {
		case "Default":
			ct.defaults[strings.ToLower(attr(e, "Extension"))] = attr(e, "ContentType")
		case "Override":
			ct.overrides[strings.ToLower(strings.TrimPrefix(attr(e, "PartName"), "/"))] = attr(e, "ContentType")
		}
	}
}

// mainPart returns the package's main part (the target of its
// officeDocument relationship), refusing a package whose main part's
// media type does not contain one of want ("wordprocessingml").
func (p *opc) mainPart(want ...string) (string, error) {
	if err := p.loadTypes(); err != nil {
		return "", err
	}
	_, rs, err := p.rels("")
	if err != nil {
		return "", err
	}
	r, ok := relOfType(rs, "officeDocument")
	if !ok {
		return "", documents.Errorf("the file is not %s: its package names no main document (_rels/.rels has no officeDocument relationship)", p.kind)
	}
	ct, err := p.contentType(r.Target)
	if err != nil {
		return "", err
	}
	for _, w := range want {
		if strings.Contains(ct, w) {
			return r.Target, nil
		}
	}
	return "", documents.Errorf("the file is not %s: its main part %s is of type %q (%s); use the tool for that kind of file", p.kind, r.Target, ct, describeType(ct))
}

// describeType names the kind of office file a main part's media type
// belongs to.
func describeType(ct string) string {
	switch {
	case strings.Contains(ct, "spreadsheetml") || strings.Contains(ct, "ms-excel"):
		return "a spreadsheet"
	case strings.Contains(ct, "wordprocessingml") || strings.Contains(ct, "ms-word"):
		return "a Word document"
	case strings.Contains(ct, "presentationml") || strings.Contains(ct, "ms-powerpoint"):
		return "a presentation"
	case ct == "":
		return "no type declared"
	}
	return "another kind of document"
}

// text collects a document's text, one line at a time, up to a number
// of characters, and says where it was cut.
type text struct {
	b    strings.Builder
	n    int
	max  int
	full bool
}

// line adds s and a newline; it reports false once the limit is reached,
// when the caller may stop.
func (t *text) line(s string) bool {
	if t.full {
		return false
	}
	n := utf8.RuneCountInString(s) + 1
	if t.n+n > t.max {
		t.full = true
		t.b.WriteString(s[:runeOffset(s, max(t.max-t.n, 0))])
		return false
	}
	t.n += n
	t.b.WriteString(s)
	t.b.WriteByte('\n')
	return true
}

// String returns the text, with a last line saying it was cut.
func (t *text) String() string {
	if t.full {
		return t.b.String() + fmt.Sprintf("\n…[cut: the text is longer than the document tools' limit of %d characters]", t.max)
	}
	return t.b.String()
}

// runeOffset returns the byte offset of the n-th rune of s (len(s) past
// the end).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
