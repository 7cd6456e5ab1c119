//go:build docx || documents

// Package docx holds the Word document tools of the builds tagged docx
// (or documents): docx_read, the text of a .docx with its headings and
// tables marked, and docx_write, which makes a new .docx of paragraphs,
// headings and tables. It registers the operations docx.read, docx.write
// and docx.text (the text verification.document_contains searches) with
// package documents, from init.
//
// No approved library reads or writes WordprocessingML, so the package
// does both with archive/zip and encoding/xml from the standard library:
// a streaming reader, over package ooxml, which counts what it
// decompresses and how deep the XML nests, and a writer of a fixed,
// minimal set of parts. It does not
// edit a document in place: docx_write always makes a new one.
package docx

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

func init() {
	documents.Register("docx.read", readOp)
	documents.Register("docx.text", readOp)
	documents.Register("docx.write", writeOp)
	documents.AddFormat(documents.Format{
		Tag:        "docx",
		Extensions: []string{".docx"},
		Text:       "docx.text",
		Tools:      []tools.Tool{ReadTool{}, WriteTool{}},
	})
}

// readOp is docx.read and docx.text: the document's text (Read). It takes
// no arguments.
func readOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct{}
	if err := documents.DecodeArgs("docx.read", args, &a, "{}"); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, documents.Errorf("the file is empty (0 bytes), not a Word document")
	}
	s, err := Read(ctx, in, documents.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &documents.Result{Text: s}, nil
}

// writeArgs are docx.write's arguments.
type writeArgs struct {
	Paragraphs []json.RawMessage `json:"paragraphs"`
}

// writeOp is docx.write: a new document of the paragraphs (Write); it
// reads no file.
func writeOp(_ context.Context, args json.RawMessage, _ []byte) (*documents.Result, error) {
	var a writeArgs
	if err := documents.DecodeArgs("docx.write", args, &a, `{"paragraphs": [...]}`); err != nil {
		return nil, err
	}
	blocks, err := ParseBlocks(a.Paragraphs)
	if err != nil {
		return nil, err
	}
	b, err := Write(blocks)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "docx.write: %v", err)
	}
	return &documents.Result{File: b, Text: summary(blocks)}, nil
}

// summary says what a written document holds.
func summary(blocks []Block) string {
	var paras, heads, tables int
	for _, b := range blocks {
		switch {
		case b.Table != nil:
			tables++
		case b.Level > 0:
			heads++
		default:
			paras++
		}
	}
	return fmt.Sprintf("%d paragraphs, %d headings, %d tables", paras, heads, tables)
}

// ReadTool is docx_read.
type ReadTool struct{}

const readUsage = `{"path": "report.docx"}`

// Spec describes docx_read.
func (ReadTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "docx_read",
		Description: "Read the text of a Word document (.docx) in the workspace, in document order: one line per paragraph, " +
			`headings marked "# " to "###### " by level, list items "- ", and each table row as its cells separated by " | ". ` +
			"Headers, footers, footnotes and comments are not shown.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{` +
			`"path":{"type":"string","description":"The .docx file, relative to the workspace root."}}}`),
	}
}

// Gate says a call reads the file its path names.
func (ReadTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: tools.ActRead, Arg: "path"} }

// ReadOnly marks docx_read as changing nothing.
func (ReadTool) ReadOnly() {}

// Invoke reads the document. Errors: bad arguments; those of
// Env.ReadFile (the policy's refusal among them); a file that is not a
// Word document, is damaged or is over the document limits.
func (ReadTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	return documents.ReadPath(ctx, env, "docx_read", "docx.read", readUsage, "%s is a Word document with no text in its body.", raw)
}

// WriteTool is docx_write.
type WriteTool struct{}

const writeUsage = `{"path": "report.docx", "paragraphs": ["Some text.", {"heading": "Results", "level": 2}, {"table": [["a", "b"], ["c", "d"]]}]}`

// Spec describes docx_write.
func (WriteTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "docx_write",
		Description: "Create a new Word document (.docx) in the workspace, replacing any file at that path: it does not edit an " +
			"existing document in place (read it with docx_read and write the whole new document). Each item of paragraphs is " +
			`a string (a plain paragraph), {"heading": "text", "level": 1-6} or {"table": [["a","b"],["c","d"]]} (rows of cells). ` +
			`In a text "\n" is a line break and "\t" a tab.`,
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path","paragraphs"],"properties":{` +
			`"path":{"type":"string","description":"The .docx file to create, relative to the workspace root."},` +
			`"paragraphs":{"type":"array","description":"The document's content in order.","items":{"anyOf":[` +
			`{"type":"string","description":"A plain paragraph."},` +
			`{"type":"object","additionalProperties":false,"required":["heading"],"properties":{` +
			`"heading":{"type":"string","description":"The heading's text."},` +
			`"level":{"type":"integer","minimum":1,"maximum":6,"description":"1 for a top-level heading (the default) to 6."}}},` +
			`{"type":"object","additionalProperties":false,"required":["table"],"properties":{` +
			`"table":{"type":"array","description":"The rows, each an array of cell texts.","items":{"type":"array","items":{"type":"string"}}}}}` +
			`]}}}}`),
	}
}

// Gate says a call writes the file its path names.
func (WriteTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: tools.ActWrite, Arg: "path"} }

// Invoke writes the document. Errors: bad arguments (the item at fault
// named); those of Env.WriteFile (the policy's refusal among them).
func (WriteTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
		writeArgs
	}
	if err := documents.DecodeArgs("docx_write", raw, &a, writeUsage); err != nil {
		return nil, err
	}
	if a.Path == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "path", "", "docx_write needs the file's path; give the arguments as %s", writeUsage)
	}
	if _, err := ParseBlocks(a.Paragraphs); err != nil {
		return nil, err
	}
	args, err := json.Marshal(a.writeArgs)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "docx_write: %v", err)
	}
	res, err := documents.Call(ctx, "docx.write", args, nil)
	if err != nil {
		return nil, err
	}
	changed, err := env.WriteFile(a.Path, res.File)
	if err != nil {
		return nil, err
	}
	if !changed {
		return &tools.Output{Content: fmt.Sprintf("identical: %s already holds this document (%s); the workspace did not change", a.Path, res.Text)}, nil
	}
	return &tools.Output{Content: fmt.Sprintf("wrote %s (%d bytes): %s", a.Path, len(res.File), res.Text), Changed: true}, nil
}
