//go:build docx || documents

package docx

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml"
)

// errFull stops a read once the text limit is reached.
var errFull = errors.New("the text limit is reached")

// Read returns the text of the document in, in document order: one line
// per paragraph, a heading marked with one "#" per level ("# Title",
// "## Section") from its style or outline level, a list item with "- ",
// and each table row as its cells with " | " between them (a table inside
// a cell in brackets, its rows separated by "; "). Text boxes follow the
// paragraph that anchors them. Headers, footers, footnotes, comments and
// deleted text are left out. The text stops at lim.MaxTextChars
// characters, saying so.
//
// Errors are documents.Errorf refusals: a file that is not a zip or is
// over one of lim's bounds, a package whose main part is not a
// WordprocessingML document (a spreadsheet, say), and damaged XML.
func Read(ctx context.Context, in []byte, lim documents.Limits) (string, error) {
	p, err := ooxml.Open(ctx, in, "a Word document (.docx)", lim)
	if err != nil {
		return "", err
	}
	main, err := p.MainPart("wordprocessingml", "ms-word")
	if err != nil {
		return "", err
	}
	_, rs, err := p.Rels(main)
	if err != nil {
		return "", err
	}
	st := styles{}
	if r, ok := ooxml.RelOfType(rs, "styles"); ok && p.Has(r.Target) {
		if st, err = readStyles(p, r.Target); err != nil {
			return "", err
		}
	}
	x, err := p.XML(main)
	if err != nil {
		return "", err
	}
	defer x.Close()
	out := ooxml.NewText(lim.MaxTextChars)
	r := &reader{x: x, styles: st}
	if err := r.document(out.Line); err != nil && err != errFull {
		return "", err
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// reader walks a document part.
type reader struct {
	x      *ooxml.XMLPart
	styles styles
	cells  int // how many table cells the walk is inside
}

// document reads the part up to its body and the body's blocks.
func (r *reader) document(emit func(string) bool) error {
	for {
		e, err := r.x.NextStart()
		if err == io.EOF {
			return documents.Errorf("the file is damaged: its main part %s has no document body (w:body)", r.x.Name())
		}
		if err != nil {
			return err
		}
		if e.Name.Local == "body" {
			return r.blocks(emit)
		}
	}
}

// blocks reads the block content of the element just started (a body, a
// table cell, a text box) up to its end, emitting a line for each
// paragraph and each table row; it stops with errFull when emit says
// the text is full.
func (r *reader) blocks(emit func(string) bool) error {
	end := r.x.Depth() - 1
	for {
		t, err := r.x.Next()
		if err != nil {
			return ooxml.UnexpectedEOF(r.x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "p":
				if err := r.paragraph(emit); err != nil {
					return err
				}
			case "tbl":
				if err := r.table(emit); err != nil {
					return err
				}
			case "sectPr", "Fallback", "del", "moveFrom":
				if err := r.x.Skip(); err != nil {
					return err
				}
			}
			// Anything else (a content control, custom XML, an
			// insertion) wraps blocks: the walk goes on inside it.
		case xml.EndElement:
			if r.x.Depth() == end {
				return nil
			}
		}
	}
}

// paragraph reads the paragraph just started and emits its line, then
// the lines of any text box anchored in it.
func (r *reader) paragraph(emit func(string) bool) error {
	end := r.x.Depth() - 1
	var (
		b       strings.Builder
		style   string
		outline = -1
		list    bool
		boxes   []string
	)
	for {
		t, err := r.x.Next()
		if err != nil {
			return ooxml.UnexpectedEOF(r.x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "pPr":
				if style, outline, list, err = r.paragraphProps(); err != nil {
					return err
				}
			case "t":
				s, err := r.chars()
				if err != nil {
					return err
				}
				b.WriteString(s)
			case "tab", "ptab":
				b.WriteByte('\t')
			case "br", "cr":
				b.WriteByte('\n')
			case "noBreakHyphen":
				b.WriteByte('-')
			case "txbxContent":
				if err := r.blocks(func(s string) bool { boxes = append(boxes, s); return true }); err != nil {
					return err
				}
			case "rPr", "delText", "instrText", "delInstrText", "Fallback", "del", "moveFrom":
				if err := r.x.Skip(); err != nil {
					return err
				}
			}
		case xml.EndElement:
			if r.x.Depth() != end {
				continue
			}
			line := strings.TrimRight(b.String(), " \t\n")
			if r.cells > 0 {
				line = strings.ReplaceAll(line, "\n", " ")
			}
			if line != "" {
				switch level := r.styles.level(style, outline); {
				case level > 0:
					line = strings.Repeat("#", level) + " " + line
				case list:
					line = "- " + line
				}
				if !emit(line) {
					return errFull
				}
			}
			for _, s := range boxes {
				if !emit(s) {
					return errFull
				}
			}
			return nil
		}
	}
}

// paragraphProps reads the paragraph properties just started: the style,
// the outline level (-1 for none) and whether it is a list item.
func (r *reader) paragraphProps() (style string, outline int, list bool, err error) {
	end := r.x.Depth() - 1
	outline = -1
	for {
		t, err := r.x.Next()
		if err != nil {
			return "", 0, false, ooxml.UnexpectedEOF(r.x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "pStyle":
				style = ooxml.Attr(e, "val")
			case "outlineLvl":
				outline = outlineLevel(ooxml.Attr(e, "val"))
			case "numPr":
				list = true
			case "rPr", "sectPr", "pPrChange":
				if err := r.x.Skip(); err != nil {
					return "", 0, false, err
				}
			}
		case xml.EndElement:
			if r.x.Depth() == end {
				return style, outline, list, nil
			}
		}
	}
}

// chars returns the character data of the element just started, which
// holds text only (w:t).
func (r *reader) chars() (string, error) {
	end := r.x.Depth() - 1
	var b strings.Builder
	for {
		t, err := r.x.Next()
		if err != nil {
			return "", ooxml.UnexpectedEOF(r.x, err)
		}
		switch e := t.(type) {
		case xml.CharData:
			b.Write(e)
		case xml.EndElement:
			if r.x.Depth() == end {
				return b.String(), nil
			}
		}
	}
}

// table reads the table just started. At the top it emits a line per
// row; inside a cell it emits the whole table as one bracketed line.
func (r *reader) table(emit func(string) bool) error {
	end := r.x.Depth() - 1
	nested := r.cells > 0
	var rows []string
	for {
		t, err := r.x.Next()
		if err != nil {
			return ooxml.UnexpectedEOF(r.x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "tr":
				row, err := r.row()
				if err != nil {
					return err
				}
				if strings.Trim(row, " |") == "" {
					continue
				}
				if nested {
					rows = append(rows, row)
				} else if !emit(row) {
					return errFull
				}
			case "tblPr", "tblGrid", "tblPrEx", "Fallback", "del":
				if err := r.x.Skip(); err != nil {
					return err
				}
			}
		case xml.EndElement:
			if r.x.Depth() != end {
				continue
			}
			if nested && len(rows) > 0 && !emit("["+strings.Join(rows, "; ")+"]") {
				return errFull
			}
			return nil
		}
	}
}

// row reads the table row just started and returns its cells joined by
// " | ".
func (r *reader) row() (string, error) {
	end := r.x.Depth() - 1
	var cells []string
	for {
		t, err := r.x.Next()
		if err != nil {
			return "", ooxml.UnexpectedEOF(r.x, err)
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "tc":
				var lines []string
				r.cells++
				err := r.blocks(func(s string) bool { lines = append(lines, s); return true })
				r.cells--
				if err != nil {
					return "", err
				}
				cells = append(cells, strings.Join(lines, " "))
			case "trPr", "tblPrEx", "Fallback", "del":
				if err := r.x.Skip(); err != nil {
					return "", err
				}
			}
		case xml.EndElement:
			if r.x.Depth() == end {
				return strings.Join(cells, " | "), nil
			}
		}
	}
}

// styleDef is one paragraph style of styles.xml.
type styleDef struct {
	name, basedOn string
	outline       int // -1 for none
}

// styles are a document's paragraph styles by id.
type styles map[string]styleDef

// headingName matches a heading style's name or id ("heading 1",
// "Heading1").
var headingName = regexp.MustCompile(`^(?i)heading ?([1-9])$`)

// level returns the heading level of a paragraph of the style id with
// the outline level outline (-1 for none), or 0 when it is no heading:
// the paragraph's own outline level first, then its style's (through the
// styles it is based on), then a style named "heading N" or "Title".
func (s styles) level(id string, outline int) int {
	if outline >= 0 {
		return outline + 1
	}
	for range 16 { // a chain of basedOn longer than this is a loop
		if id == "" {
			return 0
		}
		st, ok := s[id]
		if !ok {
			return nameLevel(id)
		}
		if st.outline >= 0 {
			return st.outline + 1
		}
		if n := nameLevel(st.name); n > 0 {
			return n
		}
		id = st.basedOn
	}
	return 0
}

// nameLevel is the heading level a style's name says, or 0.
func nameLevel(name string) int {
	if strings.EqualFold(name, "title") {
		return 1
	}
	if m := headingName.FindStringSubmatch(name); m != nil {
		return int(m[1][0] - '0')
	}
	return 0
}

// outlineLevel parses a w:outlineLvl value: 0 to 8 are heading levels
// 1 to 9, anything else (9 is body text) is none.
func outlineLevel(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 8 {
		return -1
	}
	return n
}

// readStyles reads the paragraph styles of the styles part name.
func readStyles(p *ooxml.Package, name string) (styles, error) {
	x, err := p.XML(name)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	st := styles{}
	var id string
	var cur styleDef
	in := false
	for {
		t, err := x.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return nil, err
		}
		switch e := t.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "style":
				in = ooxml.Attr(e, "type") == "paragraph" || ooxml.Attr(e, "type") == ""
				id, cur = ooxml.Attr(e, "styleId"), styleDef{outline: -1}
			case "name":
				if in && x.Depth() == 3 {
					cur.name = ooxml.Attr(e, "val")
				}
			case "basedOn":
				if in && x.Depth() == 3 {
					cur.basedOn = ooxml.Attr(e, "val")
				}
			case "outlineLvl":
				if in {
					cur.outline = outlineLevel(ooxml.Attr(e, "val"))
				}
			case "rPr", "tblPr", "tcPr", "trPr", "tblStylePr":
				if err := x.Skip(); err != nil {
					return nil, err
				}
			}
		case xml.EndElement:
			if e.Name.Local == "style" && in {
				if _, dup := st[id]; !dup && id != "" {
					st[id] = cur
				}
				in = false
			}
		}
	}
}
