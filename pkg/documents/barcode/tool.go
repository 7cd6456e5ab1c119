//go:build barcode || documents

package barcode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// DecodeTool is barcode_decode: it lists the QR codes and linear
// barcodes in a PNG or JPEG image of the workspace, each with its format
// and text. It reads the file and changes nothing.
type DecodeTool struct{}

var _ tools.ReadOnly = DecodeTool{}
var _ tools.Gated = DecodeTool{}

// decodeUsage is the shape of barcode_decode's arguments, for messages.
const decodeUsage = `barcode_decode takes {"path": "scans/label.png"}: path (a string), a PNG or JPEG file relative to the workspace root`

// Spec describes barcode_decode to the model.
func (DecodeTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name: "barcode_decode",
		Description: "Find and decode the barcodes in a PNG or JPEG image of the workspace: QR codes, EAN-13, EAN-8, UPC-A, UPC-E, Code 128 and Code 39. " +
			"Lists each code found with its format and the text it encodes; an image with no readable code is an error saying so.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],` +
			`"properties":{"path":{"type":"string","description":"the PNG or JPEG image, relative to the workspace root"}}}`),
	}
}

// Gate says a call reads the file its "path" argument names.
func (DecodeTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "read", Arg: "path"} }

// ReadOnly marks barcode_decode as changing nothing.
func (DecodeTool) ReadOnly() {}

// Invoke reads the image through env (judged as a read of path and of
// every path its resolution passes through) and decodes its codes.
// Errors: CodeBadArguments for arguments not of the shape
// {"path": "..."}, for an image that is not PNG or JPEG, damaged, over
// the pixel limit, or holding no readable code; env.ReadFile's errors;
// ctx.Err() when the call is abandoned.
func (DecodeTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, protocol.Errorf(protocol.CodeBadArguments, "the arguments do not fit (%v); %s", err, decodeUsage)
	}
	if a.Path == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "path", "", "the required argument \"path\" is missing or empty; %s", decodeUsage)
	}
	data, err := env.ReadFile(a.Path)
	if err != nil {
		return nil, err
	}
	res, err := documents.Call(ctx, "barcode.decode", nil, data)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("barcode_decode %s: %w", a.Path, ctx.Err())
		}
		return nil, err
	}
	return &tools.Output{Content: documents.Capped(env, a.Path+": "+res.Text)}, nil
}
