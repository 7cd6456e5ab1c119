//go:build pptx || documents

// Package pptx holds the presentation tool of the builds tagged pptx (or
// documents): pptx_read, the text of a .pptx slide by slide with its
// speaker notes. It registers the operations pptx.read and pptx.text (the
// text verification.document_contains searches) with package documents,
// from init. It writes no presentations.
//
// No approved library reads PresentationML, so the package reads it with
// encoding/xml from the standard library, through package ooxml, which
// opens the zip under the document limits, counting what it decompresses
// and how deep the XML nests.
package pptx

import (
	"context"
	"encoding/json"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

func init() {
	documents.Register("pptx.read", readOp)
	documents.Register("pptx.text", readOp)
	documents.AddFormat(documents.Format{
		Tag:        "pptx",
		Extensions: []string{".pptx"},
		Text:       "pptx.text",
		Tools:      []tools.Tool{ReadTool{}},
	})
}

// readOp is pptx.read and pptx.text: the presentation's text (Read). It
// takes no arguments.
func readOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct{}
	if err := documents.DecodeArgs("pptx.read", args, &a, "{}"); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, documents.Errorf("the file is empty (0 bytes), not a presentation")
	}
	s, err := Read(ctx, in, documents.DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &documents.Result{Text: s}, nil
}

// ReadTool is pptx_read.
type ReadTool struct{}

const readUsage = `{"path": "deck.pptx"}`

// Spec describes pptx_read.
func (ReadTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "pptx_read",
		Description: "Read the text of a PowerPoint presentation (.pptx) in the workspace, slide by slide in presentation order: " +
			`a line "Slide N", the text of its shapes and tables (cells separated by " | "), then its speaker notes after "Notes:". ` +
			"Charts, diagrams and pictures are not shown. Read-only: there is no tool to edit presentations.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{` +
			`"path":{"type":"string","description":"The .pptx file, relative to the workspace root."}}}`),
	}
}

// Gate says a call reads the file its path names.
func (ReadTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: tools.ActRead, Arg: "path"} }

// ReadOnly marks pptx_read as changing nothing.
func (ReadTool) ReadOnly() {}

// Invoke reads the presentation. Errors: bad arguments; those of
// Env.ReadFile (the policy's refusal among them); a file that is not a
// presentation, is damaged or is over the document limits.
func (ReadTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	return documents.ReadPath(ctx, env, "pptx_read", "pptx.read", readUsage, "%s is a presentation with no slides.", raw)
}
