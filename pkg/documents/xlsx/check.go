//go:build xlsx || documents

package xlsx

import (
	"bytes"
	"context"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/ooxml"
)

// cellBytes is about what excelize holds in memory for one cell of a
// worksheet it has loaded, which it fills out into a dense grid: every row
// up to its last cell, every row up to the last. A workbook whose grids
// would pass MaxExpandedBytes at that rate is refused before excelize
// loads it.
const cellBytes = 128

// book is what check learnt of a workbook: the cells of each worksheet,
// by sheet name, that hold a formula (excelize reads a formula only from
// a cell it is asked about, and the grid it returns does not say which
// empty cells are formulas not yet calculated).
type book struct {
	formulas map[string]map[string]bool // sheet name → A1 references
}

// open checks in under lim and opens it with excelize. Before excelize
// sees a byte it refuses, with a documents.Errorf message naming the
// limit: a file that is not a zip or is over the entry or expanded-size
// limit (declared, then counted while every member is read through), a
// package whose main part is not a workbook, an XML part nested deeper
// than lim.MaxXMLDepth, and worksheets whose cell grids are too large
// (cellBytes). excelize's own unzip limits are set from lim too, so that
// it never spills a part to a temporary file.
func open(ctx context.Context, in []byte, lim documents.Limits) (*excelize.File, *book, error) {
	if len(in) == 0 {
		return nil, nil, documents.Errorf("the file is empty (0 bytes), not a workbook")
	}
	bk, err := check(ctx, in, lim)
	if err != nil {
		return nil, nil, err
	}
	f, err := excelize.OpenReader(bytes.NewReader(in), excelize.Options{
		UnzipSizeLimit:    lim.MaxExpandedBytes,
		UnzipXMLSizeLimit: lim.MaxExpandedBytes,
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, nil, documents.Errorf("the workbook cannot be read (%v); it is damaged or not an .xlsx file", err)
	}
	if len(f.GetSheetList()) == 0 {
		f.Close()
		return nil, nil, documents.Errorf("the workbook lists no sheets; it is damaged or not an .xlsx file")
	}
	return f, bk, nil
}

// check reads every member of the package in through, under lim, and
// returns what it learnt of the workbook.
func check(ctx context.Context, in []byte, lim documents.Limits) (*book, error) {
	p, err := ooxml.Open(ctx, in, "an Excel workbook (.xlsx)", lim)
	if err != nil {
		return nil, err
	}
	main, err := p.MainPart("spreadsheetml", "ms-excel")
	if err != nil {
		return nil, err
	}
	maxCells := lim.MaxExpandedBytes / cellBytes
	var cells int64
	formulas := map[string]map[string]bool{} // by part name
	for _, name := range p.Names() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch ext := path.Ext(name); {
		case ext == ".xml" || ext == ".rels" || ext == ".vml":
			sheet := strings.HasPrefix(name, "xl/worksheets/")
			n, refs, err := scanXML(p, name, sheet)
			if err != nil {
				return nil, err
			}
			if cells += n; cells > maxCells {
				return nil, documents.Errorf("the workbook's worksheets span more than %d cells (counting every cell up to the last of its row, and every row up to the last, as the reader holds them), over the document tools' limit; it is built to exhaust a reader, or too large: work on a smaller workbook", maxCells)
			}
			if sheet {
				formulas[name] = refs
			}
		default:
			rc, err := p.Part(name)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	parts, err := sheetParts(p, main)
	if err != nil {
		return nil, err
	}
	bk := &book{formulas: map[string]map[string]bool{}}
	for sheet, part := range parts {
		bk.formulas[sheet] = formulas[strings.ToLower(part)]
	}
	return bk, nil
}

// sheetParts returns the part of each sheet of the workbook part main,
// by sheet name.
func sheetParts(p *ooxml.Package, main string) (map[string]string, error) {
	byID, _, err := p.Rels(main)
	if err != nil {
		return nil, err
	}
	x, err := p.XML(main)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	parts := map[string]string{}
	for {
		e, err := x.NextStart()
		if err == io.EOF {
			return parts, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Name.Local == "sheet" {
			if r, ok := byID[ooxml.RelAttr(e, "id")]; ok {
				parts[ooxml.Attr(e, "name")] = r.Target
			}
		}
	}
}

// scanXML reads the XML part name through, refusing it when it nests too
// deep. Of a worksheet it returns the size of the grid excelize would
// fill out for it (the cells of each row up to its last, and a cell for
// each row up to the last) and the cells holding a formula.
func scanXML(p *ooxml.Package, name string, sheet bool) (int64, map[string]bool, error) {
	x, err := p.XML(name)
	if err != nil {
		return 0, nil, err
	}
	defer x.Close()
	var (
		grid               int64
		lastRow, row, cols int
		cell               string
		cellDepth          int
		refs               map[string]bool
	)
	for {
		e, err := x.NextStart()
		if err == io.EOF {
			return grid + int64(cols) + int64(lastRow), refs, nil
		}
		if err != nil {
			return 0, nil, err
		}
		if !sheet {
			continue
		}
		switch e.Name.Local {
		case "row":
			grid += int64(cols)
			cols = 0
			row++
			if n, err := strconv.Atoi(ooxml.Attr(e, "r")); err == nil && n > 0 {
				row = n
			}
			lastRow = max(lastRow, row)
		case "c":
			cols++
			if c, r, err := excelize.CellNameToCoordinates(ooxml.Attr(e, "r")); err == nil {
				cols = max(cols, c)
				cell, _ = excelize.CoordinatesToCellName(c, r)
			} else {
				cell, _ = excelize.CoordinatesToCellName(cols, max(row, 1))
			}
			cellDepth = x.Depth()
		case "f":
			if x.Depth() == cellDepth+1 && cell != "" {
				if refs == nil {
					refs = map[string]bool{}
				}
				refs[cell] = true
			}
		}
	}
}
