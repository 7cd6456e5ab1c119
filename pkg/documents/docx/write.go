//go:build docx || documents

package docx

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/documents"
)

// Block is one item of a document Write makes: a table when Table is not
// nil (rows of cells), else a heading when Level is above 0 (Heading, at
// levels 1 to 6; Write takes a deeper one as 6), else a plain paragraph
// (Text). In
// JSON it is a string, {"heading": "text", "level": 1-6} (level 1 when
// left out) or {"table": [["a", "b"], ["c", "d"]]}. A "\n" in a text is a
// line break, a "\t" a tab.
type Block struct {
	Text    string
	Heading string
	Level   int
	Table   [][]string
}

// blockUsage shows an item of paragraphs, for messages.
const blockUsage = `a string (a paragraph), {"heading": "text", "level": 1} (levels 1 to 6) or {"table": [["a", "b"], ["c", "d"]]}`

// ParseBlocks decodes the items of a docx_write call's paragraphs. Errors
// are documents.Errorf refusals naming the item and its right shape: an
// item that is neither a string nor one of the two objects, an object
// with an unknown field or both a heading and a table, a level outside 1
// to 6, an empty table; and no items at all.
func ParseBlocks(items []json.RawMessage) ([]Block, error) {
	if len(items) == 0 {
		return nil, documents.Errorf("paragraphs is empty; give the document's paragraphs in order, each %s", blockUsage)
	}
	blocks := make([]Block, 0, len(items))
	for i, raw := range items {
		raw = bytes.TrimSpace(raw)
		var b Block
		switch {
		case len(raw) > 0 && raw[0] == '"':
			if err := json.Unmarshal(raw, &b.Text); err != nil {
				return nil, documents.Errorf("paragraphs[%d] is not a valid string (%v); each item is %s", i, err, blockUsage)
			}
		case len(raw) > 0 && raw[0] == '{':
			var o struct {
				Heading *string    `json:"heading"`
				Level   *int       `json:"level"`
				Table   [][]string `json:"table"`
			}
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if err := d.Decode(&o); err != nil {
				return nil, documents.Errorf("paragraphs[%d] does not fit (%v); each item is %s", i, err, blockUsage)
			}
			switch {
			case o.Heading != nil && o.Table != nil:
				return nil, documents.Errorf("paragraphs[%d] has both a heading and a table; make them two items", i)
			case o.Heading != nil:
				b.Heading, b.Level = *o.Heading, 1
				if o.Level != nil {
					b.Level = *o.Level
				}
				if b.Level < 1 || b.Level > 6 {
					return nil, documents.Errorf("paragraphs[%d] has heading level %d; levels go from 1 (a title) to 6", i, b.Level)
				}
			case o.Table != nil:
				if o.Level != nil {
					return nil, documents.Errorf("paragraphs[%d] is a table with a level; a level belongs to a heading", i)
				}
				if len(o.Table) == 0 || cols(o.Table) == 0 {
					return nil, documents.Errorf("paragraphs[%d] is an empty table; give its rows, each a list of cells, as [[\"a\", \"b\"], [\"c\", \"d\"]]", i)
				}
				b.Table = o.Table
			default:
				return nil, documents.Errorf("paragraphs[%d] is an object with neither a heading nor a table; each item is %s", i, blockUsage)
			}
		default:
			return nil, documents.Errorf("paragraphs[%d] is neither a string nor an object; each item is %s", i, blockUsage)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// cols is the number of columns of a table: its longest row's.
func cols(rows [][]string) int {
	n := 0
	for _, r := range rows {
		n = max(n, len(r))
	}
	return n
}

// Names of the parts Write makes, and their media types.
const (
	nsW      = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsR      = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	relBase  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
	typeMain = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
	typeSty  = "application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"
	typeRels = "application/vnd.openxmlformats-package.relationships+xml"
)

// Write makes a new WordprocessingML package of blocks: [Content_Types].xml,
// _rels/.rels, word/document.xml, word/_rels/document.xml.rels and
// word/styles.xml, whose styles hold Normal, Title, Heading1 to Heading6
// (with their outline levels, so that Word's navigation and a table of
// contents see them) and a bordered table style. Its bytes are the same
// for the same blocks. It fails only if the zip cannot be written.
func Write(blocks []Block) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	parts := []struct{ name, body string }{
		{"[Content_Types].xml", contentTypesXML},
		{"_rels/.rels", rootRelsXML},
		{"word/document.xml", documentXML(blocks)},
		{"word/_rels/document.xml.rels", documentRelsXML},
		{"word/styles.xml", stylesXML()},
	}
	for _, p := range parts {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate, Modified: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", p.name, err)
		}
		if _, err := w.Write([]byte(p.body)); err != nil {
			return nil, fmt.Errorf("write %s: %w", p.name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("close the zip: %w", err)
	}
	return buf.Bytes(), nil
}

const xmlHeader = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"

const contentTypesXML = xmlHeader +
	`<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
	`<Default Extension="rels" ContentType="` + typeRels + `"/>` +
	`<Default Extension="xml" ContentType="application/xml"/>` +
	`<Override PartName="/word/document.xml" ContentType="` + typeMain + `"/>` +
	`<Override PartName="/word/styles.xml" ContentType="` + typeSty + `"/>` +
	`</Types>`

const rootRelsXML = xmlHeader +
	`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="` + relBase + `officeDocument" Target="word/document.xml"/>` +
	`</Relationships>`

const documentRelsXML = xmlHeader +
	`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="` + relBase + `styles" Target="styles.xml"/>` +
	`</Relationships>`

// textWidth is the width between the margins of a Letter page with inch
// margins, in twentieths of a point: what a table's columns share.
const textWidth = 9360

// documentXML is word/document.xml holding blocks.
func documentXML(blocks []Block) string {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<w:document xmlns:w="` + nsW + `" xmlns:r="` + nsR + `"><w:body>`)
	for _, bl := range blocks {
		switch {
		case bl.Table != nil:
			table(&b, bl.Table)
		case bl.Level > 0:
			fmt.Fprintf(&b, `<w:p><w:pPr><w:pStyle w:val="Heading%d"/></w:pPr>`, min(bl.Level, 6))
			runs(&b, bl.Heading)
			b.WriteString(`</w:p>`)
		default:
			b.WriteString(`<w:p>`)
			runs(&b, bl.Text)
			b.WriteString(`</w:p>`)
		}
	}
	if len(blocks) > 0 && blocks[len(blocks)-1].Table != nil {
		b.WriteString(`<w:p/>`) // Word wants a paragraph between a table and the section's end
	}
	b.WriteString(`<w:sectPr><w:pgSz w:w="12240" w:h="15840"/>` +
		`<w:pgMar w:top="1440" w:right="1440" w:bottom="1440" w:left="1440" w:header="720" w:footer="720" w:gutter="0"/>` +
		`</w:sectPr></w:body></w:document>`)
	return b.String()
}

// table writes a table of rows, every row padded to the longest's cells.
func table(b *strings.Builder, rows [][]string) {
	n := cols(rows)
	w := textWidth / n
	b.WriteString(`<w:tbl><w:tblPr><w:tblStyle w:val="TableGrid"/><w:tblW w:w="0" w:type="auto"/>` +
		`<w:tblLook w:val="04A0" w:firstRow="1" w:lastRow="0" w:firstColumn="1" w:lastColumn="0" w:noHBand="0" w:noVBand="1"/></w:tblPr><w:tblGrid>`)
	for range n {
		fmt.Fprintf(b, `<w:gridCol w:w="%d"/>`, w)
	}
	b.WriteString(`</w:tblGrid>`)
	for _, row := range rows {
		b.WriteString(`<w:tr>`)
		for i := range n {
			fmt.Fprintf(b, `<w:tc><w:tcPr><w:tcW w:w="%d" w:type="dxa"/></w:tcPr><w:p>`, w)
			if i < len(row) {
				runs(b, row[i])
			}
			b.WriteString(`</w:p></w:tc>`)
		}
		b.WriteString(`</w:tr>`)
	}
	b.WriteString(`</w:tbl>`)
}

// runs writes s as a run: its text, a w:br for each "\n" and a w:tab for
// each "\t".
func runs(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	b.WriteString(`<w:r>`)
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteString(`<w:br/>`)
		}
		for j, seg := range strings.Split(line, "\t") {
			if j > 0 {
				b.WriteString(`<w:tab/>`)
			}
			if seg != "" {
				b.WriteString(`<w:t xml:space="preserve">`)
				_ = xml.EscapeText(b, []byte(seg)) // a strings.Builder does not fail
				b.WriteString(`</w:t>`)
			}
		}
	}
	b.WriteString(`</w:r>`)
}

// stylesXML is word/styles.xml: the defaults, Normal, Title, Heading1 to
// Heading6 and TableGrid.
func stylesXML() string {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<w:styles xmlns:w="` + nsW + `">` +
		`<w:docDefaults><w:rPrDefault><w:rPr><w:rFonts w:ascii="Calibri" w:hAnsi="Calibri" w:eastAsia="Calibri" w:cs="Calibri"/>` +
		`<w:sz w:val="22"/><w:szCs w:val="22"/><w:lang w:val="en-US"/></w:rPr></w:rPrDefault>` +
		`<w:pPrDefault><w:pPr><w:spacing w:after="160" w:line="259" w:lineRule="auto"/></w:pPr></w:pPrDefault></w:docDefaults>` +
		`<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/><w:qFormat/></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/><w:basedOn w:val="Normal"/><w:next w:val="Normal"/>` +
		`<w:uiPriority w:val="10"/><w:qFormat/><w:pPr><w:spacing w:after="0" w:line="240" w:lineRule="auto"/><w:contextualSpacing/></w:pPr>` +
		`<w:rPr><w:sz w:val="56"/><w:szCs w:val="56"/></w:rPr></w:style>`)
	sizes := []int{32, 26, 24, 22, 22, 22}
	for i, sz := range sizes {
		n := i + 1
		fmt.Fprintf(&b, `<w:style w:type="paragraph" w:styleId="Heading%d"><w:name w:val="heading %d"/><w:basedOn w:val="Normal"/>`+
			`<w:next w:val="Normal"/><w:uiPriority w:val="9"/><w:qFormat/>`+
			`<w:pPr><w:keepNext/><w:keepLines/><w:spacing w:before="%d" w:after="0"/><w:outlineLvl w:val="%d"/></w:pPr>`+
			`<w:rPr><w:b/><w:bCs/>%s<w:sz w:val="%d"/><w:szCs w:val="%d"/></w:rPr></w:style>`,
			n, n, max(240, 480-80*i), i, italic(n), sz, sz)
	}
	b.WriteString(`<w:style w:type="table" w:default="1" w:styleId="TableNormal"><w:name w:val="Normal Table"/><w:uiPriority w:val="99"/>` +
		`<w:semiHidden/><w:tblPr><w:tblInd w:w="0" w:type="dxa"/><w:tblCellMar><w:top w:w="0" w:type="dxa"/>` +
		`<w:left w:w="108" w:type="dxa"/><w:bottom w:w="0" w:type="dxa"/><w:right w:w="108" w:type="dxa"/></w:tblCellMar></w:tblPr></w:style>` +
		`<w:style w:type="table" w:styleId="TableGrid"><w:name w:val="Table Grid"/><w:basedOn w:val="TableNormal"/><w:uiPriority w:val="39"/>` +
		`<w:pPr><w:spacing w:after="0" w:line="240" w:lineRule="auto"/></w:pPr><w:tblPr><w:tblBorders>`)
	for _, side := range []string{"top", "left", "bottom", "right", "insideH", "insideV"} {
		fmt.Fprintf(&b, `<w:%s w:val="single" w:sz="4" w:space="0" w:color="auto"/>`, side)
	}
	b.WriteString(`</w:tblBorders></w:tblPr></w:style></w:styles>`)
	return b.String()
}

// italic is the italic mark of the deeper headings, which share a size.
func italic(level int) string {
	if level >= 5 {
		return `<w:i/><w:iCs/>`
	}
	return ""
}
