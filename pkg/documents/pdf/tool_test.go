//go:build pdf || documents

package pdf

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// workspace is a workspace holding files (path: bytes) and a link
// private.pdf → secret/form.pdf, with an Env whose judge refuses
// everything under secret/ and records what it was asked.
func workspace(t *testing.T, files map[string][]byte) (*tools.Env, string, *[]string) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("secret/form.pdf", filepath.Join(dir, "private.pdf")); err != nil {
		t.Fatal(err)
	}
	w, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	var asked []string
	env := &tools.Env{Workspace: w, Judge: func(act, rel string) error {
		asked = append(asked, act+" "+rel)
		if strings.HasPrefix(rel, "secret/") {
			return protocol.Errorf(protocol.CodeRefused, "%s is not to be touched", rel)
		}
		return nil
	}}
	return env, dir, &asked
}

func invoke(t *testing.T, tool tools.Tool, env *tools.Env, args string) (*tools.Output, error) {
	t.Helper()
	return tool.Invoke(context.Background(), env, json.RawMessage(args))
}

// TestToolSpecs: the tools are the five by their names, each with its
// gate and a JSON Schema naming its arguments, registered for the pdf
// format.
func TestToolSpecs(t *testing.T) {
	want := map[string]struct {
		act      string
		readOnly bool
		args     []string
	}{
		"pdf_read":        {"read", true, []string{"path"}},
		"pdf_write":       {"write", false, []string{"path", "pages"}},
		"pdf_watermark":   {"write", false, []string{"path", "text"}},
		"pdf_form_fields": {"read", true, []string{"path"}},
		"pdf_fill_form":   {"write", false, []string{"path", "fields"}},
	}
	var format *documents.Format
	for _, f := range documents.Formats() {
		if f.Tag == "pdf" {
			format = &f
		}
	}
	if format == nil || format.Text != "pdf.text" || !slices.Contains(format.Extensions, ".pdf") {
		t.Fatalf("the pdf format is not registered as it should be: %+v", format)
	}
	if len(format.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(format.Tools), len(want))
	}
	for _, tool := range format.Tools {
		s := tool.Spec()
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected tool %q", s.Name)
			continue
		}
		g := tool.(tools.Gated).Gate()
		if g.Act != w.act || g.Arg != "path" {
			t.Errorf("%s gate = %+v, want %s of path", s.Name, g, w.act)
		}
		if _, ro := tool.(tools.ReadOnly); ro != w.readOnly {
			t.Errorf("%s read-only = %v, want %v", s.Name, ro, w.readOnly)
		}
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
			Additional bool                       `json:"additionalProperties"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil {
			t.Fatalf("%s schema: %v", s.Name, err)
		}
		if !slices.Equal(schema.Required, w.args) || len(schema.Properties) != len(w.args) || schema.Additional {
			t.Errorf("%s schema = %s, want exactly %v", s.Name, s.Parameters, w.args)
		}
	}
	if _, err := tools.NewSet(format.Tools...); err != nil {
		t.Fatalf("the tools do not make a set: %v", err)
	}
}

// TestTools runs each tool against a real workspace: write a PDF, read
// it, stamp it, list and fill a form; every call asks the judge, and a
// refused path, or a link to one, is refused.
func TestTools(t *testing.T) {
	form := fixture(t, "libreoffice-form.pdf")
	env, dir, asked := workspace(t, map[string][]byte{
		"forms/application.pdf": form,
		"secret/form.pdf":       form,
	})

	out, err := invoke(t, WriteTool{}, env, `{"path":"out/letter.pdf","pages":["Dear reader,\nthe minutes follow.","Item one: the budget."]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Changed || !strings.Contains(out.Content, "out/letter.pdf: 2 page(s); wrote") {
		t.Errorf("pdf_write = %+v", out)
	}
	written, err := os.ReadFile(filepath.Join(dir, "out/letter.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	validate(t, written)

	out, err = invoke(t, ReadTool{}, env, `{"path":"out/letter.pdf"}`)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf_read", out.Content, "out/letter.pdf: 2 page(s)", "Page 1\nDear reader,\nthe minutes follow.\n", "Page 2\nItem one: the budget.\n")

	out, err = invoke(t, WatermarkTool{}, env, `{"path":"out/letter.pdf","text":"DRAFT"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Changed {
		t.Errorf("pdf_watermark changed nothing: %+v", out)
	}
	out, err = invoke(t, ReadTool{}, env, `{"path":"out/letter.pdf"}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.Content, "DRAFT") != 2 {
		t.Errorf("pdf_read after the watermark = %q, want DRAFT on both pages", out.Content)
	}

	out, err = invoke(t, FormFieldsTool{}, env, `{"path":"forms/application.pdf"}`)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf_form_fields", out.Content, "8 form field(s)", `First Name (text): "Alice"`, `gdpr (checkbox): "Off"; on state "Yes"`, `Nationality (choice): ""; options "Unknown", "German"`)

	out, err = invoke(t, FillFormTool{}, env, `{"path":"forms/application.pdf","fields":{"Last Name":"Lovelace","gdpr":true,"Nationality":"Italian"}}`)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf_fill_form", out.Content, "filled 3 field(s)")
	filled, err := os.ReadFile(filepath.Join(dir, "forms/application.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	validate(t, filled)
	res, err := documents.Call(context.Background(), "pdf.text", nil, filled)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "pdf.text of the filled file", res.Text, "Last Name: Lovelace\n", "gdpr: Yes\n", "Nationality: Italian\n")

	for _, want := range []string{"write out/letter.pdf", "read out/letter.pdf", "read forms/application.pdf", "write forms/application.pdf"} {
		if !slices.Contains(*asked, want) {
			t.Errorf("the judge was not asked %q (asked %v)", want, *asked)
		}
	}

	// The gate: a refused path, directly or through a link, for each tool.
	for _, tc := range []struct {
		tool tools.Tool
		args string
	}{
		{ReadTool{}, `{"path":"%s"}`},
		{FormFieldsTool{}, `{"path":"%s"}`},
		{WriteTool{}, `{"path":"%s","pages":["x"]}`},
		{WatermarkTool{}, `{"path":"%s","text":"X"}`},
		{FillFormTool{}, `{"path":"%s","fields":{"gdpr":"true"}}`},
	} {
		for _, p := range []string{"secret/form.pdf", "private.pdf"} {
			_, err := invoke(t, tc.tool, env, strings.Replace(tc.args, "%s", p, 1))
			if !errors.Is(err, protocol.ErrRefused) {
				t.Errorf("%s on %s: %v, want the judge's refusal", tc.tool.Spec().Name, p, err)
			}
		}
	}
	if secret, _ := os.ReadFile(filepath.Join(dir, "secret/form.pdf")); string(secret) != string(form) {
		t.Errorf("the refused file was changed")
	}
}

// TestToolArguments: arguments of the wrong shape are refused, showing
// the right one.
func TestToolArguments(t *testing.T) {
	env, _, _ := workspace(t, map[string][]byte{"a.pdf": fixture(t, "crazyones.pdf")})
	for _, tc := range []struct {
		tool tools.Tool
		args string
		says string
	}{
		{ReadTool{}, `{"file":"a.pdf"}`, `pdf_read takes {"path": "reports/q3.pdf"}`},
		{ReadTool{}, `{}`, `the required argument "path" is missing`},
		{ReadTool{}, `{"path":7}`, `pdf_read takes {"path"`},
		{WriteTool{}, `{"path":"b.pdf","pages":"one page"}`, `pdf_write takes {"path": "out/letter.pdf", "pages": [`},
		{WriteTool{}, `{"path":"b.pdf"}`, `the required argument "pages" is missing`},
		{WatermarkTool{}, `{"path":"a.pdf","text":"X","angle":45}`, `pdf_watermark takes {"path": "reports/q3.pdf", "text": "DRAFT"}`},
		{WatermarkTool{}, `{"path":"a.pdf","text":""}`, `the watermark text is empty`},
		{FillFormTool{}, `{"path":"a.pdf","fields":{"x":3}}`, `the value of field "x" must be a string or a boolean`},
		{FillFormTool{}, `{"path":"a.pdf","fields":{}}`, `no fields to fill were given`},
		{FillFormTool{}, `{"path":"a.pdf","fields":["x"]}`, `pdf_fill_form takes {"path": "forms/application.pdf", "fields": {`},
		{FormFieldsTool{}, `[]`, `pdf_form_fields takes {"path"`},
	} {
		_, err := invoke(t, tc.tool, env, tc.args)
		if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s %s: %v, want a refusal saying %q", tc.tool.Spec().Name, tc.args, err, tc.says)
		}
	}
}

// TestToolEntryCap: pdf_read's output is cut to the Env's EntryCap,
// saying so.
func TestToolEntryCap(t *testing.T) {
	long, err := Write([]string{strings.Repeat("A sentence of the minutes. ", 100), strings.Repeat("Another sentence. ", 100)})
	if err != nil {
		t.Fatal(err)
	}
	env, _, _ := workspace(t, map[string][]byte{"long.pdf": long})
	env.EntryCap = 600
	out, err := invoke(t, ReadTool{}, env, `{"path":"long.pdf"}`)
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(out.Content); n > 600 {
		t.Errorf("the output holds %d characters, over the cap of 600", n)
	}
	mustContain(t, "the cut output", out.Content, "long.pdf: 2 page(s)", "…[cut:")
}
