//go:build xlsx || documents

package xlsx

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// pathProp is the JSON Schema of a tool's path argument.
const pathProp = `"path":{"type":"string","description":"The .xlsx file, relative to the workspace root."}`

// valueRules say how a cell's text is taken, for the models.
const valueRules = `A text starting with "=" is a formula ("=SUM(B2:B9)"); a plain number ("42", "-3.5") is stored as a number; ` +
	`TRUE and FALSE as booleans; a leading apostrophe keeps the rest as text ("'007"); anything else is text.`

// SheetsTool is xlsx_sheets.
type SheetsTool struct{}

// Spec describes xlsx_sheets.
func (SheetsTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name:        "xlsx_sheets",
		Description: "List the sheets of an Excel workbook (.xlsx) in the workspace, in order, each with the range its cells span.",
		Parameters:  json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{` + pathProp + `}}`),
	}
}

// Gate says a call reads the file its path names.
func (SheetsTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: tools.ActRead, Arg: "path"} }

// ReadOnly marks xlsx_sheets as changing nothing.
func (SheetsTool) ReadOnly() {}

// Invoke lists the sheets. Errors: bad arguments; those of Env.ReadFile
// (the policy's refusal among them); a file that is not a workbook, is
// damaged or is over the document limits.
func (SheetsTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
	}
	const usage = `{"path": "book.xlsx"}`
	if err := documents.DecodeArgs("xlsx_sheets", raw, &a, usage); err != nil {
		return nil, err
	}
	res, err := readAndCall(ctx, env, "xlsx_sheets", a.Path, usage, "xlsx.sheets", nil)
	if err != nil {
		return nil, err
	}
	return &tools.Output{Content: documents.Capped(env, res.Text)}, nil
}

// ReadTool is xlsx_read.
type ReadTool struct{}

// Spec describes xlsx_read.
func (ReadTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "xlsx_read",
		Description: "Read one sheet of an Excel workbook (.xlsx) in the workspace as text: one line per row, each cell with its " +
			`A1 reference ("A1: Name | B1: 42"); a formula is shown with the value saved in the file ("C2: =A2*B2 → 84"). ` +
			"xlsx_sheets lists the sheets.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{` + pathProp + `,` +
			`"sheet":{"type":"string","description":"The sheet's name; the first sheet when left out."}}}`),
	}
}

// Gate says a call reads the file its path names.
func (ReadTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: tools.ActRead, Arg: "path"} }

// ReadOnly marks xlsx_read as changing nothing.
func (ReadTool) ReadOnly() {}

// Invoke reads the sheet. Errors: bad arguments; those of Env.ReadFile
// (the policy's refusal among them); a file that is not a workbook, is
// damaged or is over the document limits; a sheet it does not hold.
func (ReadTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
		readArgs
	}
	const usage = `{"path": "book.xlsx", "sheet": "Sheet1"} (sheet optional)`
	if err := documents.DecodeArgs("xlsx_read", raw, &a, usage); err != nil {
		return nil, err
	}
	res, err := readAndCall(ctx, env, "xlsx_read", a.Path, usage, "xlsx.read", a.readArgs)
	if err != nil {
		return nil, err
	}
	return &tools.Output{Content: documents.Capped(env, res.Text)}, nil
}

// WriteTool is xlsx_write.
type WriteTool struct{}

// Spec describes xlsx_write.
func (WriteTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "xlsx_write",
		Description: "Create an Excel workbook (.xlsx) in the workspace holding one sheet of the given rows from A1, replacing any " +
			"file at that path (use xlsx_set_cell to change a cell of an existing workbook). " + valueRules,
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path","sheet","rows"],"properties":{` + pathProp + `,` +
			`"sheet":{"type":"string","description":"The sheet's name (1 to 31 characters, none of : \\ / ? * [ ])."},` +
			`"rows":{"type":"array","description":"The rows from the first down, each an array of cell texts from column A.",` +
			`"items":{"type":"array","items":{"type":"string"}}}}}`),
	}
}

// Gate says a call writes the file its path names.
func (WriteTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: tools.ActWrite, Arg: "path"} }

// Invoke writes the workbook. Errors: bad arguments; those of
// Env.WriteFile (the policy's refusal among them).
func (WriteTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
		writeArgs
	}
	const usage = `{"path": "book.xlsx", "sheet": "Sheet1", "rows": [["Item", "Price"], ["Tea", "3.5"]]}`
	if err := documents.DecodeArgs("xlsx_write", raw, &a, usage); err != nil {
		return nil, err
	}
	if a.Path == "" {
		return nil, missingPath("xlsx_write", usage)
	}
	if err := a.writeArgs.check(); err != nil {
		return nil, err
	}
	args, err := json.Marshal(a.writeArgs)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "xlsx_write: %v", err)
	}
	res, err := documents.Call(ctx, "xlsx.write", args, nil)
	if err != nil {
		return nil, err
	}
	return written(env, a.Path, res)
}

// SetCellTool is xlsx_set_cell.
type SetCellTool struct{}

// Spec describes xlsx_set_cell.
func (SetCellTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "xlsx_set_cell",
		Description: "Set one cell of an existing Excel workbook (.xlsx) in the workspace, keeping everything else in the file: " +
			"other cells, formulas, styles (the cell keeps its own) and sheets. " + valueRules +
			" The workbook is marked to recalculate its formulas when next opened.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path","sheet","cell","value"],"properties":{` + pathProp + `,` +
			`"sheet":{"type":"string","description":"The name of the sheet holding the cell."},` +
			`"cell":{"type":"string","description":"The cell's A1 reference, such as B7."},` +
			`"value":{"type":"string","description":"The cell's new text; \"\" empties it."}}}`),
	}
}

// Gate says a call writes the file its path names (it reads it first).
func (SetCellTool) Gate() protocol.ToolGate {
	return protocol.ToolGate{Act: tools.ActWrite, Arg: "path"}
}

// Invoke sets the cell. Errors: bad arguments; those of Env.ReadFile
// and Env.WriteFile (the policy's refusals among them); a file that is
// not a workbook, is damaged or is over the document limits; a sheet it
// does not hold; a cell that is not an A1 reference.
func (SetCellTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
		setCellArgs
	}
	const usage = `{"path": "book.xlsx", "sheet": "Sheet1", "cell": "B2", "value": "42"}`
	if err := documents.DecodeArgs("xlsx_set_cell", raw, &a, usage); err != nil {
		return nil, err
	}
	if a.Path == "" {
		return nil, missingPath("xlsx_set_cell", usage)
	}
	if err := a.setCellArgs.check(); err != nil {
		return nil, err
	}
	res, err := readAndCall(ctx, env, "xlsx_set_cell", a.Path, usage, "xlsx.set_cell", a.setCellArgs)
	if err != nil {
		return nil, err
	}
	return written(env, a.Path, res)
}

// missingPath is the refusal of a call without its path.
func missingPath(tool, usage string) error {
	return protocol.FieldError(protocol.CodeBadArguments, "path", "", "%s needs the file's path; give the arguments as %s", tool, usage)
}

// readAndCall reads the file at path through env and runs the operation
// op on it with args (nil for none).
func readAndCall(ctx context.Context, env *tools.Env, tool, path, usage, op string, args any) (*documents.Result, error) {
	if path == "" {
		return nil, missingPath(tool, usage)
	}
	var raw json.RawMessage
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "%s: %v", tool, err)
		}
		raw = b
	}
	in, err := env.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return documents.Call(ctx, op, raw, in)
}

// written writes res.File to path through env and says what it did.
func written(env *tools.Env, path string, res *documents.Result) (*tools.Output, error) {
	changed, err := env.WriteFile(path, res.File)
	if err != nil {
		return nil, err
	}
	if !changed {
		return &tools.Output{Content: fmt.Sprintf("identical: %s already holds this workbook (%s); the workspace did not change", path, res.Text)}, nil
	}
	return &tools.Output{Content: fmt.Sprintf("wrote %s (%d bytes): %s", path, len(res.File), res.Text), Changed: true}, nil
}
