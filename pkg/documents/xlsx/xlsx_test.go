//go:build xlsx || documents

package xlsx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/xuri/excelize/v2"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml/ooxmltest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

var ctx = context.Background()

// openBytes opens b with excelize itself, for checking what was written.
func openBytes(t *testing.T, b []byte) *excelize.File {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("excelize cannot open the workbook: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSheets lists the sheets of workbooks made by Excel and excelize,
// transitional and strict.
func TestSheets(t *testing.T) {
	tests := []struct{ file, want string }{
		{"Book1.xlsx", "Sheet1: A19:D22, 4 rows × 4 columns\nSheet2: A1:I11, 11 rows × 9 columns"},
		{"SampleSS.xlsx", "First Sheet: A1:B4, 4 rows × 2 columns\nSheet Number 2: A1:D7, 7 rows × 4 columns\nSheet3: empty"},
		{"SampleSS.strict.xlsx", "First Sheet: A1:B4, 4 rows × 2 columns\nSheet Number 2: A1:D7, 7 rows × 4 columns\nSheet3: empty"},
	}
	for _, tt := range tests {
		got, err := Sheets(ctx, ooxmltest.Fixture(t, tt.file), documents.DefaultLimits)
		if err != nil || got != tt.want {
			t.Errorf("Sheets(%s) = %q, %v; want %q", tt.file, got, err, tt.want)
		}
	}
}

// TestRead reads sheets as text: references, formulas with their cached
// values (or none), dates with the number stored.
func TestRead(t *testing.T) {
	got, err := Read(ctx, ooxmltest.Fixture(t, "SampleSS.xlsx"), "Sheet Number 2", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := `Sheet "Sheet Number 2" (A1:D7, 7 rows × 4 columns)
A1: Start of 2nd sheet
A2: Sheet 2 row 2
A4: I'm in bold blue, on a yellow background
A6: cb=1 | B6: cb=10 | C6: cb=2 | D6: cb=sum
A7: 1 | B7: 10 | C7: 2 | D7: =SUM(A7:C7) → 13`
	if got != want {
		t.Fatalf("Read(SampleSS.xlsx, Sheet Number 2) =\n%s\nwant\n%s", got, want)
	}
	first, err := Read(ctx, ooxmltest.Fixture(t, "SampleSS.xlsx"), "", documents.DefaultLimits)
	if err != nil || !strings.HasPrefix(first, `Sheet "First Sheet" (A1:B4, 4 rows × 2 columns)`+"\nA1: Test spreadsheet\n") {
		t.Fatalf("Read of the first sheet = %q, %v", first, err)
	}
	dates, err := Read(ctx, ooxmltest.Fixture(t, "DateFormatTests.xlsx"), "Tests", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	ooxmltest.InOrder(t, dates, "A1: Result (expected) | B1: Format | C1: Value | D1: Categories",
		"A2: =TEXT(C2,B2) → 11-10-52 | B2: d-m-y | C2: 11-Oct-1952 14:35:27.000 (stored 17816.607951388887) | D2: Date")
	book, err := Read(ctx, ooxmltest.Fixture(t, "Book1.xlsx"), "Sheet2", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	ooxmltest.InOrder(t, book, "A2: > 23 Inch | B2: 19 | C2: HP | D2: 200",
		"C11: Other | D11: 37 | E11: =B2+B3 → (not calculated) | F11: =IF(B2>0,(D2/B2)*100,0) → (not calculated) | "+
			"G11: =IF(B2>0,(D2/B2)*100,0) → (not calculated) | H11: =IF(D2>0,(F2/D2)*100,0) → (not calculated) | I11: =IF(D2>0,(F2/D2)*100,0) → (not calculated)")

	other, err := Read(ctx, ooxmltest.Fixture(t, "Book1.xlsx"), "sheet2", documents.DefaultLimits)
	if err != nil || other != book {
		t.Fatalf("Read of sheet2 (Sheet2 in another case) = %q, %v; want Sheet2's text", other, err)
	}
	_, err = Read(ctx, ooxmltest.Fixture(t, "Book1.xlsx"), "Sheet9", documents.DefaultLimits)
	ooxmltest.Refusal(t, err, `no sheet "Sheet9"; its sheets are "Sheet1", "Sheet2"`)

	lim := documents.DefaultLimits
	lim.MaxTextChars = 100
	cut, err := Read(ctx, ooxmltest.Fixture(t, "DateFormatTests.xlsx"), "Tests", lim)
	body, note, ok := strings.Cut(cut, "\n…[cut:")
	if err != nil || !ok || utf8.RuneCountInString(body) > 100 || !strings.Contains(note, "limit of 100 characters") {
		t.Fatalf("Read with a 100-character limit = %q, %v", cut, err)
	}
}

// TestText gives every sheet, and the same text for a workbook saved
// strict and transitional.
func TestText(t *testing.T) {
	got, err := Text(ctx, ooxmltest.Fixture(t, "Book1.xlsx"), documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	ooxmltest.InOrder(t, got, `Sheet "Sheet1" (A19:D22, 4 rows × 4 columns)`, "A19: Total: | B19: =SUM(Sheet2!D2,Sheet2!D11) → 237",
		"", `Sheet "Sheet2" (A1:I11, 11 rows × 9 columns)`, "A1: Monitor | C1: Brand | E1: inlineStr")
	plain, err := Text(ctx, ooxmltest.Fixture(t, "SampleSS.xlsx"), documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := Text(ctx, ooxmltest.Fixture(t, "SampleSS.strict.xlsx"), documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if plain != strict || !strings.Contains(plain, "A4: This one is red") {
		t.Fatalf("transitional and strict differ:\n%s\n---\n%s", plain, strict)
	}
	res, err := documents.Call(ctx, "xlsx.text", nil, ooxmltest.Fixture(t, "SampleSS.xlsx"))
	if err != nil || res.Text != plain {
		t.Fatalf("xlsx.text = %+v, %v", res, err)
	}
}

// TestRefusals refuses files that are not workbooks, with the reason,
// before excelize sees them. What any package is refused for (not a zip,
// an encrypted file) is package ooxml's to test.
func TestRefusals(t *testing.T) {
	const types = `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
		`<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/></Types>`
	const rels = `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="ppt/presentation.xml"/></Relationships>`
	deck := ooxmltest.Zip(t, ooxmltest.Member{Name: "[Content_Types].xml", Body: []byte(types)}, ooxmltest.Member{Name: "_rels/.rels", Body: []byte(rels)},
		ooxmltest.Member{Name: "ppt/presentation.xml", Body: []byte(`<p:presentation xmlns:p="x"/>`)})
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty (0 bytes)"},
		{"presentation", deck, "(a presentation)"},
		{"excelize's bad workbook", ooxmltest.Fixture(t, "BadWorkbook.xlsx"), "lists no sheets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := documents.Call(ctx, "xlsx.text", nil, tt.in)
			ooxmltest.Refusal(t, err, tt.want)
			_, err = documents.Call(ctx, "xlsx.set_cell", json.RawMessage(`{"sheet": "S", "cell": "A1", "value": "1"}`), tt.in)
			ooxmltest.Refusal(t, err, tt.want)
		})
	}
}

// TestHostile refuses files built to exhaust a reader, each within its
// limit, in this process and in an isolated child, before excelize sees
// them: check reads every member through, the XML parts and the others
// (a picture no part refers to), and sizes the worksheets' grids. The
// package's own limits (a zip bomb declaring its size, too many members)
// are package ooxml's to test.
func TestHostile(t *testing.T) {
	base, err := Write("S", [][]string{{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	const sheet = "xl/worksheets/sheet1.xml"
	const ns = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"`
	var wide strings.Builder // 2,000 rows whose one cell is in the last column: 32 million cells to excelize
	wide.WriteString(`<worksheet ` + ns + `><sheetData>`)
	for r := 1; r <= 2000; r++ {
		fmt.Fprintf(&wide, `<row r="%d"><c r="XFD%d"><v>1</v></c></row>`, r, r)
	}
	wide.WriteString(`</sheetData></worksheet>`)
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"lying sheet", ooxmltest.WithBomb(t, base, sheet, 1000), "xl/worksheets/sheet1.xml holds more bytes than its zip header declares"},
		{"lying picture", ooxmltest.WithBomb(t, base, "xl/media/image1.png", 1000), "xl/media/image1.png holds more bytes than its zip header declares"},
		{"deep sheet", ooxmltest.WithMember(t, base, sheet, []byte(`<worksheet `+ns+`><sheetData>`+ooxmltest.Nested("row", 10_000)+`</sheetData></worksheet>`)),
			"xl/worksheets/sheet1.xml nests its XML more than 256 elements deep"},
		{"wide grid", ooxmltest.WithMember(t, base, sheet, []byte(wide.String())), "span more than 2097152 cells"},
	}
	ooxmltest.Isolated(t, func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := documents.Call(ctx, "xlsx.read", nil, tt.in)
				ooxmltest.Refusal(t, err, tt.want)
				_, err = documents.Call(ctx, "xlsx.set_cell", json.RawMessage(`{"sheet": "S", "cell": "A1", "value": "1"}`), tt.in)
				ooxmltest.Refusal(t, err, tt.want)
			})
		}
	})
}

// TestWrite writes a workbook, reads it back, and checks it with
// excelize: the sheet, the cells' types, the formula and the request to
// recalculate.
func TestWrite(t *testing.T) {
	rows := [][]string{
		{"Item", "Qty", "Price", "Total"},
		{"Tea", "3", "2.5", "=B2*C2"},
		{"Coffee", "-1", "1e3", "=B3*C3"},
		{"'007", "007", "TRUE", "=SUM(D2:D3)"},
		{"", "", "x|y\nz"},
		{"'=not a formula", "="},
	}
	b, err := Write("Orders", rows)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Write("Orders", rows)
	if err != nil || !bytes.Equal(b, again) {
		t.Fatalf("a second Write made other bytes (%v)", err)
	}
	f := openBytes(t, b)
	if got := f.GetSheetList(); !slices.Equal(got, []string{"Orders"}) {
		t.Fatalf("sheets %v", got)
	}
	// A number's cell has no type attribute: excelize reads it as unset.
	types := map[string]excelize.CellType{
		"A1": excelize.CellTypeSharedString, "B2": excelize.CellTypeUnset, "C2": excelize.CellTypeUnset,
		"C3": excelize.CellTypeUnset, "A4": excelize.CellTypeSharedString, "B4": excelize.CellTypeSharedString,
		"C4": excelize.CellTypeBool, "A6": excelize.CellTypeSharedString, "B6": excelize.CellTypeSharedString,
	}
	for ref, want := range types {
		if got, err := f.GetCellType("Orders", ref); err != nil || got != want {
			t.Errorf("%s is of type %v (%v), want %v", ref, got, err, want)
		}
	}
	for ref, want := range map[string]string{"D2": "B2*C2", "D4": "SUM(D2:D3)", "A6": "", "B6": ""} {
		if got, err := f.GetCellFormula("Orders", ref); err != nil || got != want {
			t.Errorf("%s's formula is %q (%v), want %q", ref, got, err, want)
		}
	}
	if v, _ := f.GetCellValue("Orders", "A4"); v != "007" {
		t.Errorf("A4 = %q, want the text 007", v)
	}
	if !recalcs(t, b) {
		t.Error("the workbook does not ask to be recalculated when opened")
	}
	if v, _ := f.GetCellValue("Orders", "B2", excelize.Options{RawCellValue: true}); v != "3" {
		t.Errorf("B2 holds %q, want the number 3", v)
	}
	got, err := Read(ctx, b, "", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := `Sheet "Orders" (A1:D6, 6 rows × 4 columns)
A1: Item | B1: Qty | C1: Price | D1: Total
A2: Tea | B2: 3 | C2: 2.5 | D2: =B2*C2 → (not calculated)
A3: Coffee | B3: -1 | C3: 1000 | D3: =B3*C3 → (not calculated)
A4: 007 | B4: 007 | C4: TRUE | D4: =SUM(D2:D3) → (not calculated)
C5: x|y\nz
A6: =not a formula | B6: =`
	if got != want {
		t.Fatalf("Read(Write(...)) =\n%s\nwant\n%s", got, want)
	}

	for _, bad := range []struct {
		sheet string
		rows  [][]string
		want  string
	}{
		{"a/b", nil, `the sheet name "a/b" is not allowed`},
		{strings.Repeat("s", 32), nil, "is not allowed"},
		{"S", [][]string{make([]string, excelize.MaxColumns+1)}, ""},
		{"S", [][]string{append(make([]string, excelize.MaxColumns), "x")}, "is outside a sheet"},
	} {
		_, err := Write(bad.sheet, bad.rows)
		if bad.want == "" {
			if err != nil {
				t.Errorf("Write of empty cells past the last column: %v, want none written and no error", err)
			}
			continue
		}
		ooxmltest.Refusal(t, err, bad.want)
	}
}

// TestSetCell sets cells of a real workbook (excelize's Book1: styles,
// two sheets, a formula, charts, a comment, a table, a picture) and
// checks that nothing else moved.
func TestSetCell(t *testing.T) {
	in := ooxmltest.Fixture(t, "Book1.xlsx")
	before := openBytes(t, in)
	out, ref, err := SetCell(ctx, in, "Sheet2", "b2", "99", documents.DefaultLimits)
	if err != nil || ref != "B2" {
		t.Fatalf("SetCell = %q, %v", ref, err)
	}
	after := openBytes(t, out)
	if v, _ := after.GetCellValue("Sheet2", "B2"); v != "99" {
		t.Fatalf("Sheet2!B2 = %q, want 99", v)
	}
	if got, _ := after.GetCellType("Sheet2", "B2"); got != excelize.CellTypeUnset {
		t.Errorf("Sheet2!B2 is of type %v, want a number's (unset)", got)
	}
	if !slices.Equal(before.GetSheetList(), after.GetSheetList()) {
		t.Fatalf("sheets %v, were %v", after.GetSheetList(), before.GetSheetList())
	}
	for _, sheet := range before.GetSheetList() {
		was, _ := before.GetRows(sheet)
		now, _ := after.GetRows(sheet)
		if sheet == "Sheet2" {
			was[1][1] = "99"
		}
		if diff := cmp.Diff(was, now); diff != "" {
			t.Errorf("%s's cells changed (-was +now):\n%s", sheet, diff)
		}
		for r := range was {
			for c := range 10 {
				cell, _ := excelize.CoordinatesToCellName(c+1, r+1)
				s0, _ := before.GetCellStyle(sheet, cell)
				s1, _ := after.GetCellStyle(sheet, cell)
				f0, _ := before.GetCellFormula(sheet, cell)
				f1, _ := after.GetCellFormula(sheet, cell)
				if s0 != s1 || f0 != f1 {
					t.Errorf("%s!%s: style %d → %d, formula %q → %q", sheet, cell, s0, s1, f0, f1)
				}
			}
		}
	}
	if f, _ := after.GetCellFormula("Sheet1", "B19"); f != "SUM(Sheet2!D2,Sheet2!D11)" {
		t.Errorf("Sheet1!B19's formula is %q", f)
	}
	style, err := after.GetStyle(mustStyle(t, after, "Sheet2", "C2"))
	if err != nil || style.Fill.Pattern != 1 || !slices.Equal(style.Fill.Color, []string{"FFFFFF"}) || style.Font.Family != "微软雅黑" {
		t.Errorf("Sheet2!C2's style is %+v (%v), want its fill and font kept", style, err)
	}
	if c0, c1 := comments(t, before), comments(t, after); len(c0) == 0 || !slices.Equal(c0, c1) {
		t.Errorf("comments %q, were %q", c1, c0)
	}
	for _, part := range []string{"xl/charts/chart1.xml", "xl/charts/chart2.xml", "xl/media/image1.jpeg", "xl/tables/table1.xml", "xl/drawings/drawing1.xml"} {
		if !bytes.Equal(ooxmltest.MemberOf(t, in, part), ooxmltest.MemberOf(t, out, part)) {
			t.Errorf("%s changed", part)
		}
	}
	if !recalcs(t, out) || recalcs(t, in) {
		t.Error("the workbook does not ask to be recalculated when opened")
	}

	// The cell set keeps its own style; a formula is a formula.
	out, _, err = SetCell(ctx, in, "Sheet2", "C2", "Huawei", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if s := mustStyle(t, openBytes(t, out), "Sheet2", "C2"); s != mustStyle(t, before, "Sheet2", "C2") {
		t.Errorf("Sheet2!C2's style is %d, was %d", s, mustStyle(t, before, "Sheet2", "C2"))
	}
	out, _, err = SetCell(ctx, in, "Sheet2", "J2", "=B2*2", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(ctx, out, "Sheet2", documents.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	ooxmltest.InOrder(t, got, "A2: > 23 Inch | B2: 19 | C2: HP | D2: 200 | J2: =B2*2 → (not calculated)")

	for _, bad := range []struct{ sheet, cell, want string }{
		{"Sheet9", "A1", `no sheet "Sheet9"; its sheets are "Sheet1", "Sheet2"`},
		{"Sheet1", "2B", `the cell "2B" is not an A1 reference`},
		{"Sheet1", "A0", "not an A1 reference"},
		{"Sheet1", "XFE1", "not an A1 reference"},
	} {
		_, _, err := SetCell(ctx, in, bad.sheet, bad.cell, "1", documents.DefaultLimits)
		ooxmltest.Refusal(t, err, bad.want)
	}
}

// recalcs reports whether the workbook b asks to be recalculated when
// opened.
func recalcs(t *testing.T, b []byte) bool {
	t.Helper()
	return regexp.MustCompile(`<calcPr[^>]* fullCalcOnLoad="(1|true)"`).Match(ooxmltest.MemberOf(t, b, "xl/workbook.xml"))
}

// comments lists Sheet1's comments: cell, author, text.
func comments(t *testing.T, f *excelize.File) []string {
	t.Helper()
	cs, err := f.GetComments("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		var text strings.Builder
		for _, p := range c.Paragraph {
			text.WriteString(p.Text)
		}
		out = append(out, c.Cell+" "+c.Author+": "+text.String())
	}
	return out
}

// mustStyle is the style id of a cell.
func mustStyle(t *testing.T, f *excelize.File, sheet, cell string) int {
	t.Helper()
	s, err := f.GetCellStyle(sheet, cell)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTools runs the four tools against a workspace.
func TestTools(t *testing.T) {
	env, dir := ooxmltest.NewEnv(t, nil)
	out, err := ooxmltest.Invoke(t, WriteTool{}, env, map[string]any{"path": "books/q1.xlsx", "sheet": "Q1", "rows": [][]string{{"Item", "Cost"}, {"Tea", "4"}}})
	if err != nil || !out.Changed || !strings.Contains(out.Content, `wrote books/q1.xlsx`) || !strings.Contains(out.Content, `sheet "Q1", 2 rows × 2 columns`) {
		t.Fatalf("xlsx_write: %+v, %v", out, err)
	}
	out, err = ooxmltest.Invoke(t, WriteTool{}, env, map[string]any{"path": "books/q1.xlsx", "sheet": "Q1", "rows": [][]string{{"Item", "Cost"}, {"Tea", "4"}}})
	if err != nil || out.Changed || !strings.HasPrefix(out.Content, "identical:") {
		t.Fatalf("xlsx_write again: %+v, %v", out, err)
	}
	out, err = ooxmltest.Invoke(t, SheetsTool{}, env, map[string]any{"path": "books/q1.xlsx"})
	if err != nil || out.Content != "Q1: A1:B2, 2 rows × 2 columns" {
		t.Fatalf("xlsx_sheets: %+v, %v", out, err)
	}
	out, err = ooxmltest.Invoke(t, SetCellTool{}, env, map[string]any{"path": "books/q1.xlsx", "sheet": "Q1", "cell": "B3", "value": "=SUM(B2:B2)"})
	if err != nil || !out.Changed || !strings.Contains(out.Content, "Q1!B3 = =SUM(B2:B2) (a formula") {
		t.Fatalf("xlsx_set_cell: %+v, %v", out, err)
	}
	out, err = ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "books/q1.xlsx", "sheet": "Q1"})
	if want := "Sheet \"Q1\" (A1:B3, 3 rows × 2 columns)\nA1: Item | B1: Cost\nA2: Tea | B2: 4\nB3: =SUM(B2:B2) → (not calculated)"; err != nil || out.Content != want {
		t.Fatalf("xlsx_read = %+v, %v; want %q", out, err, want)
	}

	if err := os.WriteFile(filepath.Join(dir, "dates.xlsx"), ooxmltest.Fixture(t, "DateFormatTests.xlsx"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.EntryCap = 700
	out, err = ooxmltest.Invoke(t, ReadTool{}, env, map[string]any{"path": "dates.xlsx", "sheet": "Tests"})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(out.Content); n > 700 || !strings.Contains(out.Content, "…[cut: left out the last") {
		t.Fatalf("xlsx_read with a 700-character cap gave %d characters: %q", n, out.Content)
	}

	bad := []struct {
		tool tools.Tool
		args string
		want string
	}{
		{ReadTool{}, `{"path": "books/q1.xlsx", "range": "A1:B2"}`, `unknown field "range"`},
		{ReadTool{}, `{"sheet": "Q1"}`, "needs the file's path"},
		{ReadTool{}, `{"path": "books/q1.xlsx", "sheet": "Q9"}`, `no sheet "Q9"; its sheets are "Q1"`},
		{SheetsTool{}, `{"path": "books/q1.xlsx", "sheet": "Q1"}`, `unknown field "sheet"`},
		{WriteTool{}, `{"path": "a.xlsx", "sheet": "S"}`, "rows is missing"},
		{WriteTool{}, `{"path": "a.xlsx", "rows": [["x"]]}`, "sheet, the name of the workbook's one sheet, is missing"},
		{WriteTool{}, `{"path": "a.xlsx", "sheet": "S", "rows": [[1, 2]]}`, "cannot unmarshal number"},
		{SetCellTool{}, `{"path": "books/q1.xlsx", "sheet": "Q1", "cell": "A1"}`, "value is missing"},
		{SetCellTool{}, `{"path": "books/q1.xlsx", "sheet": "Q1", "value": "1"}`, "cell, an A1 reference such as B7, is missing"},
		{SetCellTool{}, `{"path": "books/q1.xlsx", "sheet": "Q1", "cell": "A1", "value": "1", "style": "bold"}`, `unknown field "style"`},
	}
	for _, b := range bad {
		_, err := b.tool.Invoke(ctx, env, json.RawMessage(b.args))
		ooxmltest.Refusal(t, err, b.want)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.xlsx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused call wrote a.xlsx (%v)", err)
	}
	_, err = ooxmltest.Invoke(t, SetCellTool{}, env, map[string]any{"path": "none.xlsx", "sheet": "S", "cell": "A1", "value": "1"})
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("xlsx_set_cell on a missing file: %v, want not found", err)
	}
}

// TestToolsGate proves every path is put to the policy: a refused file,
// a link to one, a write refused where the read is allowed.
func TestToolsGate(t *testing.T) {
	judge := func(act, rel string) error {
		if strings.HasPrefix(rel, "secret/") || (act == tools.ActWrite && strings.HasPrefix(rel, "locked/")) {
			return protocol.Errorf(protocol.CodeRefused, "the policy refuses to %s %s", act, rel)
		}
		return nil
	}
	env, dir := ooxmltest.NewEnv(t, judge)
	book := ooxmltest.Fixture(t, "Book1.xlsx")
	for _, p := range []string{"secret/book.xlsx", "locked/book.xlsx"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), book, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("secret/book.xlsx", filepath.Join(dir, "link.xlsx")); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		tool tools.Tool
		args map[string]any
	}{
		{SheetsTool{}, map[string]any{"path": "link.xlsx"}},
		{ReadTool{}, map[string]any{"path": "secret/book.xlsx"}},
		{ReadTool{}, map[string]any{"path": "link.xlsx"}},
		{SetCellTool{}, map[string]any{"path": "link.xlsx", "sheet": "Sheet1", "cell": "A1", "value": "x"}},
		{WriteTool{}, map[string]any{"path": "link.xlsx", "sheet": "S", "rows": [][]string{{"x"}}}},
		{SetCellTool{}, map[string]any{"path": "locked/book.xlsx", "sheet": "Sheet1", "cell": "A1", "value": "x"}},
		{WriteTool{}, map[string]any{"path": "locked/new.xlsx", "sheet": "S", "rows": [][]string{{"x"}}}},
	} {
		_, err := ooxmltest.Invoke(t, call.tool, env, call.args)
		if !errors.Is(err, protocol.ErrRefused) {
			t.Errorf("%s %v: %v, want the policy's refusal", call.tool.Spec().Name, call.args, err)
		}
	}
	for _, p := range []string{"secret/book.xlsx", "locked/book.xlsx"} {
		if got, _ := os.ReadFile(filepath.Join(dir, p)); !bytes.Equal(got, book) {
			t.Errorf("a refused call changed %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "locked/new.xlsx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused xlsx_write made locked/new.xlsx (%v)", err)
	}
}

// TestSpecs checks what the tools declare and what the format registers.
func TestSpecs(t *testing.T) {
	for _, tt := range []struct {
		tool     tools.Tool
		name     string
		act      string
		readOnly bool
		required []string
	}{
		{SheetsTool{}, "xlsx_sheets", "read", true, []string{"path"}},
		{ReadTool{}, "xlsx_read", "read", true, []string{"path"}},
		{WriteTool{}, "xlsx_write", "write", false, []string{"path", "sheet", "rows"}},
		{SetCellTool{}, "xlsx_set_cell", "write", false, []string{"path", "sheet", "cell", "value"}},
	} {
		spec := tt.tool.Spec()
		var schema struct {
			AdditionalProperties *bool          `json:"additionalProperties"`
			Required             []string       `json:"required"`
			Properties           map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s: parameters %s (%v)", tt.name, spec.Parameters, err)
		}
		if spec.Name != tt.name || !slices.Equal(schema.Required, tt.required) {
			t.Errorf("%s: name %q, required %v", tt.name, spec.Name, schema.Required)
		}
		if g, ok := tt.tool.(tools.Gated); !ok || g.Gate() != (protocol.ToolGate{Act: tt.act, Arg: "path"}) {
			t.Errorf("%s: no %s gate on path", tt.name, tt.act)
		}
		if _, ro := tt.tool.(tools.ReadOnly); ro != tt.readOnly {
			t.Errorf("%s: read-only %v, want %v", tt.name, ro, tt.readOnly)
		}
	}
	var found bool
	for _, f := range documents.Formats() {
		if f.Tag == "xlsx" {
			found = f.Text == "xlsx.text" && len(f.Tools) == 4 && f.Extensions[0] == ".xlsx"
		}
	}
	if !found {
		t.Fatalf("documents.Formats() = %+v, want the xlsx format", documents.Formats())
	}
}
