//go:build pptx || documents

package pptx

import (
	"context"
	"encoding/json"
	"errors"
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

// read is Read of the fixture name under the default limits.
func read(t *testing.T, in []byte) string {
	t.Helper()
	got, err := Read(context.Background(), in, documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestReadWhole reads a PowerPoint deck with notes on each slide, exactly:
// the slide-number placeholders of the notes pages are left out.
func TestReadWhole(t *testing.T) {
	want := `Slide 1
Title of the first slide
Subtitle of the first slide
This bit is in italic green
Notes: I am the notes of the first slide

Slide 2
This is the second slide
It has bullet points on it
They’re fun, aren’t they?
Especially in a different font like Arial Black at 16 point!
Notes: These are the notes of the 2nd slide
THIS LINE IS BOLD`
	if got := read(t, ooxmltest.Fixture(t, "SampleShow.pptx")); got != want {
		t.Fatalf("Read(SampleShow.pptx) =\n%s\nwant\n%s", got, want)
	}
}

// TestReadFixtures reads decks made by PowerPoint, LibreOffice and
// python-pptx: group shapes, tables, notes, slides whose zip order is not
// their order.
func TestReadFixtures(t *testing.T) {
	tests := []struct {
		file   string
		want   []string
		absent []string
	}{
		// Its zip holds slide3, slide2, slide4, slide1, in that order.
		{file: "dml-line.pptx", want: []string{
			"Slide 1", "Inherited Outline Format", "Slide 2", "No (directly-applied)",
			"Slide 3", "No (directly applied) line width", "Slide 4", "Inherited Line",
		}},
		{file: "ph-inherit-props.pptx", want: []string{
			"Slide 1", "Title Text", "Body Text", "Notes: Notes in inherited position and size.",
			"Slide 2", "Notes: Notes in modified position and size.",
		}, absent: []string{"\n1\n", "\n2\n"}},
		{file: "test_slides.pptx", want: []string{
			"Slide 1", "Test text", "Group test text", "Box 1", "Box 2", "Col head 1 | Col head 2", "Cell text 1 | Cell text 2",
		}},
		{file: "bug60993.pptx", want: []string{"Slide 1", "Test | Here | Test Test test"}}, // LibreOffice
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := read(t, ooxmltest.Fixture(t, tt.file))
			ooxmltest.InOrder(t, got, tt.want...)
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("the text holds %q:\n%s", a, got)
				}
			}
		})
	}
}

// TestSlideOrder follows presentation.xml's slide list, not the parts'
// names or the zip's order, and marks a hidden slide.
func TestSlideOrder(t *testing.T) {
	in := ooxmltest.Fixture(t, "dml-line.pptx")
	pres := string(ooxmltest.MemberOf(t, in, "ppt/presentation.xml"))
	const list = `<p:sldIdLst><p:sldId id="256" r:id="rId2"/><p:sldId id="257" r:id="rId3"/><p:sldId id="258" r:id="rId4"/><p:sldId id="259" r:id="rId5"/></p:sldIdLst>`
	const reversed = `<p:sldIdLst><p:sldId id="259" r:id="rId5"/><p:sldId id="258" r:id="rId4"/><p:sldId id="257" r:id="rId3"/><p:sldId id="256" r:id="rId2"/></p:sldIdLst>`
	if !strings.Contains(pres, list) {
		t.Fatalf("the fixture's slide list is not %s", list)
	}
	got := read(t, ooxmltest.WithMember(t, in, "ppt/presentation.xml", []byte(strings.Replace(pres, list, reversed, 1))))
	ooxmltest.InOrder(t, got, "Slide 1", "Inherited Line", "Slide 2", "No (directly applied) line width",
		"Slide 3", "No (directly-applied)", "Slide 4", "Inherited Outline Format")

	show := ooxmltest.Fixture(t, "SampleShow.pptx")
	slide := string(ooxmltest.MemberOf(t, show, "ppt/slides/slide2.xml"))
	hidden := ooxmltest.WithMember(t, show, "ppt/slides/slide2.xml", []byte(strings.Replace(slide, "<p:sld ", `<p:sld show="0" `, 1)))
	ooxmltest.InOrder(t, read(t, hidden), "Slide 1", "Slide 2 (hidden)", "This is the second slide")

	rels := string(ooxmltest.MemberOf(t, show, "ppt/_rels/presentation.xml.rels"))
	missing := ooxmltest.WithMember(t, show, "ppt/_rels/presentation.xml.rels", []byte(strings.Replace(rels, `Target="slides/slide1.xml"`, `Target="slides/slide9.xml"`, 1)))
	ooxmltest.InOrder(t, read(t, missing), "Slide 1 (its part is missing from the file)", "Slide 2", "This is the second slide")
}

// TestReadCut cuts a long text at the limit, saying so.
func TestReadCut(t *testing.T) {
	lim := documents.DefaultLimits
	lim.MaxTextChars = 40
	got, err := Read(context.Background(), ooxmltest.Fixture(t, "SampleShow.pptx"), lim)
	if err != nil {
		t.Fatal(err)
	}
	body, note, ok := strings.Cut(got, "\n…[cut:")
	if !ok || !strings.Contains(note, "limit of 40 characters") || utf8.RuneCountInString(body) > 40 || !strings.HasPrefix(body, "Slide 1\nTitle of the first slide\n") {
		t.Fatalf("Read = %q, want 40 characters and a note of the cut", got)
	}
}

// TestReadRefusals refuses files that are not presentations, with the
// reason. What any package is refused for (not a zip, an encrypted file)
// is package ooxml's to test.
func TestReadRefusals(t *testing.T) {
	const types = `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
		`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`
	const rels = `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`
	word := ooxmltest.Zip(t, ooxmltest.Member{Name: "[Content_Types].xml", Body: []byte(types)}, ooxmltest.Member{Name: "_rels/.rels", Body: []byte(rels)},
		ooxmltest.Member{Name: "word/document.xml", Body: []byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>`)})
	show := ooxmltest.Fixture(t, "SampleShow.pptx")
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"word", word, "(a Word document)"},
		{"damaged slide", ooxmltest.WithMember(t, show, "ppt/slides/slide2.xml", []byte(`<p:sld xmlns:p="x"><p:cSld>`)), "ppt/slides/slide2.xml is not well-formed XML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(context.Background(), tt.in, documents.DefaultLimits)
			ooxmltest.Refusal(t, err, tt.want)
		})
	}
	_, err := documents.Call(context.Background(), "pptx.text", nil, nil)
	ooxmltest.Refusal(t, err, "empty")
}

// TestHostile refuses a slide that nests past the depth limit, in this
// process and in an isolated child. The package's own limits (a zip
// bomb, a member that lies about its size, too many members) are package
// ooxml's to test.
func TestHostile(t *testing.T) {
	deep := ooxmltest.WithMember(t, ooxmltest.Fixture(t, "SampleShow.pptx"), "ppt/slides/slide1.xml",
		[]byte(`<p:sld xmlns:p="x">`+ooxmltest.Nested("p:grpSp", 10_000)+`</p:sld>`))
	ooxmltest.Isolated(t, func(t *testing.T) {
		_, err := documents.Call(context.Background(), "pptx.read", nil, deep)
		ooxmltest.Refusal(t, err, "ppt/slides/slide1.xml nests its XML more than 256 elements deep")
	})
}

// TestTool runs pptx_read against a workspace, through the policy.
func TestTool(t *testing.T) {
	env, dir := ooxmltest.NewEnv(t, ooxmltest.RefuseUnder("secret/"))
	show := ooxmltest.Fixture(t, "SampleShow.pptx")
	for _, p := range []string{"deck.pptx", "secret/deck.pptx"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), show, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("secret/deck.pptx", filepath.Join(dir, "link.pptx")); err != nil {
		t.Fatal(err)
	}
	out, err := ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "deck.pptx"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Content != read(t, show) || out.Changed {
		t.Fatalf("pptx_read = %+v", out)
	}
	for _, p := range []string{"secret/deck.pptx", "link.pptx"} {
		_, err := ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": p})
		if !errors.Is(err, protocol.ErrRefused) || !strings.Contains(err.Error(), "secret/deck.pptx") {
			t.Fatalf("pptx_read %s: %v, want the policy's refusal of secret/deck.pptx", p, err)
		}
	}
	env.EntryCap = 512
	slide := string(ooxmltest.MemberOf(t, show, "ppt/slides/slide1.xml"))
	if !strings.Contains(slide, "Title of the first slide") {
		t.Fatal("the fixture's first slide has no title")
	}
	long := ooxmltest.WithMember(t, show, "ppt/slides/slide1.xml", []byte(strings.Replace(slide, "Title of the first slide", strings.Repeat("a long title ", 100), 1)))
	if err := os.WriteFile(filepath.Join(dir, "long.pptx"), long, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "long.pptx"})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(out.Content); n > 512 || !strings.Contains(out.Content, "…[cut: left out the last") || !strings.HasPrefix(out.Content, "Slide 1\na long title") {
		t.Fatalf("pptx_read with a 512-character cap gave %d characters: %q", n, out.Content)
	}
	for _, b := range []struct{ args, want string }{
		{`{"path": "deck.pptx", "slide": 2}`, `unknown field "slide"`},
		{`{}`, "needs the file's path"},
		{`"deck.pptx"`, "give them as"},
	} {
		_, err := ReadTool{}.Invoke(context.Background(), env, json.RawMessage(b.args))
		ooxmltest.Refusal(t, err, b.want)
	}
}

// TestSpecs checks what pptx_read declares and what the format
// registers: one read-only tool, no writer.
func TestSpecs(t *testing.T) {
	spec := ReadTool{}.Spec()
	var schema map[string]any
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema["additionalProperties"] != false || spec.Name != "pptx_read" {
		t.Fatalf("spec %+v (%v)", spec, err)
	}
	var tool tools.Tool = ReadTool{}
	if g, ok := tool.(tools.Gated); !ok || g.Gate() != (protocol.ToolGate{Act: "read", Arg: "path"}) {
		t.Fatal("pptx_read does not declare a read gate on path")
	}
	if _, ok := tool.(tools.ReadOnly); !ok {
		t.Fatal("pptx_read is not read-only")
	}
	var found bool
	for _, f := range documents.Formats() {
		if f.Tag == "pptx" {
			found = f.Text == "pptx.text" && len(f.Tools) == 1 && f.Extensions[0] == ".pptx"
		}
	}
	if !found {
		t.Fatalf("documents.Formats() = %+v, want the pptx format with one tool", documents.Formats())
	}
	res, err := documents.Call(context.Background(), "pptx.text", nil, ooxmltest.Fixture(t, "SampleShow.pptx"))
	if err != nil || !strings.Contains(res.Text, "Notes: I am the notes of the first slide") {
		t.Fatalf("pptx.text: %+v, %v", res, err)
	}
	if _, err := documents.Call(context.Background(), "pptx.write", nil, nil); !errors.Is(err, protocol.ErrUnsupported) {
		t.Fatalf("pptx.write: %v, want it not to exist", err)
	}
}
