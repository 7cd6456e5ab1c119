//go:build xlsx || documents

// Package xlsx holds the spreadsheet tools of the builds tagged xlsx (or
// documents): xlsx_sheets, xlsx_read, xlsx_write and xlsx_set_cell. It
// registers the operations xlsx.sheets, xlsx.read, xlsx.write,
// xlsx.set_cell and xlsx.text (the text verification.document_contains
// searches) with package documents, from init.
//
// It reads and writes workbooks with github.com/xuri/excelize/v2, which
// keeps the parts of a workbook it does not model (styles, charts, other
// sheets) when it saves one, so xlsx_set_cell changes one cell and
// nothing else. Before excelize sees a file the package reads every
// member of its zip itself, through package ooxml, under the document
// limits: the members' count and sizes, declared and real, the depth of
// each XML part, and the size of the cell grid excelize would build (see
// open).
package xlsx

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

func init() {
	documents.Register("xlsx.sheets", sheetsOp)
	documents.Register("xlsx.read", readOp)
	documents.Register("xlsx.text", textOp)
	documents.Register("xlsx.write", writeOp)
	documents.Register("xlsx.set_cell", setCellOp)
	documents.AddFormat(documents.Format{
		Tag:        "xlsx",
		Extensions: []string{".xlsx"},
		Text:       "xlsx.text",
		Tools:      []tools.Tool{SheetsTool{}, ReadTool{}, WriteTool{}, SetCellTool{}},
	})
}

// sheetsOp is xlsx.sheets (Sheets); it takes no arguments.
func sheetsOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct{}
	if err := documents.DecodeArgs("xlsx.sheets", args, &a, "{}"); err != nil {
		return nil, err
	}
	s, err := Sheets(ctx, in, documents.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &documents.Result{Text: s}, nil
}

// readArgs are xlsx.read's arguments.
type readArgs struct {
	Sheet string `json:"sheet,omitempty"`
}

// readOp is xlsx.read (Read).
func readOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a readArgs
	if err := documents.DecodeArgs("xlsx.read", args, &a, `{"sheet": "Sheet1"}`); err != nil {
		return nil, err
	}
	s, err := Read(ctx, in, a.Sheet, documents.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &documents.Result{Text: s}, nil
}

// textOp is xlsx.text (Text); it takes no arguments.
func textOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct{}
	if err := documents.DecodeArgs("xlsx.text", args, &a, "{}"); err != nil {
		return nil, err
	}
	s, err := Text(ctx, in, documents.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &documents.Result{Text: s}, nil
}

// writeArgs are xlsx.write's arguments.
type writeArgs struct {
	Sheet string     `json:"sheet"`
	Rows  [][]string `json:"rows"`
}

// writeOp is xlsx.write (Write); it reads no file.
func writeOp(_ context.Context, args json.RawMessage, _ []byte) (*documents.Result, error) {
	var a writeArgs
	if err := documents.DecodeArgs("xlsx.write", args, &a, `{"sheet": "Sheet1", "rows": [["a", "b"]]}`); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	b, err := Write(a.Sheet, a.Rows)
	if err != nil {
		return nil, err
	}
	cols := 0
	for _, r := range a.Rows {
		cols = max(cols, len(r))
	}
	return &documents.Result{File: b, Text: fmt.Sprintf("sheet %q, %d rows × %d columns", a.Sheet, len(a.Rows), cols)}, nil
}

// check refuses what Write cannot make sense of.
func (a writeArgs) check() error {
	if a.Sheet == "" {
		return protocol.FieldError(protocol.CodeBadArguments, "sheet", "", "sheet, the name of the workbook's one sheet, is missing; give it, such as \"Sheet1\"")
	}
	if a.Rows == nil {
		return protocol.FieldError(protocol.CodeBadArguments, "rows", "", "rows is missing; give the sheet's rows from A1 down, each an array of cell texts, such as [[\"Item\", \"Price\"], [\"Tea\", \"3.5\"]]")
	}
	return nil
}

// setCellArgs are xlsx.set_cell's arguments.
type setCellArgs struct {
	Sheet string  `json:"sheet"`
	Cell  string  `json:"cell"`
	Value *string `json:"value"`
}

// check refuses missing arguments.
func (a setCellArgs) check() error {
	switch {
	case a.Sheet == "":
		return protocol.FieldError(protocol.CodeBadArguments, "sheet", "", "sheet, the name of the sheet holding the cell, is missing")
	case a.Cell == "":
		return protocol.FieldError(protocol.CodeBadArguments, "cell", "", "cell, an A1 reference such as B7, is missing")
	case a.Value == nil:
		return protocol.FieldError(protocol.CodeBadArguments, "value", "", "value is missing; give the cell's new text (\"\" empties it)")
	}
	return nil
}

// setCellOp is xlsx.set_cell (SetCell).
func setCellOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a setCellArgs
	if err := documents.DecodeArgs("xlsx.set_cell", args, &a, `{"sheet": "Sheet1", "cell": "B2", "value": "42"}`); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	b, ref, err := SetCell(ctx, in, a.Sheet, a.Cell, *a.Value, documents.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &documents.Result{File: b, Text: fmt.Sprintf("%s!%s = %s", a.Sheet, ref, describeValue(*a.Value))}, nil
}

// describeValue says how SetCell took value.
func describeValue(v string) string {
	switch {
	case len(v) > 0 && v[0] == '\'':
		return fmt.Sprintf("%q (text)", v[1:])
	case len(v) > 1 && v[0] == '=':
		return v + " (a formula; it is calculated when the workbook is next opened in a spreadsheet program)"
	case v == "":
		return "empty"
	case v == "TRUE" || v == "FALSE":
		return v + " (a boolean)"
	case number.MatchString(v):
		return v + " (a number)"
	}
	return fmt.Sprintf("%q (text)", v)
}
