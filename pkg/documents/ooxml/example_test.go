package ooxml_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml"
)

// A package is opened under the limits, its main part found through its
// relationships and read as XML, the text of its w:t elements collected.
func ExampleOpen() {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range []struct{ name, body string }{
		{"[Content_Types].xml", `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		{"_rels/.rels", `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		{"word/document.xml", `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			`<w:p><w:r><w:t>Hello</w:t></w:r></w:p><w:p><w:r><w:t>world</w:t></w:r></w:p></w:body></w:document>`},
	} {
		w, _ := zw.Create(m.name)
		w.Write([]byte(m.body))
	}
	zw.Close()

	p, err := ooxml.Open(context.Background(), buf.Bytes(), "a Word document (.docx)", documents.DefaultLimits)
	if err != nil {
		fmt.Println(err)
		return
	}
	main, err := p.MainPart("wordprocessingml")
	if err != nil {
		fmt.Println(err)
		return
	}
	x, err := p.XML(main)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	text := ooxml.NewText(documents.DefaultLimits.MaxTextChars)
	inT := false
	for {
		tok, err := x.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inT = e.Name.Local == "t"
		case xml.EndElement:
			inT = false
		case xml.CharData:
			if inT {
				text.Line(string(e))
			}
		}
	}
	fmt.Printf("%s:\n%s", main, text)
	// Output:
	// word/document.xml:
	// Hello
	// world
}
