//go:build pdf || documents

package pdf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// The tools: each reads or writes its file through the tools.Env it is
// given, judged as the act its Gate names on its "path" argument (and
// on every path that path's resolution passes through), and runs its
// operation through documents.Call, bounded by documents.DefaultLimits.
type (
	// ReadTool is pdf_read {path}: the text of each page.
	ReadTool struct{}
	// WriteTool is pdf_write {path, pages}: a new PDF, a page of wrapped
	// text for each item of pages.
	WriteTool struct{}
	// WatermarkTool is pdf_watermark {path, text}: text stamped on every
	// page, in place.
	WatermarkTool struct{}
	// FormFieldsTool is pdf_form_fields {path}: the form's fields.
	FormFieldsTool struct{}
	// FillFormTool is pdf_fill_form {path, fields}: fields filled in
	// place.
	FillFormTool struct{}
)

var (
	_ tools.ReadOnly = ReadTool{}
	_ tools.ReadOnly = FormFieldsTool{}
	_ tools.Gated    = ReadTool{}
	_ tools.Gated    = WriteTool{}
	_ tools.Gated    = WatermarkTool{}
	_ tools.Gated    = FormFieldsTool{}
	_ tools.Gated    = FillFormTool{}
)

const pathDesc = "the PDF file, relative to the workspace root"

// spec builds a tool's spec from its properties' JSON Schema.
func spec(name, desc, props string, required ...string) protocol.ToolSpec {
	req, _ := json.Marshal(required)
	return protocol.ToolSpec{
		Name:        name,
		Description: desc,
		Parameters:  json.RawMessage(`{"type":"object","additionalProperties":false,"required":` + string(req) + `,"properties":{` + props + `}}`),
	}
}

var pathProp = `"path":{"type":"string","description":` + strconv.Quote(pathDesc) + `}`

// Spec describes pdf_read.
func (ReadTool) Spec() protocol.ToolSpec {
	return spec("pdf_read", "Read the text of a PDF file of the workspace, page by page, each under a \"Page N\" line, in reading order as best it can be told. "+
		"A page that is a scanned image has no text to read.", pathProp, "path")
}

// Gate says pdf_read reads its path.
func (ReadTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "read", Arg: "path"} }

// ReadOnly marks pdf_read as changing nothing.
func (ReadTool) ReadOnly() {}

// Invoke reads the PDF's pages. Errors: CodeBadArguments for arguments
// not {"path": "…"} and for a file that is not a readable PDF or is over
// a limit; env.ReadFile's errors; ctx.Err() when abandoned.
func (ReadTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeToolArgs(raw, &a, `pdf_read takes {"path": "reports/q3.pdf"}`); err != nil {
		return nil, err
	}
	return readAndRun(ctx, env, "pdf_read", a.Path, "pdf.read", nil)
}

// Spec describes pdf_form_fields.
func (FormFieldsTool) Spec() protocol.ToolSpec {
	return spec("pdf_form_fields", "List the fillable form fields (AcroForm) of a PDF file of the workspace: each field's full name, type (text, checkbox, radio or choice), current value, "+
		"and the options a choice or radio group takes or the on state a checkbox takes. Use the names with pdf_fill_form.", pathProp, "path")
}

// Gate says pdf_form_fields reads its path.
func (FormFieldsTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "read", Arg: "path"} }

// ReadOnly marks pdf_form_fields as changing nothing.
func (FormFieldsTool) ReadOnly() {}

// Invoke lists the PDF's form fields. Errors: as ReadTool.Invoke's.
func (FormFieldsTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeToolArgs(raw, &a, `pdf_form_fields takes {"path": "forms/application.pdf"}`); err != nil {
		return nil, err
	}
	return readAndRun(ctx, env, "pdf_form_fields", a.Path, "pdf.form_fields", nil)
}

// Spec describes pdf_write.
func (WriteTool) Spec() protocol.ToolSpec {
	return spec("pdf_write", "Write a new PDF file to the workspace (replacing any file at path): one A4 page for each item of pages, its text wrapped to the page in Helvetica "+
		"(11 points, smaller when that is what it takes to fit one page). Line breaks are kept. The text must be in Windows-1252 (Western European letters and common signs); "+
		"other characters are refused.",
		pathProp+`,"pages":{"type":"array","items":{"type":"string"},"description":"the text of each page, in order"}`, "path", "pages")
}

// Gate says pdf_write writes its path.
func (WriteTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "write", Arg: "path"} }

// Invoke makes the PDF and writes it. Errors: CodeBadArguments for
// arguments not {"path": "…", "pages": ["…"]} and the refusals of Write;
// env.WriteFile's errors; ctx.Err() when abandoned.
func (WriteTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	const usage = `pdf_write takes {"path": "out/letter.pdf", "pages": ["the first page's text", "the second's"]}`
	var a struct {
		Path  string   `json:"path"`
		Pages []string `json:"pages"`
	}
	if err := decodeToolArgs(raw, &a, usage); err != nil {
		return nil, err
	}
	if a.Pages == nil {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "pages", "", "the required argument \"pages\" is missing; %s", usage)
	}
	args, _ := json.Marshal(map[string]any{"pages": a.Pages})
	return runAndWrite(ctx, env, "pdf_write", a.Path, "pdf.write", args, nil)
}

// Spec describes pdf_watermark.
func (WatermarkTool) Spec() protocol.ToolSpec {
	return spec("pdf_watermark", "Stamp a line of text (such as DRAFT or CONFIDENTIAL) across every page of a PDF file of the workspace, diagonally in translucent grey, changing the file in place. "+
		"The text must be in Windows-1252.",
		pathProp+`,"text":{"type":"string","description":"the text to stamp, one line"}`, "path", "text")
}

// Gate says pdf_watermark writes its path.
func (WatermarkTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "write", Arg: "path"} }

// Invoke stamps the file. Errors: CodeBadArguments for arguments not
// {"path": "…", "text": "…"}, a file that is not a readable PDF, and the
// refusals of Watermark; env's read and write errors (the read is
// judged too: the file's bytes are read before it is rewritten);
// ctx.Err() when abandoned.
func (WatermarkTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	const usage = `pdf_watermark takes {"path": "reports/q3.pdf", "text": "DRAFT"}`
	var a struct {
		Path string `json:"path"`
		Text string `json:"text"`
	}
	if err := decodeToolArgs(raw, &a, usage); err != nil {
		return nil, err
	}
	args, _ := json.Marshal(map[string]string{"text": a.Text})
	data, err := env.ReadFile(a.Path)
	if err != nil {
		return nil, err
	}
	return runAndWrite(ctx, env, "pdf_watermark", a.Path, "pdf.watermark", args, data)
}

// Spec describes pdf_fill_form.
func (FillFormTool) Spec() protocol.ToolSpec {
	return spec("pdf_fill_form", "Fill form fields of a PDF file of the workspace in place. fields maps each field's full name (as pdf_form_fields lists it) to its value: "+
		"a text field takes any text; a checkbox \"true\", \"false\" or its on state's name; a radio group one of its options; a choice one of its options. "+
		"A name the form does not have is refused.",
		pathProp+`,"fields":{"type":"object","additionalProperties":{"type":["string","boolean"]},"description":"the value of each field to fill, by its full name"}`, "path", "fields")
}

// Gate says pdf_fill_form writes its path.
func (FillFormTool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "write", Arg: "path"} }

// Invoke fills the form. Errors: CodeBadArguments for arguments not
// {"path": "…", "fields": {"name": "value"}} (a value may be a string or
// a boolean) and the refusals of FillForm; env's read and write errors;
// ctx.Err() when abandoned.
func (FillFormTool) Invoke(ctx context.Context, env *tools.Env, raw json.RawMessage) (*tools.Output, error) {
	const usage = `pdf_fill_form takes {"path": "forms/application.pdf", "fields": {"applicant.name": "Ada Lovelace", "agree": "true"}}`
	var a struct {
		Path   string                     `json:"path"`
		Fields map[string]json.RawMessage `json:"fields"`
	}
	if err := decodeToolArgs(raw, &a, usage); err != nil {
		return nil, err
	}
	if len(a.Fields) == 0 {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "fields", "", "no fields to fill were given; %s", usage)
	}
	values := make(map[string]string, len(a.Fields))
	for name, v := range a.Fields {
		var s string
		var b bool
		switch {
		case json.Unmarshal(v, &s) == nil:
			values[name] = s
		case json.Unmarshal(v, &b) == nil:
			values[name] = strconv.FormatBool(b)
		default:
			return nil, protocol.FieldError(protocol.CodeBadArguments, "fields."+name, "", "the value of field %q must be a string or a boolean, not %s; %s", name, v, usage)
		}
	}
	args, _ := json.Marshal(map[string]any{"fields": values})
	data, err := env.ReadFile(a.Path)
	if err != nil {
		return nil, err
	}
	return runAndWrite(ctx, env, "pdf_fill_form", a.Path, "pdf.fill_form", args, data)
}

// decodeToolArgs decodes raw strictly into v, which has a Path field
// that must be set; usage is the right shape, for the message.
func decodeToolArgs(raw json.RawMessage, v any, usage string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return protocol.Errorf(protocol.CodeBadArguments, "the arguments do not fit (%v); %s", err, usage)
	}
	var probe struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(raw, &probe)
	if probe.Path == "" {
		return protocol.FieldError(protocol.CodeBadArguments, "path", "", "the required argument \"path\" is missing or empty; %s", usage)
	}
	return nil
}

// readAndRun reads path, runs op on it and returns its text.
func readAndRun(ctx context.Context, env *tools.Env, tool, path, op string, args json.RawMessage) (*tools.Output, error) {
	data, err := env.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res, err := documents.Call(ctx, op, args, data)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", tool, path, ctx.Err())
		}
		return nil, err
	}
	return &tools.Output{Content: documents.Capped(env, path+": "+res.Text)}, nil
}

// runAndWrite runs op on in and writes the file it makes to path.
func runAndWrite(ctx context.Context, env *tools.Env, tool, path, op string, args json.RawMessage, in []byte) (*tools.Output, error) {
	res, err := documents.Call(ctx, op, args, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", tool, path, ctx.Err())
		}
		return nil, err
	}
	changed, err := env.WriteFile(path, res.File)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("%s: %s; wrote %d bytes", path, res.Text, len(res.File))
	if !changed {
		msg = fmt.Sprintf("%s: %s; the file already held these bytes", path, res.Text)
	}
	return &tools.Output{Content: documents.Capped(env, msg), Changed: changed}, nil
}
