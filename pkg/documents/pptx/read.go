//go:build pptx || documents

package pptx

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml"
)

// errFull stops a read once the text limit is reached.
var errFull = errors.New("the text limit is reached")

// Read returns the text of the presentation in, slide by slide in the
// order the presentation lists them (its slide list in
// presentation.xml, whatever the parts are named or where they sit in
// the zip): a line "Slide N" (with " (hidden)" for a hidden slide), then
// a line per paragraph of its shapes in their order on the slide, each
// table row as its cells with " | " between them, and the slide's
// speaker notes after "Notes: ". Slide numbers, dates and footers are
// left out, and so are charts, diagrams and pictures. The text stops at
// lim.MaxTextChars characters, saying so.
//
// Errors are documents.Errorf refusals: a file that is not a zip or is
// over one of lim's bounds, a package whose main part is not a
// presentation (a Word document, say), and damaged XML.
func Read(ctx context.Context, in []byte, lim documents.Limits) (string, error) {
	p, err := ooxml.Open(ctx, in, "a PowerPoint presentation (.pptx)", lim)
	if err != nil {
		return "", err
	}
	main, err := p.MainPart("presentationml", "ms-powerpoint")
	if err != nil {
		return "", err
	}
	slides, err := slideList(p, main)
	if err != nil {
		return "", err
	}
	byID, _, err := p.Rels(main)
	if err != nil {
		return "", err
	}
	out := ooxml.NewText(lim.MaxTextChars)
	err = readSlides(p, slides, byID, out)
	if err != nil && err != errFull {
		return "", err
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// readSlides writes each slide's text, and its notes', to out.
func readSlides(p *ooxml.Package, slides []string, byID map[string]ooxml.Rel, out *ooxml.Text) error {
	for i, id := range slides {
		if i > 0 && !out.Line("") {
			return errFull
		}
		r, ok := byID[id]
		if !ok || r.External || !p.Has(r.Target) {
			if !out.Line(fmt.Sprintf("Slide %d (its part is missing from the file)", i+1)) {
				return errFull
			}
			continue
		}
		s, err := readShapes(p, r.Target)
		if err != nil {
			return err
		}
		head := fmt.Sprintf("Slide %d", i+1)
		if s.hidden {
			head += " (hidden)"
		}
		if !out.Line(head) {
			return errFull
		}
		for _, l := range s.lines {
			if !out.Line(l) {
				return errFull
			}
		}
		_, rs, err := p.Rels(r.Target)
		if err != nil {
			return err
		}
		nr, ok := ooxml.RelOfType(rs, "notesSlide")
		if !ok || !p.Has(nr.Target) {
			continue
		}
		notes, err := readShapes(p, nr.Target)
		if err != nil {
			return err
		}
		if len(notes.lines) > 0 && !out.Line("Notes: "+strings.Join(notes.lines, "\n")) {
			return errFull
		}
	}
	return nil
}

// slideList returns the relationship ids of the presentation's slides,
// in the order of its slide list.
func slideList(p *ooxml.Package, main string) ([]string, error) {
	x, err := p.XML(main)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	var ids []string
	in := false
	for {
		t, err := x.Next()
		if err == io.EOF {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "sldIdLst":
				in = true
			case "sldId":
				if in {
					ids = append(ids, ooxml.RelAttr(e, "id"))
				}
			}
		case xml.EndElement:
			if e.Name.Local == "sldIdLst" {
				return ids, nil
			}
		}
	}
}

// shapes is the text of one slide or notes page.
type shapes struct {
	lines  []string
	hidden bool
}

// furniture are the placeholders whose text is the slide's furniture,
// not its content.
var furniture = map[string]bool{"sldNum": true, "dt": true, "ftr": true, "hdr": true, "sldImg": true}

// readShapes reads the text of the slide or notes part name.
func readShapes(p *ooxml.Package, name string) (*shapes, error) {
	x, err := p.XML(name)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	s := &shapes{}
	for {
		e, err := x.NextStart()
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		switch e.Name.Local {
		case "sld":
			s.hidden = ooxml.Attr(e, "show") == "0"
		case "sp":
			lines, err := shape(x)
			if err != nil {
				return nil, err
			}
			s.lines = append(s.lines, lines...)
		case "tbl":
			rows, err := table(x)
			if err != nil {
				return nil, err
			}
			s.lines = append(s.lines, rows...)
		case "Fallback", "extLst":
			if err := x.Skip(); err != nil {
				return nil, err
			}
		}
	}
}

// shape reads the shape just started and returns its paragraphs, none
// for a placeholder of the slide's furniture.
func shape(x *ooxml.XMLPart) ([]string, error) {
	end := x.Depth() - 1
	var lines []string
	skip := false
	for {
		t, err := x.Next()
		if err != nil {
			return nil, ooxml.UnexpectedEOF(x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "ph":
				skip = furniture[ooxml.Attr(e, "type")]
			case "p":
				l, err := paragraph(x)
				if err != nil {
					return nil, err
				}
				if l != "" {
					lines = append(lines, l)
				}
			case "spPr", "style", "extLst", "Fallback":
				if err := x.Skip(); err != nil {
					return nil, err
				}
			}
		case xml.EndElement:
			if x.Depth() == end {
				if skip {
					return nil, nil
				}
				return lines, nil
			}
		}
	}
}

// paragraph reads the DrawingML paragraph just started and returns its
// text.
func paragraph(x *ooxml.XMLPart) (string, error) {
	end := x.Depth() - 1
	var b strings.Builder
	for {
		t, err := x.Next()
		if err != nil {
			return "", ooxml.UnexpectedEOF(x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "t":
				s, err := chars(x)
				if err != nil {
					return "", err
				}
				b.WriteString(s)
			case "br":
				b.WriteByte('\n')
			case "pPr", "rPr", "endParaRPr":
				if err := x.Skip(); err != nil {
					return "", err
				}
			}
		case xml.EndElement:
			if x.Depth() == end {
				return strings.TrimSpace(b.String()), nil
			}
		}
	}
}

// chars returns the character data of the element just started, which
// holds text only (a:t).
func chars(x *ooxml.XMLPart) (string, error) {
	end := x.Depth() - 1
	var b strings.Builder
	for {
		t, err := x.Next()
		if err != nil {
			return "", ooxml.UnexpectedEOF(x, err)
		}
		switch e := t.(type) {
		case xml.CharData:
			b.Write(e)
		case xml.EndElement:
			if x.Depth() == end {
				return b.String(), nil
			}
		}
	}
}

// table reads the DrawingML table just started and returns a line per
// row, its cells' text joined by " | ".
func table(x *ooxml.XMLPart) ([]string, error) {
	end := x.Depth() - 1
	var rows, cells, cell []string
	for {
		t, err := x.Next()
		if err != nil {
			return nil, ooxml.UnexpectedEOF(x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "tr":
				cells = nil
			case "tc":
				cell = nil
			case "p":
				l, err := paragraph(x)
				if err != nil {
					return nil, err
				}
				if l != "" {
					cell = append(cell, strings.ReplaceAll(l, "\n", " "))
				}
			case "tblPr", "tblGrid", "tcPr", "extLst":
				if err := x.Skip(); err != nil {
					return nil, err
				}
			}
		case xml.EndElement:
			switch {
			case x.Depth() == end:
				return rows, nil
			case e.Name.Local == "tc":
				cells = append(cells, strings.Join(cell, " "))
			case e.Name.Local == "tr":
				if row := strings.Join(cells, " | "); strings.Trim(row, " |") != "" {
					rows = append(rows, row)
				}
			}
		}
	}
}
