package ooxml_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml"
	"github.com/ioharness/harness/pkg/documents/ooxml/ooxmltest"
)

const kind = "a Word document (.docx)"

const (
	typesXML = `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
		`<Default Extension="XML" ContentType="application/xml"/>` +
		`<Default Extension="png" ContentType="image/png"/>` +
		`<Override PartName="/Word/Document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>` +
		`</Types>`
	rootRels = `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>` +
		`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="/word/document.xml"/>` +
		`</Relationships>`
	documentXML = `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body/></w:document>`
)

// word returns a minimal Word package: its content types, its
// relationships and its main part, then extra.
func word(t *testing.T, extra ...ooxmltest.Member) []byte {
	t.Helper()
	ms := []ooxmltest.Member{
		{Name: "[Content_Types].xml", Body: []byte(typesXML)},
		{Name: "_rels/.rels", Body: []byte(rootRels)},
		{Name: "word/document.xml", Body: []byte(documentXML)},
	}
	return ooxmltest.Zip(t, append(ms, extra...)...)
}

// open is ooxml.Open of in under lim, failing the test on an error.
func open(t *testing.T, in []byte, lim documents.Limits) *ooxml.Package {
	t.Helper()
	p, err := ooxml.Open(context.Background(), in, kind, lim)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return p
}

// readPart reads the part name of p through.
func readPart(p *ooxml.Package, name string) error {
	rc, err := p.Part(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// deflated returns n zero bytes deflated, and their CRC.
func deflated(t *testing.T, n int) ([]byte, uint32) {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, n)
	if _, err := w.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), crc32.ChecksumIEEE(zeros)
}

// TestOpenRefusals refuses, before reading any part, files that are not
// packages or are over the limits on members and declared sizes.
func TestOpenRefusals(t *testing.T) {
	lim := documents.DefaultLimits
	lim.MaxEntries = 10
	lim.MaxExpandedBytes = 1000
	var many []ooxmltest.Member
	for i := range 11 {
		many = append(many, ooxmltest.Member{Name: fmt.Sprintf("word/media/%d.bin", i)})
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"text", []byte("just some notes"), "not a Word document (.docx): it is not a zip package"},
		{"empty", nil, "not a zip package"},
		{"encrypted", append([]byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}, make([]byte, 512)...), "password-protected (encrypted) office document or one in the old binary format"},
		{"entries", ooxmltest.Zip(t, many...), "11 zip members, over the document tools' limit of 10"},
		{"declared", ooxmltest.Zip(t, ooxmltest.Member{Name: "a.bin", Body: make([]byte, 600)}, ooxmltest.Member{Name: "b.bin", Body: make([]byte, 401)}),
			"zip members expand to more than the document tools' limit of 1000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ooxml.Open(context.Background(), tt.in, kind, lim)
			ooxmltest.Refusal(t, err, tt.want)
		})
	}
	// At the limits exactly, ten members declaring 1000 bytes, it opens.
	exact := append(slices.Clone(many[:9]), ooxmltest.Member{Name: "word/media/x.bin", Body: make([]byte, 1000)})
	open(t, ooxmltest.Zip(t, exact...), lim)
}

// TestOpenBomb refuses a zip bomb under the default limits from the size
// it declares, without decompressing it.
func TestOpenBomb(t *testing.T) {
	_, err := ooxml.Open(context.Background(), ooxmltest.WithBomb(t, word(t), "word/document.xml", ooxmltest.BombSize), kind, documents.DefaultLimits)
	ooxmltest.Refusal(t, err, "expand to more than the document tools' limit of 268435456 bytes")
}

// TestPartCounted counts every byte read from the parts, whatever their
// headers declare, and refuses a part that holds more than it declares.
func TestPartCounted(t *testing.T) {
	lim := documents.DefaultLimits
	lim.MaxExpandedBytes = 1000

	body, crc := deflated(t, 5000)
	liar := ooxmltest.Zip(t, ooxmltest.Member{Name: "word/media/a.bin", Body: body, Raw: true, Size: 900, CRC: crc})
	p := open(t, liar, lim)
	ooxmltest.Refusal(t, readPart(p, "word/media/a.bin"), "part word/media/a.bin holds more bytes than its zip header declares")

	// Each read of a part counts: the second read of 600 bytes passes 1000.
	p = open(t, ooxmltest.Zip(t, ooxmltest.Member{Name: "a.bin", Body: make([]byte, 600)}), lim)
	if err := readPart(p, "a.bin"); err != nil {
		t.Fatalf("the first read of a.bin: %v", err)
	}
	ooxmltest.Refusal(t, readPart(p, "a.bin"), "parts expand to more than the document tools' limit of 1000 bytes (reached in a.bin)")

	body, crc = deflated(t, 100)
	bad := ooxmltest.Zip(t, ooxmltest.Member{Name: "a.bin", Body: body, Raw: true, Size: 100, CRC: crc + 1})
	ooxmltest.Refusal(t, readPart(open(t, bad, lim), "a.bin"), "part a.bin fails its checksum")

	ooxmltest.Refusal(t, readPart(open(t, word(t), lim), "word/styles.xml"), "not a Word document (.docx): it has no part word/styles.xml")
}

// TestNames matches part names without regard to case or a leading
// slash, reads a backslash as a slash, and takes the first of two
// members of one name.
func TestNames(t *testing.T) {
	p := open(t, word(t,
		ooxmltest.Member{Name: `word\media\Image1.PNG`, Body: []byte("first")},
		ooxmltest.Member{Name: "/word/media/image1.png", Body: []byte("second")},
	), documents.DefaultLimits)
	want := []string{"[content_types].xml", "_rels/.rels", "word/document.xml", "word/media/image1.png"}
	if got := p.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	for _, name := range []string{"WORD/Document.xml", "[Content_Types].xml", "word/media/image1.png"} {
		if !p.Has(name) {
			t.Errorf("Has(%q) = false, want true", name)
		}
	}
	if p.Has("word/styles.xml") {
		t.Error(`Has("word/styles.xml") = true, want false`)
	}
	rc, err := p.Part("Word/Media/IMAGE1.png")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "first" {
		t.Fatalf("Part(Word/Media/IMAGE1.png) = %q, %v; want %q", b, err, "first")
	}
}

// TestXML reads a part token by token, tracking the depth, skipping an
// element, and refuses XML nested past the limit or not well-formed.
func TestXML(t *testing.T) {
	lim := documents.DefaultLimits
	lim.MaxXMLDepth = 8
	in := word(t,
		ooxmltest.Member{Name: "ok.xml", Body: []byte(`<r><skip><a><b/></a>text</skip><keep x:id="7" xmlns:x="u">v</keep></r>`)},
		ooxmltest.Member{Name: "deep8.xml", Body: []byte(ooxmltest.Nested("a", 8))},
		ooxmltest.Member{Name: "deep9.xml", Body: []byte(ooxmltest.Nested("a", 9))},
		ooxmltest.Member{Name: "bad.xml", Body: []byte(`<r><a></r>`)},
	)
	p := open(t, in, lim)
	x, err := p.XML("ok.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var seen []string
	for {
		tok, err := x.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			seen = append(seen, fmt.Sprintf("<%s %d %q>", e.Name.Local, x.Depth(), ooxml.Attr(e, "id")))
			if e.Name.Local == "skip" {
				if err := x.Skip(); err != nil {
					t.Fatal(err)
				}
				seen = append(seen, fmt.Sprintf("skipped to %d", x.Depth()))
			}
		case xml.CharData:
			seen = append(seen, string(e))
		case xml.EndElement:
			seen = append(seen, fmt.Sprintf("</%s %d>", e.Name.Local, x.Depth()))
		}
	}
	want := []string{`<r 1 "">`, `<skip 2 "">`, "skipped to 1", `<keep 2 "7">`, "v", "</keep 1>", "</r 0>"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Fatalf("tokens of ok.xml (-want +got):\n%s", diff)
	}
	if x.Name() != "ok.xml" {
		t.Errorf("Name() = %q, want ok.xml", x.Name())
	}

	starts, err := p.XML("ok.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer starts.Close()
	seen = nil
	for {
		e, err := starts.NextStart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, fmt.Sprintf("<%s %d>", e.Name.Local, starts.Depth()))
	}
	if want := []string{"<r 1>", "<skip 2>", "<a 3>", "<b 4>", "<keep 2>"}; !slices.Equal(seen, want) {
		t.Fatalf("NextStart over ok.xml gave %q, want %q", seen, want)
	}

	readAll := func(name string) error {
		x, err := p.XML(name)
		if err != nil {
			return err
		}
		defer x.Close()
		for {
			if _, err := x.Next(); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	if err := readAll("deep8.xml"); err != nil {
		t.Fatalf("XML nested 8 deep, at the limit: %v", err)
	}
	ooxmltest.Refusal(t, readAll("deep9.xml"), "part deep9.xml nests its XML more than 8 elements deep")
	ooxmltest.Refusal(t, readAll("bad.xml"), "part bad.xml is not well-formed XML")
	ooxmltest.Refusal(t, ooxml.UnexpectedEOF(x, io.EOF), "part ok.xml ends inside an element")
	if other := errors.New("other"); ooxml.UnexpectedEOF(x, other) != other {
		t.Error("UnexpectedEOF changed an error that is not io.EOF")
	}

	// The context is checked as the tokens come.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err = ooxml.Open(ctx, word(t, ooxmltest.Member{Name: "long.xml", Body: []byte("<r>" + strings.Repeat("<a/>", 5000) + "</r>")}), kind, lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := readAll("long.xml"); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading long.xml under a cancelled context: %v, want context.Canceled", err)
	}
}

// TestAttrs finds an attribute by its local name, and a relationship
// attribute in the transitional or the strict namespace only.
func TestAttrs(t *testing.T) {
	e := xml.StartElement{Attr: []xml.Attr{
		{Name: xml.Name{Local: "id"}, Value: "plain"},
		{Name: xml.Name{Space: "http://purl.oclc.org/ooxml/officeDocument/relationships", Local: "embed"}, Value: "rId5"},
		{Name: xml.Name{Space: "http://schemas.openxmlformats.org/officeDocument/2006/relationships", Local: "id"}, Value: "rId7"},
	}}
	for _, tt := range []struct{ got, want string }{
		{ooxml.Attr(e, "id"), "plain"},
		{ooxml.Attr(e, "embed"), "rId5"},
		{ooxml.Attr(e, "name"), ""},
		{ooxml.RelAttr(e, "id"), "rId7"},
		{ooxml.RelAttr(e, "embed"), "rId5"},
		{ooxml.RelAttr(e, "name"), ""},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestRels resolves relationship targets against their source part,
// keeps external ones as written, and finds a relationship by type.
func TestRels(t *testing.T) {
	const docRels = `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		`<Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="https://example.com/styles.xml" TargetMode="External"/>` +
		`<Relationship Id="rId1" Type="http://purl.oclc.org/ooxml/officeDocument/relationships/styles" Target="styles.xml"/>` +
		`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/customXml" Target="../customXml/item1.xml"/>` +
		`<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="media/./../media/image1.png"/>` +
		`<Relationship Id="rId4" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/theme" Target="/word/theme/../theme/theme1.xml"/>` +
		`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footer" Target="footer1.xml"/>` +
		`</Relationships>`
	p := open(t, word(t, ooxmltest.Member{Name: "word/_rels/document.xml.rels", Body: []byte(docRels)}), documents.DefaultLimits)

	byID, order, err := p.Rels("")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := ooxml.RelOfType(order, "officeDocument"); !ok || r.Target != "word/document.xml" || byID["rId2"].Target != "docProps/core.xml" {
		t.Fatalf("the package's relationships: %+v", order)
	}

	byID, order, err = p.Rels("word/document.xml")
	if err != nil {
		t.Fatal(err)
	}
	want := []ooxml.Rel{
		{ID: "rId9", Type: "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles", Target: "https://example.com/styles.xml", External: true},
		{ID: "rId1", Type: "http://purl.oclc.org/ooxml/officeDocument/relationships/styles", Target: "word/styles.xml"},
		{ID: "rId2", Type: "http://schemas.openxmlformats.org/officeDocument/2006/relationships/customXml", Target: "customXml/item1.xml"},
		{ID: "rId3", Type: "http://schemas.openxmlformats.org/officeDocument/2006/relationships/image", Target: "word/media/image1.png"},
		{ID: "rId4", Type: "http://schemas.openxmlformats.org/officeDocument/2006/relationships/theme", Target: "word/theme/theme1.xml"},
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Fatalf("Rels(word/document.xml) (-want +got):\n%s", diff)
	}
	if len(byID) != len(want) || byID["rId1"] != want[1] {
		t.Fatalf("Rels(word/document.xml) by id: %+v", byID)
	}
	// The external relationship of the type comes first, and is passed over.
	if r, ok := ooxml.RelOfType(order, "styles"); !ok || r.ID != "rId1" {
		t.Fatalf(`RelOfType(styles) = %+v, %v; want rId1`, r, ok)
	}
	if r, ok := ooxml.RelOfType(order, "header"); ok {
		t.Fatalf(`RelOfType(header) = %+v, want none`, r)
	}

	byID, order, err = p.Rels("word/styles.xml")
	if err != nil || len(byID) != 0 || len(order) != 0 {
		t.Fatalf("Rels of a part with no relationships part = %v, %v, %v; want none", byID, order, err)
	}

	bad := open(t, word(t, ooxmltest.Member{Name: "word/_rels/document.xml.rels", Body: []byte(`<Relationships>`)}), documents.DefaultLimits)
	_, _, err = bad.Rels("word/document.xml")
	ooxmltest.Refusal(t, err, "part word/_rels/document.xml.rels is not well-formed XML")
}

// TestContentType gives a part its override's type, else its extension's
// default, matching either without regard to case.
func TestContentType(t *testing.T) {
	p := open(t, word(t), documents.DefaultLimits)
	for _, tt := range []struct{ name, want string }{
		{"word/document.xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"},
		{"word/styles.xml", "application/xml"},
		{"word/media/image1.PNG", "image/png"},
		{"_rels/.rels", "application/vnd.openxmlformats-package.relationships+xml"},
		{"word/media/image2.emf", ""},
		{"word/noextension", ""},
	} {
		if got, err := p.ContentType(tt.name); err != nil || got != tt.want {
			t.Errorf("ContentType(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}

	lim := documents.DefaultLimits
	lim.MaxXMLDepth = 8
	deep := ooxmltest.WithMember(t, word(t), "[Content_Types].xml",
		[]byte(`<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">`+ooxmltest.Nested("Default", 8)+`</Types>`))
	_, err := open(t, deep, lim).ContentType("word/document.xml")
	ooxmltest.Refusal(t, err, "part [Content_Types].xml nests its XML more than 8 elements deep")

	plain := ooxmltest.Zip(t, ooxmltest.Member{Name: "notes.txt", Body: []byte("hello")})
	_, err = open(t, plain, lim).ContentType("notes.txt")
	ooxmltest.Refusal(t, err, "not a Word document (.docx): its zip has no [Content_Types].xml")
}

// TestMainPart finds the main part through the package's relationships
// and refuses one of another kind, naming the kind.
func TestMainPart(t *testing.T) {
	p := open(t, word(t), documents.DefaultLimits)
	if got, err := p.MainPart("wordprocessingml", "ms-word"); err != nil || got != "word/document.xml" {
		t.Fatalf("MainPart = %q, %v; want word/document.xml", got, err)
	}
	override := func(ct string) []byte {
		return ooxmltest.WithMember(t, word(t), "[Content_Types].xml", []byte(strings.Replace(typesXML,
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml", ct, 1)))
	}
	const strictRels = `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		`<Relationship Id="rId1" Type="http://purl.oclc.org/ooxml/officeDocument/relationships/officeDocument" Target="word/document.xml"/></Relationships>`
	if got, err := open(t, ooxmltest.WithMember(t, word(t), "_rels/.rels", []byte(strictRels)), documents.DefaultLimits).MainPart("wordprocessingml"); err != nil || got != "word/document.xml" {
		t.Fatalf("MainPart of a strict package = %q, %v; want word/document.xml", got, err)
	}
	if got, err := open(t, override("application/vnd.ms-word.document.macroEnabled.main+xml"), documents.DefaultLimits).MainPart("wordprocessingml", "ms-word"); err != nil || got != "word/document.xml" {
		t.Fatalf("MainPart with the second type wanted = %q, %v", got, err)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"spreadsheet", override("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"), `main part word/document.xml is of type "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml" (a spreadsheet)`},
		{"old spreadsheet", override("application/vnd.ms-excel.sheet.macroEnabled.main+xml"), "(a spreadsheet)"},
		{"presentation", override("application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"), "(a presentation)"},
		{"another kind", override("application/vnd.oasis.opendocument.text"), "(another kind of document)"},
		{"no type", ooxmltest.WithMember(t, word(t), "[Content_Types].xml", []byte(`<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`)), `of type "" (no type declared)`},
		{"no main part", ooxmltest.WithMember(t, word(t), "_rels/.rels", []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>`)), "names no main document (_rels/.rels has no officeDocument relationship)"},
		{"no relationships", ooxmltest.Zip(t, ooxmltest.Member{Name: "[Content_Types].xml", Body: []byte(typesXML)}), "names no main document"},
		{"no content types", ooxmltest.Zip(t, ooxmltest.Member{Name: "_rels/.rels", Body: []byte(rootRels)}), "has no [Content_Types].xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := open(t, tt.in, documents.DefaultLimits).MainPart("wordprocessingml", "ms-word")
			ooxmltest.Refusal(t, err, "not a Word document (.docx)", tt.want)
		})
	}
}

// TestText keeps lines up to the limit, counting characters and a
// newline each, cuts the line that does not fit, and says so.
func TestText(t *testing.T) {
	tx := ooxml.NewText(10)
	if !tx.Line("abc") || tx.Full() {
		t.Fatal(`Line("abc") = false with 10 characters allowed, or the text is full`)
	}
	if tx.Line("défghij") || !tx.Full() {
		t.Fatal(`Line("défghij") = true past 10 characters, or the text is not full`)
	}
	if tx.Line("x") {
		t.Fatal(`Line("x") = true after the text was cut`)
	}
	if got, want := tx.String(), "abc\ndéfghi\n…[cut: the text is longer than the document tools' limit of 10 characters]"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}

	exact := ooxml.NewText(8)
	if !exact.Line("abc") || !exact.Line("äöü") || exact.Full() {
		t.Fatal("Line = false for lines that fit exactly")
	}
	if got := exact.String(); got != "abc\näöü\n" {
		t.Fatalf("String() = %q, want the two lines uncut", got)
	}
	if exact.Line("") || !strings.HasSuffix(exact.String(), "limit of 8 characters]") {
		t.Fatalf("an empty line past the limit was kept: %q", exact.String())
	}

	for _, tt := range []struct {
		s    string
		n    int
		want int
	}{
		{"abc", 0, 0}, {"abc", 2, 2}, {"abc", 3, 3}, {"abc", 9, 3}, {"äöü", 1, 2}, {"äöü", 2, 4}, {"", 1, 0},
	} {
		if got := ooxml.RuneOffset(tt.s, tt.n); got != tt.want {
			t.Errorf("RuneOffset(%q, %d) = %d, want %d", tt.s, tt.n, got, tt.want)
		}
	}
}
