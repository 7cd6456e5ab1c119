//go:build pdf || documents

package pdf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/ioharness/harness/pkg/documents"
)

// Pages returns the text of each page of the PDF in, in order; a page
// with no text is "". Errors: those of open; a page whose forms nest
// past MaxDepth; ctx.Err().
func Pages(ctx context.Context, in []byte) ([]string, error) {
	d, err := open(ctx, in)
	if err != nil {
		return nil, err
	}
	return d.pagesText(ctx)
}

func (d *doc) pagesText(ctx context.Context) ([]string, error) {
	fonts := map[int]*font{}
	out := make([]string, len(d.pages))
	total := 0
	for i, p := range d.pages {
		t, err := d.pageText(ctx, p, fonts)
		if err != nil {
			return nil, err
		}
		out[i] = t
		total += len(t)
		if total > 4*documents.DefaultLimits.MaxTextChars {
			break // more than will be returned: the rest is not extracted
		}
	}
	return out, nil
}

// Text returns what pdf.text returns: every page's text under a "Page
// N" line, then, when the PDF has a form, a "Form fields" line and a
// "name: value" line for each field, cut at MaxTextChars characters
// saying so. A PDF with neither text nor fields is an error saying so,
// never "". Errors: those of Pages and FormFields.
func Text(ctx context.Context, in []byte) (string, error) {
	d, err := open(ctx, in)
	if err != nil {
		return "", err
	}
	pages, err := d.pagesText(ctx)
	if err != nil {
		return "", err
	}
	fields, err := d.fields(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writePages(&b, pages)
	if len(fields) > 0 {
		b.WriteString("Form fields\n")
		for _, f := range fields {
			fmt.Fprintf(&b, "%s: %s\n", f.Name, oneLine(f.Value))
		}
	}
	if !hasText(pages) && len(fields) == 0 {
		return "", noTextError(len(pages))
	}
	return capText(b.String()), nil
}

// noTextError is the refusal of a PDF with no text to extract.
func noTextError(pages int) error {
	return documents.Errorf("the PDF's %d page(s) hold no extractable text and it has no form fields: its pages may be scanned images, or its fonts map no characters to text", pages)
}

func hasText(pages []string) bool {
	for _, p := range pages {
		if strings.TrimSpace(p) != "" {
			return true
		}
	}
	return false
}

// writePages writes each page's text under its "Page N" line.
func writePages(b *strings.Builder, pages []string) {
	for i, p := range pages {
		fmt.Fprintf(b, "Page %d\n", i+1)
		if strings.TrimSpace(p) == "" {
			b.WriteString("(no text on this page)\n")
		} else {
			b.WriteString(p)
		}
		b.WriteByte('\n')
	}
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")
}

// capText cuts s at documents.DefaultLimits.MaxTextChars characters,
// saying so.
func capText(s string) string {
	max := documents.DefaultLimits.MaxTextChars
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + fmt.Sprintf("\n[cut: the PDF's text is longer than the document tools' limit of %d characters; the rest is left out]\n", max)
		}
		n++
	}
	return s
}

// noArgs refuses arguments to an operation that takes none.
func noArgs(op string, args json.RawMessage) error {
	a := bytes.TrimSpace(args)
	if len(a) == 0 || string(a) == "null" || string(a) == "{}" {
		return nil
	}
	return documents.Errorf("%s takes no arguments, only the file", op)
}

// decodeArgs decodes args strictly into v.
func decodeArgs(op string, args json.RawMessage, v any, shape string) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return documents.Errorf("%s's arguments do not fit (%v); give %s", op, err, shape)
	}
	return nil
}

// readOp is pdf.read: each page's text under its "Page N" line.
func readOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	if err := noArgs("pdf.read", args); err != nil {
		return nil, err
	}
	pages, err := Pages(ctx, in)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d page(s)\n\n", len(pages))
	writePages(&b, pages)
	return &documents.Result{Text: capText(b.String())}, nil
}

// textOp is pdf.text (see Text).
func textOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	if err := noArgs("pdf.text", args); err != nil {
		return nil, err
	}
	t, err := Text(ctx, in)
	if err != nil {
		return nil, err
	}
	return &documents.Result{Text: t}, nil
}

// formFieldsOp is pdf.form_fields: the fields as a JSON array, and a
// line of text for each.
func formFieldsOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	if err := noArgs("pdf.form_fields", args); err != nil {
		return nil, err
	}
	fields, err := FormFields(ctx, in)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return &documents.Result{Text: "the PDF has no form fields\n"}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d form field(s)\n", len(fields))
	for _, f := range fields {
		fmt.Fprintf(&b, "%s (%s): %q", f.Name, f.Type, oneLine(f.Value))
		if len(f.Options) > 0 {
			label := "options"
			if f.Type == "checkbox" {
				label = "on state"
			}
			fmt.Fprintf(&b, "; %s %s", label, quoted(f.Options))
		}
		if f.ReadOnly {
			b.WriteString("; read-only")
		}
		b.WriteByte('\n')
	}
	return &documents.Result{Text: capText(b.String())}, nil
}

// fillFormOp is pdf.fill_form, args {"fields": {"name": "value"}}.
func fillFormOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct {
		Fields map[string]string `json:"fields"`
	}
	if err := decodeArgs("pdf.fill_form", args, &a, `{"fields": {"name": "value"}}`); err != nil {
		return nil, err
	}
	out, err := FillForm(ctx, in, a.Fields)
	if err != nil {
		return nil, err
	}
	return &documents.Result{File: out, Text: fmt.Sprintf("filled %d field(s)", len(a.Fields))}, nil
}

// writeOp is pdf.write, args {"pages": ["text", …]}.
func writeOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct {
		Pages []string `json:"pages"`
	}
	if err := decodeArgs("pdf.write", args, &a, `{"pages": ["the first page's text", "the second's"]}`); err != nil {
		return nil, err
	}
	out, err := Write(a.Pages)
	if err != nil {
		return nil, err
	}
	return &documents.Result{File: out, Text: fmt.Sprintf("%d page(s)", len(a.Pages))}, nil
}

// watermarkOp is pdf.watermark, args {"text": "DRAFT"}.
func watermarkOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := decodeArgs("pdf.watermark", args, &a, `{"text": "DRAFT"}`); err != nil {
		return nil, err
	}
	out, n, err := Watermark(ctx, in, a.Text)
	if err != nil {
		return nil, err
	}
	return &documents.Result{File: out, Text: fmt.Sprintf("stamped %q on %d page(s)", a.Text, n)}, nil
}

// write serializes the document with pdfcpu. Every object still packed
// in an object stream is unpacked first: pdfcpu writes such an object's
// bytes as they were, without following its references, so an object
// only it refers to (a widget's appearance, say) would be left out.
func (d *doc) write() ([]byte, error) {
	for objNr, e := range d.xrt.Table {
		if e == nil || e.Free {
			continue
		}
		if _, lazy := e.Object.(types.LazyObjectStreamObject); !lazy {
			continue
		}
		gen := 0
		if e.Generation != nil {
			gen = *e.Generation
		}
		if _, err := d.xrt.Dereference(*types.NewIndirectRef(objNr, gen)); err != nil {
			return nil, documents.Errorf("the PDF's object %d cannot be read (%v); the file is damaged", objNr, err)
		}
	}
	var b bytes.Buffer
	if err := api.WriteContext(d.ctx, &b); err != nil {
		return nil, documents.Errorf("the PDF cannot be written back (%v); the file may be damaged", err)
	}
	return b.Bytes(), nil
}
