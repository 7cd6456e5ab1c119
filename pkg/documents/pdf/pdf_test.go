//go:build pdf || documents

package pdf

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
)

func TestMain(m *testing.M) {
	documents.RunChildIfRequested() // after this package's init registered its operations
	os.Exit(m.Run())
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validate checks pdf with pdfcpu's validator, the structural check of
// what this package wrote, and that every object reachable from its
// catalog is in the file (a viewer treats a missing one as broken, which
// pdfcpu's relaxed validation lets pass); it returns the page count.
func validate(t *testing.T, pdf []byte) int {
	t.Helper()
	conf := newConfig()
	if err := api.Validate(bytes.NewReader(pdf), conf); err != nil {
		t.Fatalf("pdfcpu does not validate the output: %v", err)
	}
	n, err := api.PageCount(bytes.NewReader(pdf), newConfig())
	if err != nil {
		t.Fatalf("pdfcpu page count: %v", err)
	}
	ctx, err := api.ReadContext(bytes.NewReader(pdf), newConfig())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	var missing []int
	var walk func(o types.Object)
	walk = func(o types.Object) {
		switch v := o.(type) {
		case types.IndirectRef:
			nr := v.ObjectNumber.Value()
			if seen[nr] {
				return
			}
			seen[nr] = true
			e, ok := ctx.XRefTable.FindTableEntryForIndRef(&v)
			if !ok || e.Free {
				missing = append(missing, nr)
				return
			}
			obj, err := ctx.XRefTable.Dereference(v)
			if err != nil {
				t.Fatalf("object %d: %v", nr, err)
			}
			walk(obj)
		case types.Dict:
			for k, e := range v {
				if k != "Parent" && k != "P" {
					walk(e)
				}
			}
		case types.StreamDict:
			walk(v.Dict)
		case types.Array:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(*ctx.XRefTable.Root)
	if len(missing) > 0 {
		t.Fatalf("the output refers to objects it does not hold: %v", missing)
	}
	return n
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q; it is:\n%s", what, w, got)
		}
	}
}

func wantRefusal(t *testing.T, what string, err error, says string) {
	t.Helper()
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), says) {
		t.Fatalf("%s: %v, want a refusal saying %q", what, err, says)
	}
}

// TestTextFixtures extracts the text of PDFs made by other programs.
func TestTextFixtures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		wants []string
	}{
		// XeTeX: Type 1 fonts, a ligature through a ToUnicode CMap, words
		// spaced by TJ kerning.
		{"crazyones.pdf", []string{"Page 1\nThe Crazy Ones\nOctober 14, 1998\n", "The misfits. The rebels.", "They push the human race forward."}},
		// LibreOffice: subset TrueType fonts in composite fonts.
		{"hello-world.pdf", []string{"Hello World", "Привет, мир", "你好世界", "こんにちは世界"}},
		// Google Docs: one page each.
		{"two-different-pages.pdf", []string{"Page 1\n1\n", "Page 2\n2\n"}},
		// WPS Writer, encrypted with AES-256 and an empty user password.
		{"r6-empty-password.pdf", []string{"pdf encryption test", "password: asdfzxcv"}},
		// LibreOffice's form: its text, then its fields.
		{"libreoffice-form.pdf", []string{"Example for a Form", "Form fields\n", "First Name: Alice\n", "First Name_2: Bob\n", "gdpr: Off\n"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := Text(context.Background(), fixture(t, tc.file))
			if err != nil {
				t.Fatalf("Text(%s): %v", tc.file, err)
			}
			mustContain(t, "Text("+tc.file+")", got, tc.wants...)
		})
	}
}

// TestReadOp: pdf.read puts each page under its header, through Call.
func TestReadOp(t *testing.T) {
	res, err := documents.Call(context.Background(), "pdf.read", nil, fixture(t, "two-different-pages.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "2 page(s)\n\nPage 1\n1\n\nPage 2\n2\n\n"; res.Text != want {
		t.Fatalf("pdf.read = %q, want %q", res.Text, want)
	}
}

// TestReadingOrder: pieces of one line drawn out of order read left to
// right; a wide TJ gap is a space, a kerning nudge is not.
func TestReadingOrder(t *testing.T) {
	in := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: textPage(2, 4),
		4: streamObj("", []byte("BT /F1 12 Tf 100 200 Td (world) Tj ET\n"+
			"BT /F1 12 Tf 10 200 Td (Hello) Tj ET\n"+
			"BT /F1 12 Tf 10 180 Td [(Ke) 30 (rned) -300 (words)] TJ 0 -20 Td (next \\(line\\)) Tj ET")),
	})
	got, err := Pages(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Hello world\nKerned words\nnext (line)\n"; len(got) != 1 || got[0] != want {
		t.Fatalf("Pages = %q, want [%q]", got, want)
	}
}

// TestNotReadable: what is not a PDF, or cannot be opened, is refused
// with the reason, never read as "".
func TestNotReadable(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		says string
	}{
		{"empty", nil, "empty"},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "not a PDF"},
		{"truncated", fixture(t, "crazyones.pdf")[:400], "cannot be read as a PDF"},
		{"password", fixture(t, "r2-user-password.pdf"), "encrypted with a password"},
		{"no text", blankPDF(t), "no extractable text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := documents.Call(context.Background(), "pdf.text", nil, tc.in)
			wantRefusal(t, "pdf.text of "+tc.name, err, tc.says)
		})
	}
}

// blankPDF is a PDF whose one page draws a box and no text.
func blankPDF(t *testing.T) []byte {
	t.Helper()
	return buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>",
		4: streamObj("", []byte("0 0 1 rg 10 10 100 100 re f")),
	})
}

// TestFormFieldsFixtures lists the fields of forms made by LibreOffice,
// OpenOffice and LaTeX.
func TestFormFieldsFixtures(t *testing.T) {
	got, err := FormFields(context.Background(), fixture(t, "libreoffice-form.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{
		{Name: "First Name", Type: "text", Value: "Alice"},
		{Name: "Last Name", Type: "text"},
		{Name: "female", Type: "radio", Value: "Off", Options: []string{"1", "2"}},
		{Name: "Birthday", Type: "text"},
		{Name: "gdpr", Type: "checkbox", Value: "Off", Options: []string{"Yes"}},
		{Name: "other", Type: "checkbox", Value: "Off", Options: []string{"Yes"}},
		{Name: "First Name_2", Type: "text", Value: "Bob"},
		{Name: "Nationality", Type: "choice", Options: []string{"Unknown", "German", "Indonesian", "US-American", "French", "Spanish", "Italian"}},
	}
	if d := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Field{})); d != "" {
		t.Errorf("FormFields(libreoffice-form.pdf) (-want +got):\n%s", d)
	}

	oo, err := FormFields(context.Background(), fixture(t, "FormTestFromOo.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, f := range oo {
		types[f.Name] = f.Type
	}
	for name, typ := range map[string]string{"CheckBox1": "checkbox", "Text1": "text", "Text2": "text", "RadioGroup1": "radio", "Combo1": "choice", "Liste2": "choice", "DropList1": "choice"} {
		if types[name] != typ {
			t.Errorf("FormTestFromOo.pdf field %s is %q, want %q (all: %v)", name, types[name], typ, types)
		}
	}

	res, err := documents.Call(context.Background(), "pdf.form_fields", nil, fixture(t, "pdflatex-forms.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf.form_fields(pdflatex-forms.pdf)", res.Text, "2 form field(s)", `Name (text): ""`, `Check (checkbox): "Off"; on state "Yes"`)
}

// TestFillForm fills LibreOffice's form, every kind of field, and reads
// the values back: through pdf.text (as document_contains does), through
// FormFields, and through pdfcpu, which must validate the file.
func TestFillForm(t *testing.T) {
	in := fixture(t, "libreoffice-form.pdf")
	args, _ := json.Marshal(map[string]any{"fields": map[string]string{
		"Last Name":   "Lovelace-Żółć",
		"Birthday":    "10.12.1815",
		"gdpr":        "true",
		"other":       "Yes",
		"female":      "2",
		"Nationality": "French",
	}})
	res, err := documents.Call(context.Background(), "pdf.fill_form", args, in)
	if err != nil {
		t.Fatal(err)
	}
	out := res.File
	if validate(t, out) != 1 {
		t.Errorf("the filled form has lost pages")
	}
	text, err := Text(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf.text of the filled form", text,
		"Example for a Form", "First Name: Alice\n", "Last Name: Lovelace-Żółć\n", "Birthday: 10.12.1815\n",
		"gdpr: Yes\n", "other: Yes\n", "female: 2\n", "Nationality: French\n")
	fields, err := FormFields(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Field{}
	for _, f := range fields {
		byName[f.Name] = f
	}
	for name, want := range map[string]string{"Last Name": "Lovelace-Żółć", "gdpr": "Yes", "female": "2", "Nationality": "French", "First Name": "Alice"} {
		if got := byName[name].Value; got != want {
			t.Errorf("field %s = %q after filling, want %q", name, got, want)
		}
	}
	// pdfcpu's own reading of the check box agrees.
	ctx, err := api.ReadContext(bytes.NewReader(out), newConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := api.ValidateContext(ctx); err != nil {
		t.Fatal(err)
	}
	// A check box turned back off.
	args, _ = json.Marshal(map[string]any{"fields": map[string]string{"gdpr": "false"}})
	res, err = documents.Call(context.Background(), "pdf.fill_form", args, out)
	if err != nil {
		t.Fatal(err)
	}
	text, err = Text(context.Background(), res.File)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf.text after unchecking", text, "gdpr: Off\n", "other: Yes\n", "Last Name: Lovelace-Żółć\n")
}

// TestFillFormOpenOffice fills OpenOffice's form of every field kind,
// which pdfcpu's own form reader cannot list.
func TestFillFormOpenOffice(t *testing.T) {
	out, err := FillForm(context.Background(), fixture(t, "FormTestFromOo.pdf"), map[string]string{
		"Text1":       "single line",
		"Text2":       "first line\nsecond line, which is long enough to be wrapped inside the box",
		"CheckBox1":   "true",
		"RadioGroup1": "3",
		"Combo1":      "combo Line 2",
		"DropList1":   "droplist3",
	})
	if err != nil {
		t.Fatal(err)
	}
	validate(t, out)
	text, err := Text(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf.text", text, "Text1: single line\n", "Text2: first line second line", "CheckBox1: Yes\n", "RadioGroup1: 3\n", "Combo1: combo Line 2\n", "DropList1: DropList3\n")
}

// TestFillFormObjectStreams fills a form whose objects are packed in
// object streams (pdfcpu's own sample), every object still in the file.
func TestFillFormObjectStreams(t *testing.T) {
	in := fixture(t, "pdfcpu-person.pdf")
	validate(t, in)
	out, err := FillForm(context.Background(), in, map[string]string{"lastName": "Lovelace", "status": "deceased", "license": "CC BY 4.0"})
	if err != nil {
		t.Fatal(err)
	}
	validate(t, out)
	text, err := Text(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf.text", text, "lastName: Lovelace\n", "status: deceased\n", "license: CC BY 4.0\n", "firstName: Jackie\n")
}

// TestWriteKeepsPackedObjects: a document written back unchanged keeps
// every object, those packed in object streams and what they refer to
// among them.
func TestWriteKeepsPackedObjects(t *testing.T) {
	d, err := open(context.Background(), fixture(t, "pdfcpu-person.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.write()
	if err != nil {
		t.Fatal(err)
	}
	validate(t, out)
}

// TestFillFormRefusals: names the form lacks, values a field cannot
// take, and read-only fields are refused, saying why.
func TestFillFormRefusals(t *testing.T) {
	lo := fixture(t, "libreoffice-form.pdf")
	for _, tc := range []struct {
		name   string
		in     []byte
		fields map[string]string
		says   string
	}{
		{"unknown", lo, map[string]string{"Surname": "x"}, `the form has no field "Surname"; its fields are "First Name" (text), "Last Name" (text), "female" (radio)`},
		{"checkbox", lo, map[string]string{"gdpr": "maybe"}, `the check box "gdpr" takes "true", "false" or its on state's name "Yes", not "maybe"`},
		{"radio", lo, map[string]string{"female": "3"}, `the radio group "female" takes one of "1", "2" (or "Off"), not "3"`},
		{"choice", lo, map[string]string{"Nationality": "Martian"}, `the choice "Nationality" takes one of "Unknown", "German"`},
		{"read-only", fixture(t, "pdfcpu-person.pdf"), map[string]string{"firstName": "Sam"}, `the field "firstName" is read-only`},
		{"no form", fixture(t, "crazyones.pdf"), map[string]string{"a": "b"}, "has no form fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FillForm(context.Background(), tc.in, tc.fields)
			wantRefusal(t, "FillForm "+tc.name, err, tc.says)
		})
	}
}

// TestWrite writes pages of text and reads them back, and pdfcpu
// validates what was written.
func TestWrite(t *testing.T) {
	long := strings.Repeat("The ledger balances at the end of every quarter. ", 120)
	pages := []string{
		"Quarterly report\nRevenue rose 12% to €4.2m.",
		"Café déjà vu — “quoted” text, naïve façade.",
		long,
		"",
	}
	out, err := Write(pages)
	if err != nil {
		t.Fatal(err)
	}
	if n := validate(t, out); n != len(pages) {
		t.Fatalf("wrote %d pages, want %d", n, len(pages))
	}
	got, err := Pages(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("read back %d pages", len(got))
	}
	mustContain(t, "page 1", got[0], "Quarterly report\nRevenue rose 12% to €4.2m.")
	mustContain(t, "page 2", got[1], "Café déjà vu — “quoted” text, naïve façade.")
	if words := strings.Count(got[2], "ledger"); words != 120 {
		t.Errorf("page 3 holds %d of the 120 sentences; it is:\n%.300s", words, got[2])
	}
	if strings.TrimSpace(got[3]) != "" {
		t.Errorf("the empty page reads %q", got[3])
	}
}

// TestWriteRefusals: text outside the core font's code page, and a page
// that cannot fit, are refused saying which.
func TestWriteRefusals(t *testing.T) {
	_, err := Write([]string{"fine", "ok then 你好"})
	wantRefusal(t, "Chinese text", err, `page 2: the character '你' (U+4F60, at byte 8) is outside what the PDF's core font`)
	_, err = Write([]string{strings.Repeat("word ", 20000)})
	wantRefusal(t, "a page too long", err, "page 1's text is too long for one page even at 6 points; split it")
	_, err = Write(nil)
	wantRefusal(t, "no pages", err, "no pages were given")
}

// TestWatermark stamps a fixture and a written file; the stamp reads
// back on every page, the text beneath is kept, pdfcpu validates it.
func TestWatermark(t *testing.T) {
	args := json.RawMessage(`{"text":"CONFIDENTIAL"}`)
	res, err := documents.Call(context.Background(), "pdf.watermark", args, fixture(t, "two-different-pages.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if n := validate(t, res.File); n != 2 {
		t.Fatalf("the stamped file has %d pages, want 2", n)
	}
	pages, err := Pages(context.Background(), res.File)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pages {
		mustContain(t, fmt.Sprintf("stamped page %d", i+1), p, "CONFIDENTIAL", fmt.Sprint(i+1))
	}
	mustContain(t, "pdf.watermark's note", res.Text, `stamped "CONFIDENTIAL" on 2 page(s)`)

	out, n, err := Watermark(context.Background(), fixture(t, "crazyones.pdf"), "Entwurf – nicht verteilen")
	if err != nil {
		t.Fatal(err)
	}
	validate(t, out)
	text, err := Text(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("stamped %d pages, want 1", n)
	}
	mustContain(t, "stamped crazyones.pdf", text, "Entwurf – nicht verteilen", "The Crazy Ones")

	_, _, err = Watermark(context.Background(), fixture(t, "crazyones.pdf"), "草稿")
	wantRefusal(t, "a Chinese watermark", err, "outside what the PDF's core font")
}

// A test PDF is built from numbered object bodies; buildPDF lays them
// out with a correct cross-reference table.
func buildPDF(t *testing.T, objs map[int]string) []byte {
	t.Helper()
	max := 0
	for n := range objs {
		max = maxInt(max, n)
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, max+1)
	for n := 1; n <= max; n++ {
		body, ok := objs[n]
		if !ok {
			continue
		}
		offsets[n] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", n, body)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", max+1)
	for n := 1; n <= max; n++ {
		if offsets[n] == 0 {
			b.WriteString("0000000000 65535 f \n")
			continue
		}
		fmt.Fprintf(&b, "%010d 00000 n \n", offsets[n])
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", max+1, xref)
	return b.Bytes()
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// streamObj is a stream object's body holding data, with extra entries
// in its dictionary.
func streamObj(dict string, data []byte) string {
	return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

// textPage is a page showing text in Helvetica.
func textPage(parent int, contents int) string {
	return fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 300 300] /Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> /Contents %d 0 R >>", parent, contents)
}

// bombStream is a Flate stream that inflates to n zeros, a thousand to
// a byte.
func bombStream(t *testing.T, n int64) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zlib.NewWriterLevel(&b, zlib.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(w, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestHostile runs hostile files through the isolated operations: each
// is refused within its limit, saying which.
func TestHostile(t *testing.T) {
	documents.Isolate(true)
	defer documents.Isolate(false)

	bomb := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: textPage(2, 4),
		4: streamObj("/Filter /FlateDecode", bombStream(t, documents.DefaultLimits.MaxExpandedBytes+16<<20)),
	})
	t.Logf("the bomb is %d bytes", len(bomb))

	// Five streams, each within the limit of one, past the limit of all.
	part := streamObj("/Filter /FlateDecode", bombStream(t, MaxStreamBytes-1<<20))
	bombs := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Contents [4 0 R 5 0 R 6 0 R 7 0 R 8 0 R] >>",
		4: part, 5: part, 6: part, 7: part, 8: part,
	})

	cycle := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: "<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	})
	refChain := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: textPage(2, 4),
		4: "5 0 R",
		5: "4 0 R",
	})
	nested := map[int]string{1: "<< /Type /Catalog /Pages 2 0 R >>"}
	const levels = MaxDepth + 8
	for n := 2; n < 2+levels; n++ {
		nested[n] = fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", n+1)
	}
	nested[2+levels] = textPage(1+levels, 3+levels)
	nested[3+levels] = streamObj("", []byte("BT /F1 12 Tf 10 10 Td (deep) Tj ET"))
	deep := buildPDF(t, nested)

	formLoop := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Resources << /XObject << /X 5 0 R >> /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> /Contents 4 0 R >>",
		4: streamObj("", []byte("/X Do")),
		5: streamObj("/Type /XObject /Subtype /Form /BBox [0 0 300 300] /Resources << /XObject << /X 5 0 R >> /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>", []byte("BT /F1 12 Tf 10 10 Td (inside) Tj ET /X Do")),
	})

	fieldLoop := buildPDF(t, map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [5 0 R] >> >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: textPage(2, 4),
		4: streamObj("", []byte("BT /F1 12 Tf 10 10 Td (form) Tj ET")),
		5: "<< /T (outer) /Kids [6 0 R] >>",
		6: "<< /T (inner) /Parent 5 0 R /Kids [5 0 R] >>",
	})

	for _, tc := range []struct {
		name, op string
		in       []byte
		says     string
	}{
		{"flate bomb", "pdf.text", bomb, "(object 4) inflates past the pdf tools' limit of 67108864 bytes of decompressed content for one stream's content"},
		{"flate bomb, watermarked", "pdf.watermark", bomb, "decompression bomb"},
		{"flate bombs together", "pdf.read", bombs, "inflates past the pdf tools' limit of 268435456 bytes of decompressed content for all streams' content"},
		{"page tree cycle", "pdf.read", cycle, "page tree contains itself"},
		{"reference cycle", "pdf.text", refChain, "chain of more than 32 references (or a reference cycle)"},
		{"page tree too deep", "pdf.text", deep, "page tree is nested deeper than the pdf tools' limit of 32 levels"},
		{"field tree cycle", "pdf.form_fields", fieldLoop, "form field tree contains itself (object 5 is its own ancestor)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := json.RawMessage(nil)
			if tc.op == "pdf.watermark" {
				args = json.RawMessage(`{"text":"X"}`)
			}
			start := time.Now()
			_, err := documents.Call(context.Background(), tc.op, args, tc.in)
			wantRefusal(t, tc.name, err, tc.says)
			if el := time.Since(start); el > documents.DefaultLimits.Timeout {
				t.Errorf("%s took %s", tc.name, el)
			}
		})
	}

	// A form that draws itself is drawn once, not without end.
	res, err := documents.Call(context.Background(), "pdf.read", nil, formLoop)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(res.Text, "inside") != 1 {
		t.Errorf("the self-drawing form reads %q, want its text once", res.Text)
	}
}

// TestTooManyObjects: a cross-reference table of more entries than the
// limit is refused.
func TestTooManyObjects(t *testing.T) {
	objs := map[int]string{
		1: "<< /Type /Catalog /Pages 2 0 R >>",
		2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		3: textPage(2, 4),
		4: streamObj("", []byte("BT /F1 12 Tf 10 10 Td (many) Tj ET")),
	}
	for n := 5; n <= MaxObjects+10; n++ {
		objs[n] = "null"
	}
	_, err := Text(context.Background(), buildPDF(t, objs))
	if err == nil || !strings.Contains(err.Error(), "objects") {
		t.Fatalf("Text of %d objects: %v, want a refusal naming the object limit", MaxObjects+10, err)
	}
	t.Log(err)
}
