package ooxml

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"strings"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
)

// XMLPart is an XML part being read token by token, refused when it
// nests deeper than the limit.
type XMLPart struct {
	p     *Package
	name  string
	rc    io.ReadCloser
	d     *xml.Decoder
	depth int
	n     int // tokens read, for checking the context now and then
}

// XML opens the part name for reading as XML, strictly. The caller
// closes it. Errors are Part's.
func (p *Package) XML(name string) (*XMLPart, error) {
	rc, err := p.Part(name)
	if err != nil {
		return nil, err
	}
	d := xml.NewDecoder(rc)
	d.Strict = true
	return &XMLPart{p: p, name: name, rc: rc, d: d}, nil
}

// Name returns the part's name, as given to XML.
func (x *XMLPart) Name() string { return x.name }

// Depth returns how many elements the last token read is inside: 1 after
// the root's StartElement, 0 after its EndElement.
func (x *XMLPart) Depth() int { return x.depth }

// Close closes the part.
func (x *XMLPart) Close() error { return x.rc.Close() }

// Next returns the part's next token, and io.EOF at its end. A CharData
// is valid until the next call. Errors: a documents.Errorf refusal when
// a StartElement nests deeper than the package's MaxXMLDepth or the XML
// is not well-formed; the refusals of reading the part (Part); and the
// context's error once it is done.
func (x *XMLPart) Next() (xml.Token, error) {
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

// NextStart reads up to the part's next StartElement and returns it,
// passing over the tokens before it, and io.EOF at the part's end. Errors
// are Next's.
func (x *XMLPart) NextStart() (xml.StartElement, error) {
	for {
		t, err := x.Next()
		if err != nil {
			return xml.StartElement{}, err
		}
		if e, ok := t.(xml.StartElement); ok {
			return e, nil
		}
	}
}

// Skip reads past the end of the element whose StartElement was just
// read. Errors are Next's, and a refusal when the part ends inside the
// element (UnexpectedEOF).
func (x *XMLPart) Skip() error {
	end := x.depth - 1
	for x.depth > end {
		if _, err := x.Next(); err != nil {
			return UnexpectedEOF(x, err)
		}
	}
	return nil
}

// UnexpectedEOF returns err, an error of x.Next inside an element, with
// io.EOF turned into a documents.Errorf refusal of x as damaged.
func UnexpectedEOF(x *XMLPart, err error) error {
	if err == io.EOF {
		return documents.Errorf("the file is damaged: its part %s ends inside an element", x.name)
	}
	return err
}

// Attr returns the value of e's attribute local in any namespace, "" when
// it has none.
func Attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// RelAttr returns the value of e's attribute local ("id", "embed") in the
// relationships namespace, transitional or strict, "" when it has none.
func RelAttr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local && strings.HasSuffix(a.Name.Space, "/relationships") {
			return a.Value
		}
	}
	return ""
}
