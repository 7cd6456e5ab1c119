//go:build docx || documents

package docx

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml/ooxmltest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// TestReadFixtures reads documents made by Word, LibreOffice and
// python-docx: headings from styles (by id, by a localised id's name),
// tables in document order, a table inside a cell, merged cells, deleted
// text left out.
func TestReadFixtures(t *testing.T) {
	tests := []struct {
		file   string
		want   []string // lines, in order
		absent []string
	}{
		{file: "par-known-paragraphs.docx", want: []string{"# Heading Paragraph", "Normal paragraph"}},
		{file: "blk-paras-and-tables.docx", want: []string{
			"Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
			"Text before [Table; Between] Text after",
			"Donec semper facilisis metus finibus malesuada.",
		}},
		{file: "tbl-cell-access.docx", want: []string{"1 | 2 | 3", "4 | 5 | 6", "7 | 8 | 9", "1 | 2 | 3", "4 | 6"}},
		// German Word: the heading styles' ids are "berschrift1"..., their names "heading 1"...
		{file: "Styles.docx", want: []string{"# Heading1", "## Heading2", "### Heading3", "Standard"}},
		{file: "bug65738.docx", want: []string{
			"# Sample Word Document Title",
			"# Heading Level 1",
			"## Heading Level 2",
			"### Heading Level 3",
			"This is a sample Microsoft Word Document.",
			"This is a table | ",
			" | [Nested table | ;  | More of our nested table]",
			"The table has things in it | ",
			"Apache POI: http://poi.apache.org/ POI",
		}},
		{file: "delins.docx", want: []string{"Tika can be:", "- A place in Abkhazia", "March 2009: Apache Tika Release"},
			absent: []string{"A pendant worn in place of the red spot"}},
		{file: "Bug66988.docx", want: []string{"Hello"}}, // LibreOffice
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Read(context.Background(), ooxmltest.Fixture(t, tt.file), documents.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			ooxmltest.InOrder(t, got, tt.want...)
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("the text holds deleted text %q:\n%s", a, got)
				}
			}
		})
	}
}

// TestReadWhole checks a whole document's text, exactly.
func TestReadWhole(t *testing.T) {
	got, err := Read(context.Background(), ooxmltest.Fixture(t, "test.docx"), documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# python-docx was here!\npython-docx was here too!"; got != want {
		t.Fatalf("Read(test.docx) = %q, want %q", got, want)
	}
}

// TestReadCut cuts a long text at the limit, saying so.
func TestReadCut(t *testing.T) {
	lim := documents.DefaultLimits
	lim.MaxTextChars = 60
	got, err := Read(context.Background(), ooxmltest.Fixture(t, "bug65738.docx"), lim)
	if err != nil {
		t.Fatal(err)
	}
	body, note, ok := strings.Cut(got, "\n…[cut:")
	if !ok || !strings.Contains(note, "limit of 60 characters") {
		t.Fatalf("Read = %q, want a note of the cut", got)
	}
	if n := utf8.RuneCountInString(body); n > 60 || !strings.HasPrefix(body, "# Sample Word Document Title\n") {
		t.Fatalf("kept %d characters: %q", n, body)
	}
}

// TestReadRefusals refuses files that are not Word documents, with the
// reason. What any package is refused for (not a zip, an encrypted file,
// no content types, no main part) is package ooxml's to test.
func TestReadRefusals(t *testing.T) {
	minimal, err := Write([]Block{{Text: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	sheetTypes := strings.Replace(contentTypesXML, typeMain, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml", 1)
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"spreadsheet", ooxmltest.WithMember(t, minimal, "[Content_Types].xml", []byte(sheetTypes)), "(a spreadsheet)"},
		{"truncated XML", ooxmltest.WithMember(t, minimal, "word/document.xml", []byte(`<w:document xmlns:w="`+nsW+`"><w:body><w:p><w:r><w:t>cut`)), "not well-formed XML"},
		{"no body", ooxmltest.WithMember(t, minimal, "word/document.xml", []byte(`<w:document xmlns:w="`+nsW+`"/>`)), "has no document body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(context.Background(), tt.in, documents.DefaultLimits)
			ooxmltest.Refusal(t, err, tt.want)
		})
	}
	_, err = documents.Call(context.Background(), "docx.text", nil, nil)
	ooxmltest.Refusal(t, err, "empty")
}

// TestHostile refuses a document whose body nests past the depth limit,
// in this process and in an isolated child. The package's own limits (a
// zip bomb, a member that lies about its size, too many members) are
// package ooxml's to test.
func TestHostile(t *testing.T) {
	base, err := Write([]Block{{Text: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	deep := ooxmltest.WithMember(t, base, "word/document.xml",
		[]byte(`<w:document xmlns:w="`+nsW+`"><w:body>`+ooxmltest.Nested("w:sdt", 10_000)+`</w:body></w:document>`))
	ooxmltest.Isolated(t, func(t *testing.T) {
		_, err := documents.Call(context.Background(), "docx.read", nil, deep)
		ooxmltest.Refusal(t, err, "word/document.xml nests its XML more than 256 elements deep")
	})
}

// TestParseBlocks takes the three shapes of an item and refuses others,
// naming the item.
func TestParseBlocks(t *testing.T) {
	got, err := ParseBlocks([]json.RawMessage{
		json.RawMessage(`"plain"`), json.RawMessage(`{"heading": "H"}`), json.RawMessage(`{"heading": "H3", "level": 3}`),
		json.RawMessage(`{"table": [["a"], ["b", "c"]]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{{Text: "plain"}, {Heading: "H", Level: 1}, {Heading: "H3", Level: 3}, {Table: [][]string{{"a"}, {"b", "c"}}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ParseBlocks = %+v, want %+v", got, want)
	}
	bad := []struct{ item, want string }{
		{`42`, "paragraphs[0] is neither a string nor an object"},
		{`{"heading": "H", "level": 7}`, "heading level 7"},
		{`{"heading": "H", "level": 0}`, "heading level 0"},
		{`{"heading": "H", "table": [["a"]]}`, "both a heading and a table"},
		{`{"table": []}`, "empty table"},
		{`{"table": [[]]}`, "empty table"},
		{`{"table": [["a"]], "level": 2}`, "a level belongs to a heading"},
		{`{"text": "x"}`, `unknown field "text"`},
		{`{}`, "neither a heading nor a table"},
		{`{"heading": 5}`, "paragraphs[0] does not fit"},
	}
	for _, b := range bad {
		_, err := ParseBlocks([]json.RawMessage{json.RawMessage(b.item)})
		ooxmltest.Refusal(t, err, b.want)
	}
	_, err = ParseBlocks(nil)
	ooxmltest.Refusal(t, err, "paragraphs is empty")
}

// TestWriteReadBack writes a document, reads it back with Read, and
// checks its package part by part.
func TestWriteReadBack(t *testing.T) {
	blocks := []Block{
		{Heading: "Quarterly report", Level: 1},
		{Text: "Sales rose <10%> & costs \"fell\"."},
		{Heading: "Regions", Level: 2},
		{Table: [][]string{{"Region", "Q1", "Q2"}, {"North", "12"}, {"Süd", "7", "9"}}},
		{Text: "Line one\nline two\tafter a tab"},
		{Heading: "Notes", Level: 6},
		{Table: [][]string{{"last"}}},
	}
	b, err := Write(blocks)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Write(blocks)
	if err != nil || !bytes.Equal(b, again) {
		t.Fatalf("a second Write made other bytes (err %v)", err)
	}
	got, err := Read(context.Background(), b, documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Quarterly report\n" +
		"Sales rose <10%> & costs \"fell\".\n" +
		"## Regions\n" +
		"Region | Q1 | Q2\n" +
		"North | 12 | \n" +
		"Süd | 7 | 9\n" +
		"Line one\nline two\tafter a tab\n" +
		"###### Notes\n" +
		"last"
	if got != want {
		t.Fatalf("Read(Write(...)) =\n%s\nwant\n%s", got, want)
	}
	checkPackage(t, b)
}

// checkPackage checks the structure of a package Write made: its parts,
// their media types and relationships, well-formed XML throughout, the
// heading styles, and rectangular tables.
func checkPackage(t *testing.T, b []byte) {
	t.Helper()
	var names []string
	for _, m := range ooxmltest.Members(t, b) {
		names = append(names, m.Name)
		wellFormed(t, m.Name, m.Body)
	}
	if want := "[Content_Types].xml _rels/.rels word/document.xml word/_rels/document.xml.rels word/styles.xml"; strings.Join(names, " ") != want {
		t.Fatalf("parts %v, want %s", names, want)
	}
	var types struct {
		Defaults []struct {
			Extension   string `xml:"Extension,attr"`
			ContentType string `xml:"ContentType,attr"`
		} `xml:"Default"`
		Overrides []struct {
			PartName    string `xml:"PartName,attr"`
			ContentType string `xml:"ContentType,attr"`
		} `xml:"Override"`
	}
	unmarshal(t, b, "[Content_Types].xml", &types)
	got := map[string]string{}
	for _, o := range types.Overrides {
		got[o.PartName] = o.ContentType
	}
	if got["/word/document.xml"] != typeMain || got["/word/styles.xml"] != typeSty || len(types.Defaults) != 2 {
		t.Fatalf("content types %+v", types)
	}
	type rels struct {
		Rel []struct {
			Type   string `xml:"Type,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	var root, doc rels
	unmarshal(t, b, "_rels/.rels", &root)
	unmarshal(t, b, "word/_rels/document.xml.rels", &doc)
	if len(root.Rel) != 1 || root.Rel[0].Type != relBase+"officeDocument" || root.Rel[0].Target != "word/document.xml" {
		t.Fatalf("_rels/.rels %+v", root)
	}
	if len(doc.Rel) != 1 || doc.Rel[0].Type != relBase+"styles" || doc.Rel[0].Target != "styles.xml" {
		t.Fatalf("word/_rels/document.xml.rels %+v", doc)
	}
	var styles struct {
		Style []struct {
			Type string `xml:"type,attr"`
			ID   string `xml:"styleId,attr"`
			Name struct {
				Val string `xml:"val,attr"`
			} `xml:"name"`
			Outline *struct {
				Val int `xml:"val,attr"`
			} `xml:"pPr>outlineLvl"`
		} `xml:"style"`
	}
	unmarshal(t, b, "word/styles.xml", &styles)
	ids := map[string]bool{}
	for _, s := range styles.Style {
		ids[s.ID] = true
		var n int
		if _, err := fmt.Sscanf(s.ID, "Heading%d", &n); err == nil {
			if s.Type != "paragraph" || s.Name.Val != fmt.Sprintf("heading %d", n) || s.Outline == nil || s.Outline.Val != n-1 {
				t.Errorf("style %s: %+v", s.ID, s)
			}
		}
	}
	for _, id := range []string{"Normal", "Title", "Heading1", "Heading2", "Heading3", "Heading4", "Heading5", "Heading6", "TableGrid"} {
		if !ids[id] {
			t.Errorf("styles.xml has no style %s", id)
		}
	}
	var document struct {
		XMLName xml.Name
		Tables  []struct {
			Grid []struct{} `xml:"tblGrid>gridCol"`
			Rows []struct {
				Cells []struct{} `xml:"tc"`
			} `xml:"tr"`
		} `xml:"body>tbl"`
		SectPr *struct{} `xml:"body>sectPr"`
	}
	unmarshal(t, b, "word/document.xml", &document)
	if document.XMLName.Space != nsW || document.XMLName.Local != "document" || document.SectPr == nil {
		t.Fatalf("document.xml's root is %v (section properties %v)", document.XMLName, document.SectPr != nil)
	}
	for i, tb := range document.Tables {
		for j, r := range tb.Rows {
			if len(r.Cells) != len(tb.Grid) {
				t.Errorf("table %d row %d has %d cells for %d grid columns", i, j, len(r.Cells), len(tb.Grid))
			}
		}
	}
}

// wellFormed fails unless body is well-formed XML.
func wellFormed(t *testing.T, name string, body []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", name, err)
		}
	}
}

// unmarshal decodes the member name of the zip b into v.
func unmarshal(t *testing.T, b []byte, name string, v any) {
	t.Helper()
	if err := xml.Unmarshal(ooxmltest.MemberOf(t, b, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestTools runs docx_write and docx_read against a workspace.
func TestTools(t *testing.T) {
	env, dir := ooxmltest.NewEnv(t, nil)
	paragraphs := []any{
		map[string]any{"heading": "Plan", "level": 1},
		"First, measure.",
		map[string]any{"table": [][]string{{"step", "owner"}, {"measure", "Ana"}}},
	}
	out, err := ooxmltest.Invoke(t, WriteTool{}, env, map[string]any{"path": "out/plan.docx", "paragraphs": paragraphs})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Changed || !strings.Contains(out.Content, "wrote out/plan.docx") || !strings.Contains(out.Content, "1 paragraphs, 1 headings, 1 tables") {
		t.Fatalf("docx_write: %+v", out)
	}
	out, err = ooxmltest.Invoke(t, WriteTool{}, env, map[string]any{"path": "out/plan.docx", "paragraphs": paragraphs})
	if err != nil || out.Changed || !strings.HasPrefix(out.Content, "identical:") {
		t.Fatalf("docx_write again: %+v, %v", out, err)
	}
	out, err = ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "out/plan.docx"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Plan\nFirst, measure.\nstep | owner\nmeasure | Ana"; out.Content != want || out.Changed {
		t.Fatalf("docx_read = %q, want %q", out.Content, want)
	}

	if err := os.WriteFile(filepath.Join(dir, "bug65738.docx"), ooxmltest.Fixture(t, "bug65738.docx"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.EntryCap = 600
	out, err = ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "bug65738.docx"})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(out.Content); n > 600 || !strings.Contains(out.Content, "…[cut: left out the last") {
		t.Fatalf("docx_read with a 600-character cap gave %d characters: %q", n, out.Content)
	}

	bad := []struct {
		tool tools.Tool
		args string
		want string
	}{
		{ReadTool{}, `{"path": "a.docx", "page": 2}`, `unknown field "page"`},
		{ReadTool{}, `{}`, "needs the file's path"},
		{ReadTool{}, `["a.docx"]`, "give them as"},
		{WriteTool{}, `{"path": "a.docx", "paragraphs": ["x"], "style": "y"}`, `unknown field "style"`},
		{WriteTool{}, `{"path": "a.docx", "paragraphs": [{"heading": "x", "level": 9}]}`, "heading level 9"},
		{WriteTool{}, `{"paragraphs": ["x"]}`, "needs the file's path"},
	}
	for _, b := range bad {
		_, err := b.tool.Invoke(context.Background(), env, json.RawMessage(b.args))
		ooxmltest.Refusal(t, err, b.want)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.docx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused call wrote a.docx (%v)", err)
	}
	_, err = ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "missing.docx"})
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("docx_read of a missing file: %v", err)
	}
}

// TestToolsGate proves every path is put to the policy: a refused file,
// a link to one, and a write.
func TestToolsGate(t *testing.T) {
	env, dir := ooxmltest.NewEnv(t, ooxmltest.RefuseUnder("secret/"))
	if err := os.MkdirAll(filepath.Join(dir, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret/plan.docx"), ooxmltest.Fixture(t, "test.docx"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("secret/plan.docx", filepath.Join(dir, "link.docx")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"secret/plan.docx", "link.docx"} {
		_, err := ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": p})
		if !errors.Is(err, protocol.ErrRefused) || !strings.Contains(err.Error(), "secret/plan.docx") {
			t.Fatalf("docx_read %s: %v, want the policy's refusal of secret/plan.docx", p, err)
		}
	}
	_, err := ooxmltest.Invoke(t, WriteTool{}, env, map[string]any{"path": "secret/new.docx", "paragraphs": []string{"x"}})
	if !errors.Is(err, protocol.ErrRefused) {
		t.Fatalf("docx_write under secret/: %v, want the policy's refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secret/new.docx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused docx_write made the file (%v)", err)
	}
	// The link is judged by its target for a write too.
	_, err = ooxmltest.Invoke(t, WriteTool{}, env, map[string]any{"path": "link.docx", "paragraphs": []string{"x"}})
	if !errors.Is(err, protocol.ErrRefused) {
		t.Fatalf("docx_write through link.docx: %v, want the policy's refusal", err)
	}
	if got := ooxmltest.Fixture(t, "test.docx"); !bytes.Equal(got, mustRead(t, filepath.Join(dir, "secret/plan.docx"))) {
		t.Fatal("a refused write through a link changed its target")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSpecs checks what the tools declare and what the format registers.
func TestSpecs(t *testing.T) {
	for _, tt := range []struct {
		tool     tools.Tool
		name     string
		act      string
		readOnly bool
	}{
		{ReadTool{}, "docx_read", "read", true},
		{WriteTool{}, "docx_write", "write", false},
	} {
		spec := tt.tool.Spec()
		if spec.Name != tt.name {
			t.Errorf("name %q, want %q", spec.Name, tt.name)
		}
		var schema map[string]any
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema["additionalProperties"] != false {
			t.Errorf("%s: parameters %s (%v)", tt.name, spec.Parameters, err)
		}
		g, ok := tt.tool.(tools.Gated)
		if !ok || g.Gate() != (protocol.ToolGate{Act: tt.act, Arg: "path"}) {
			t.Errorf("%s: gate %v", tt.name, ok)
		}
		if _, ro := tt.tool.(tools.ReadOnly); ro != tt.readOnly {
			t.Errorf("%s: read-only %v, want %v", tt.name, ro, tt.readOnly)
		}
	}
	if !strings.Contains(WriteTool{}.Spec().Description, "does not edit an existing document in place") {
		t.Error("docx_write's description does not say it makes a new document")
	}
	var found bool
	for _, f := range documents.Formats() {
		if f.Tag == "docx" {
			found = f.Text == "docx.text" && len(f.Tools) == 2 && f.Extensions[0] == ".docx"
		}
	}
	if !found {
		t.Fatalf("documents.Formats() = %+v, want the docx format", documents.Formats())
	}
	res, err := documents.Call(context.Background(), "docx.text", nil, ooxmltest.Fixture(t, "test.docx"))
	if err != nil || !strings.Contains(res.Text, "python-docx was here too!") {
		t.Fatalf("docx.text: %+v, %v", res, err)
	}
	_, err = documents.Call(context.Background(), "docx.text", json.RawMessage(`{"x": 1}`), ooxmltest.Fixture(t, "test.docx"))
	ooxmltest.Refusal(t, err, `unknown field "x"`)
}
