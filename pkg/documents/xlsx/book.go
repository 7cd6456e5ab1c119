//go:build xlsx || documents

package xlsx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml"
)

// Sheets lists the workbook in's sheets in their order, a line each: the
// name and the range its cells with content span ("Sheet1: A1:D12, 12
// rows × 4 columns"), "empty", or that it is a chart sheet. Errors are
// those of opening the workbook (see Read).
func Sheets(ctx context.Context, in []byte, lim documents.Limits) (string, error) {
	f, bk, err := open(ctx, in, lim)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	for _, name := range f.GetSheetList() {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		g, err := load(f, name, bk.formulas[name], false)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s: %s\n", name, g.describe())
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Read returns the sheet called sheet of the workbook in ("" for the
// first; a name matches in any case, as in Excel) as text: a line naming it and its range, then a line per row
// that has content, each cell with its A1 reference ("A1: Name | B1:
// 42"). A formula is shown with the value cached in the file ("C2:
// =A2*B2 → 84"), or "(not calculated)" when the file holds none; a value
// whose display differs from the number stored (a date, a rounded
// figure) is followed by the stored one. The text stops at
// lim.MaxTextChars characters, saying so.
//
// Errors are documents.Errorf refusals: a file that is not a zip or is
// over one of lim's bounds (open), a package that is not a workbook, one
// excelize cannot read, and a sheet of that name that does not exist
// (the message lists the sheets) or is a chart sheet.
func Read(ctx context.Context, in []byte, sheet string, lim documents.Limits) (string, error) {
	f, bk, err := open(ctx, in, lim)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if sheet == "" {
		sheet = f.GetSheetName(0)
	}
	if sheet, err = sheetName(f, sheet); err != nil {
		return "", err
	}
	out := ooxml.NewText(lim.MaxTextChars)
	if err := render(ctx, f, sheet, bk.formulas[sheet], out); err != nil {
		return "", err
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// Text returns every sheet of the workbook in as Read shows it, one
// after another, up to lim.MaxTextChars characters. Errors are those of
// Read.
func Text(ctx context.Context, in []byte, lim documents.Limits) (string, error) {
	f, bk, err := open(ctx, in, lim)
	if err != nil {
		return "", err
	}
	defer f.Close()
	out := ooxml.NewText(lim.MaxTextChars)
	for i, name := range f.GetSheetList() {
		if i > 0 && !out.Line("") {
			break
		}
		if err := render(ctx, f, name, bk.formulas[name], out); err != nil {
			return "", err
		}
		if out.Full() {
			break
		}
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// sheetName returns the name of the sheet of f called sheet, as the
// workbook spells it (sheet names match whatever their case, as in
// Excel), or a refusal naming the sheets it does hold.
func sheetName(f *excelize.File, sheet string) (string, error) {
	for _, name := range f.GetSheetList() {
		if strings.EqualFold(name, sheet) {
			return name, nil
		}
	}
	return "", documents.Errorf("the workbook has no sheet %q; its sheets are %s", sheet, quoteList(f.GetSheetList()))
}

// quoteList is names quoted and joined by commas.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// grid is one sheet's cells as excelize reads them: the displayed values
// and the stored ones, row by row, and the cells holding a formula.
type grid struct {
	chart     bool
	shown     [][]string
	raw       [][]string
	formulas  map[string]bool
	top, left int // the first row and column with content, from 1
	bottom    int
	right     int
}

// load reads the sheet name of f, whose cells formulas hold a formula;
// withRaw also reads the stored values.
func load(f *excelize.File, name string, formulas map[string]bool, withRaw bool) (*grid, error) {
	g := &grid{formulas: formulas}
	shown, err := f.GetRows(name)
	if err != nil {
		var nw excelize.ErrSheetNotExist
		if errors.As(err, &nw) {
			return nil, documents.Errorf("the workbook has no sheet %q; its sheets are %s", name, quoteList(f.GetSheetList()))
		}
		if strings.Contains(err.Error(), "is not a worksheet") {
			g.chart = true
			return g, nil
		}
		return nil, documents.Errorf("the sheet %q cannot be read (%v); the workbook is damaged", name, err)
	}
	g.shown = shown
	if withRaw {
		if g.raw, err = f.GetRows(name, excelize.Options{RawCellValue: true}); err != nil {
			return nil, documents.Errorf("the sheet %q cannot be read (%v); the workbook is damaged", name, err)
		}
	}
	for r, row := range shown {
		for c, v := range row {
			if v == "" && !g.isFormula(r, c) {
				continue
			}
			if g.top == 0 || r+1 < g.top {
				g.top = r + 1
			}
			if g.left == 0 || c+1 < g.left {
				g.left = c + 1
			}
			g.bottom, g.right = max(g.bottom, r+1), max(g.right, c+1)
		}
	}
	return g, nil
}

// isFormula reports whether the cell at row r, column c (from 0) holds a
// formula.
func (g *grid) isFormula(r, c int) bool {
	if len(g.formulas) == 0 {
		return false
	}
	ref, err := excelize.CoordinatesToCellName(c+1, r+1)
	return err == nil && g.formulas[ref]
}

// describe says what range the sheet's content spans.
func (g *grid) describe() string {
	switch {
	case g.chart:
		return "a chart sheet (no cells)"
	case g.top == 0:
		return "empty"
	}
	from, _ := excelize.CoordinatesToCellName(g.left, g.top)
	to, _ := excelize.CoordinatesToCellName(g.right, g.bottom)
	return fmt.Sprintf("%s:%s, %d rows × %d columns", from, to, g.bottom-g.top+1, g.right-g.left+1)
}

// render writes the sheet name of f, whose cells formulas hold a
// formula, to out, as Read describes.
func render(ctx context.Context, f *excelize.File, name string, formulas map[string]bool, out *ooxml.Text) error {
	g, err := load(f, name, formulas, true)
	if err != nil {
		return err
	}
	if !out.Line(fmt.Sprintf("Sheet %q (%s)", name, g.describe())) {
		return nil
	}
	var cells []string
	for r, row := range g.shown {
		if err := ctx.Err(); err != nil {
			return err
		}
		cells = cells[:0]
		for c, v := range row {
			isFormula := g.isFormula(r, c)
			if v == "" && !isFormula {
				continue
			}
			ref, err := excelize.CoordinatesToCellName(c+1, r+1)
			if err != nil {
				return documents.Errorf("the sheet %q has a cell outside the grid (%v); the workbook is damaged", name, err)
			}
			formula := ""
			if isFormula {
				if formula, err = f.GetCellFormula(name, ref); err != nil {
					return documents.Errorf("the sheet %q cannot be read at %s (%v); the workbook is damaged", name, ref, err)
				}
			}
			cells = append(cells, ref+": "+cellText(v, g.rawAt(r, c), formula))
		}
		if len(cells) > 0 && !out.Line(strings.Join(cells, " | ")) {
			return nil
		}
	}
	return nil
}

// rawAt is the stored value at row r, column c (from 0).
func (g *grid) rawAt(r, c int) string {
	if r < len(g.raw) && c < len(g.raw[r]) {
		return g.raw[r][c]
	}
	return ""
}

// cellText shows one cell: its displayed value, the stored one when it
// differs, and its formula.
func cellText(shown, raw, formula string) string {
	s := oneLine(shown)
	boolean := (shown == "TRUE" && raw == "1") || (shown == "FALSE" && raw == "0")
	if raw != shown && raw != "" && !boolean {
		s += " (stored " + oneLine(raw) + ")"
	}
	if formula == "" {
		return s
	}
	if shown == "" {
		s = "(not calculated)"
	}
	return "=" + oneLine(formula) + " → " + s
}

// oneLine keeps a cell's text on its row's line.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\n`).Replace(s)
}

// Write makes a new workbook of one sheet called sheet holding rows, from
// A1, each cell's text taken as SetCell takes a value. When any cell is a
// formula the workbook asks the program that opens it to calculate
// every formula, since excelize stores none of their values. Its bytes
// are the same for the same rows. Errors are documents.Errorf refusals:
// a sheet name Excel does not allow (more than 31 characters, one of
// : \ / ? * [ ], empty), more rows or columns than a sheet holds.
func Write(sheet string, rows [][]string) ([]byte, error) {
	f := excelize.NewFile()
	defer f.Close()
	if sheet != "Sheet1" {
		if err := f.SetSheetName("Sheet1", sheet); err != nil {
			return nil, documents.Errorf("the sheet name %q is not allowed (%v); a name has 1 to 31 characters and none of : \\ / ? * [ ]", sheet, err)
		}
		if f.GetSheetName(0) != sheet {
			return nil, documents.Errorf("the sheet name %q is not allowed; a name has 1 to 31 characters and none of : \\ / ? * [ ]", sheet)
		}
	}
	formulas := false
	for r, row := range rows {
		for c, v := range row {
			if v == "" {
				continue
			}
			ref, err := excelize.CoordinatesToCellName(c+1, r+1)
			if err != nil {
				return nil, documents.Errorf("row %d, column %d is outside a sheet (%v); a sheet holds %d rows of %d columns", r+1, c+1, err, excelize.TotalRows, excelize.MaxColumns)
			}
			isFormula, err := setValue(f, sheet, ref, v)
			if err != nil {
				return nil, err
			}
			formulas = formulas || isFormula
		}
	}
	if formulas {
		if err := recalcOnOpen(f); err != nil {
			return nil, err
		}
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		return nil, fmt.Errorf("write the workbook: %w", err)
	}
	return buf.Bytes(), nil
}

// SetCell sets the cell (an A1 reference) of the sheet called sheet of the
// workbook in to value, and returns the workbook's new bytes, every other
// cell, formula, style, sheet and part as excelize kept them, and the
// cell's reference as written ("B2" for "b2"). The value is taken as a
// spreadsheet program takes typed text: "=..." is a formula (without its
// "="), a plain decimal number ("42", "-3.5", "1e6") a number, TRUE and
// FALSE booleans, "" an empty cell (keeping its style), anything else
// text; a leading apostrophe makes the rest text whatever it holds
// ("'007", "'=not a formula"). Since the cells that depend on this one keep their old cached
// values, the workbook asks the program that opens it to calculate every
// formula. Errors are those of opening the workbook (see Read), and
// documents.Errorf refusals of a sheet that does not exist or is a chart
// sheet, and of a cell that is not an A1 reference.
func SetCell(ctx context.Context, in []byte, sheet, cell, value string, lim documents.Limits) ([]byte, string, error) {
	f, _, err := open(ctx, in, lim)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if sheet, err = sheetName(f, sheet); err != nil {
		return nil, "", err
	}
	if _, err := f.GetRows(sheet); err != nil && strings.Contains(err.Error(), "is not a worksheet") {
		return nil, "", documents.Errorf("%q is a chart sheet, which has no cells; name a worksheet: %s", sheet, quoteList(f.GetSheetList()))
	}
	col, row, err := excelize.CellNameToCoordinates(cell)
	if err != nil {
		return nil, "", documents.Errorf("the cell %q is not an A1 reference; name it by column letters and row number, such as B7", cell)
	}
	ref, _ := excelize.CoordinatesToCellName(col, row)
	if _, err := setValue(f, sheet, ref, value); err != nil {
		return nil, "", err
	}
	if err := recalcOnOpen(f); err != nil {
		return nil, "", err
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		return nil, "", fmt.Errorf("write the workbook: %w", err)
	}
	return buf.Bytes(), ref, nil
}

// number is a plain decimal number as a person types it: no leading
// zeros (so "007" stays text), no thousands separators.
var number = regexp.MustCompile(`^[+-]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// setValue sets the cell ref of sheet to value as SetCell describes, and
// reports whether it wrote a formula. Errors are documents.Errorf
// refusals from excelize's checks, such as a text over the 32,767
// characters a cell holds.
func setValue(f *excelize.File, sheet, ref, value string) (bool, error) {
	var err error
	formula := false
	switch {
	case strings.HasPrefix(value, "'"):
		err = f.SetCellStr(sheet, ref, value[1:])
	case len(value) > 1 && value[0] == '=':
		formula = true
		err = f.SetCellFormula(sheet, ref, value[1:])
	case value == "":
		err = f.SetCellDefault(sheet, ref, "")
	case value == "TRUE" || value == "FALSE":
		err = f.SetCellBool(sheet, ref, value == "TRUE")
	case number.MatchString(value):
		err = setNumber(f, sheet, ref, value)
	default:
		err = f.SetCellStr(sheet, ref, value)
	}
	if err != nil {
		return false, documents.Errorf("%s!%s cannot be set to %q (%v)", sheet, ref, value, err)
	}
	return formula, nil
}

// setNumber writes a number matched by number: an integer as an integer,
// anything else as a float written in its shortest form.
func setNumber(f *excelize.File, sheet, ref, value string) error {
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		return f.SetCellInt(sheet, ref, n)
	}
	x, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsInf(x, 0) {
		return f.SetCellStr(sheet, ref, value)
	}
	return f.SetCellFloat(sheet, ref, x, -1, 64)
}

// recalcOnOpen asks the program that opens the workbook to calculate
// every formula.
func recalcOnOpen(f *excelize.File) error {
	on := true
	if err := f.SetCalcProps(&excelize.CalcPropsOptions{FullCalcOnLoad: &on}); err != nil {
		return fmt.Errorf("set the workbook's calculation properties: %w", err)
	}
	return nil
}
