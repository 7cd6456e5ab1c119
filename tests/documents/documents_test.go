//go:build documents

// Package documents_test runs the document tools through a real cluster
// on the embedded default: the sandboxer built with -tags documents
// offers them to a contract naming them, each call is judged on its path
// and carried out in a child process under the document limits, and a
// document_contains verification reads what the agent wrote.
package documents_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

func TestMain(m *testing.M) {
	documents.RunChildIfRequested()
	documents.Isolate(true) // as the sandboxer binary runs them
	os.Exit(m.Run())
}

// call is one scripted tool call and what its observation must say.
type call struct {
	tool string
	args string
	want []string // each in the observation's content
	fail bool     // the call fails or is refused
}

// runCalls runs a contract naming the document tools in ws, whose agent
// makes calls, one a step, then stops; it returns the run's result and
// each call's observation.
func runCalls(t *testing.T, ws string, calls []call, v protocol.Verification, rules []protocol.Rule) (*protocol.Result, []protocol.Observation) {
	t.Helper()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, _ int) (*protocol.Turn, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == protocol.RoleTool {
				n++
			}
		}
		if n == len(calls) {
			return &protocol.Turn{Text: "done"}, nil
		}
		c := calls[n]
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "c" + c.tool, Name: c.tool, Arguments: json.RawMessage(c.args)}}}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	var names []string
	for _, c := range calls {
		if !strings.Contains(strings.Join(names, ","), c.tool) {
			names = append(names, c.tool)
		}
	}
	contract := &protocol.Contract{Schema: protocol.ContractSchema, Task: "work on the documents", Workspace: protocol.Workspace{Root: ws},
		Tools: names, Verification: v, Budget: protocol.Budget{MaxSteps: len(calls) + 2},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "team", Rules: rules}},
			Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
	h, err := cl.Submit(t.Context(), contract)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var obs []protocol.Observation
	for _, r := range recs {
		obs = append(obs, r.Observations...)
	}
	if len(obs) != len(calls) {
		t.Fatalf("run %s (%s) observed %d calls, want %d: %+v", res.Outcome, res.Reason, len(obs), len(calls), obs)
	}
	for i, c := range calls {
		o := obs[i]
		if failed := o.IsError; failed != c.fail {
			t.Errorf("%s %s: failed %v (%s: %s), want failed %v", c.tool, c.args, failed, o.Status, o.Content, c.fail)
		}
		for _, w := range c.want {
			if !strings.Contains(o.Content, w) {
				t.Errorf("%s %s: the observation lacks %q:\n%s", c.tool, c.args, w, o.Content)
			}
		}
	}
	return res, obs
}

// fixture copies a format package's test file into ws.
func fixture(t *testing.T, ws, from, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "documents", from, "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nestedDocx is a Word document whose body nests 10,000 elements deep.
func nestedDocx(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, body := range map[string]string{
		"[Content_Types].xml": `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`,
		"_rels/.rels":         `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`,
		"word/document.xml": `<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			strings.Repeat("<w:p>", 10000) + strings.Repeat("</w:p>", 10000) + `</w:body></w:document>`,
	} {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestOfficeTools runs the spreadsheet, Word and presentation tools on
// files made by other programs: read, generate, set a cell keeping the
// rest, refused on a path the policy denies (through a link too), and a
// hostile file refused within its limits; the run passes a
// document_contains check on the document the agent wrote.
func TestOfficeTools(t *testing.T) {
	ws := t.TempDir()
	fixture(t, ws, "xlsx", "Book1.xlsx")
	fixture(t, ws, "docx", "test.docx")
	fixture(t, ws, "pptx", "SampleShow.pptx")
	if err := os.Mkdir(filepath.Join(ws, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture(t, filepath.Join(ws, "private"), "docx", "Styles.docx")
	if err := os.Symlink("private/Styles.docx", filepath.Join(ws, "shared.docx")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "deep.docx"), nestedDocx(t), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := []call{
		{tool: "xlsx_sheets", args: `{"path":"Book1.xlsx"}`, want: []string{"Sheet1", "Sheet2"}},
		{tool: "xlsx_read", args: `{"path":"Book1.xlsx","sheet":"Sheet1"}`, want: []string{"A1"}},
		{tool: "xlsx_set_cell", args: `{"path":"Book1.xlsx","sheet":"Sheet2","cell":"D4","value":"reviewed"}`},
		{tool: "xlsx_read", args: `{"path":"Book1.xlsx","sheet":"Sheet2"}`, want: []string{"D4", "reviewed"}},
		{tool: "xlsx_write", args: `{"path":"out/totals.xlsx","sheet":"Totals","rows":[["item","n"],["apples","3"],["sum","=B2*2"]]}`},
		{tool: "xlsx_read", args: `{"path":"out/totals.xlsx"}`, want: []string{"apples", "B2*2"}},
		{tool: "docx_read", args: `{"path":"test.docx"}`},
		{tool: "docx_write", args: `{"path":"out/draft.docx","paragraphs":[{"heading":"Quarterly report","level":1},"Revenue rose.",{"table":[["region","total"],["north","41"]]}]}`},
		{tool: "docx_read", args: `{"path":"out/draft.docx"}`, want: []string{"# Quarterly report", "Revenue rose.", "north | 41"}},
		{tool: "pptx_read", args: `{"path":"SampleShow.pptx"}`, want: []string{"Slide 1"}},
		{tool: "docx_read", args: `{"path":"private/Styles.docx"}`, fail: true, want: []string{"private"}},
		{tool: "docx_read", args: `{"path":"shared.docx"}`, fail: true, want: []string{"private/Styles.docx"}},
		{tool: "docx_read", args: `{"path":"deep.docx"}`, fail: true, want: []string{"256"}},
		// The last call writes what the verification looks for.
		{tool: "docx_write", args: `{"path":"out/report.docx","paragraphs":[{"heading":"Quarterly report","level":1},{"table":[["region","total"],["north","42"]]}]}`},
	}
	res, obs := runCalls(t, ws, calls, protocol.Verification{DocumentContains: &protocol.ContainsCheck{Path: "out/report.docx", Needle: "north | 42"}},
		[]protocol.Rule{{Act: "read", Effect: "deny", Pattern: "private/*"}})
	if res.Outcome != protocol.OutcomeSuccess {
		t.Errorf("the run = %s (%s), want success by document_contains on out/report.docx", res.Outcome, res.Reason)
	}
	for _, i := range []int{10, 11} {
		if obs[i].Status != protocol.CallRefused {
			t.Errorf("%s: status %s, want refused by the policy", calls[i].args, obs[i].Status)
		}
	}
}

// TestPDFFormRun is the run io-harness users know: the agent lists a
// LibreOffice form's fields, fills them, stamps a watermark, writes a
// PDF of its own and reads it back, and decodes a barcode; a field it
// may not touch is refused by name, a file the policy hides is refused
// through a link to it, and the run passes document_contains on the
// filled form's text, its fields' values included.
func TestPDFFormRun(t *testing.T) {
	ws := t.TempDir()
	fixture(t, ws, "pdf", "libreoffice-form.pdf")
	fixture(t, ws, "barcode", "ean13-4_14.png")
	if err := os.Mkdir(filepath.Join(ws, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture(t, filepath.Join(ws, "private"), "pdf", "pdfcpu-person.pdf")
	if err := os.Symlink("private/pdfcpu-person.pdf", filepath.Join(ws, "person.pdf")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "fake.pdf"), []byte("not a pdf at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := []call{
		{tool: "pdf_form_fields", args: `{"path":"libreoffice-form.pdf"}`, want: []string{"Last Name", "Nationality"}},
		{tool: "pdf_fill_form", args: `{"path":"libreoffice-form.pdf","fields":{"No Such Field":"x"}}`, fail: true, want: []string{"Last Name"}},
		{tool: "pdf_write", args: `{"path":"out/summary.pdf","pages":["Invoice 2026-117","Total due: 42"]}`},
		{tool: "pdf_read", args: `{"path":"out/summary.pdf"}`, want: []string{"Page 1", "Invoice 2026-117", "Page 2", "Total due: 42"}},
		{tool: "pdf_watermark", args: `{"path":"out/summary.pdf","text":"DRAFT"}`},
		{tool: "pdf_read", args: `{"path":"out/summary.pdf"}`, want: []string{"DRAFT", "Total due: 42"}},
		{tool: "barcode_decode", args: `{"path":"ean13-4_14.png"}`, want: []string{"EAN_13", "9780441014989"}},
		{tool: "pdf_read", args: `{"path":"person.pdf"}`, fail: true, want: []string{"private/pdfcpu-person.pdf"}},
		{tool: "pdf_read", args: `{"path":"fake.pdf"}`, fail: true, want: []string{"not a PDF"}},
		// The last call makes the check pass.
		{tool: "pdf_fill_form", args: `{"path":"libreoffice-form.pdf","fields":{"Last Name":"Lovelace","Nationality":"French"}}`},
	}
	res, _ := runCalls(t, ws, calls, protocol.Verification{DocumentContains: &protocol.ContainsCheck{Path: "libreoffice-form.pdf", Needle: "Last Name: Lovelace"}},
		[]protocol.Rule{{Act: "read", Effect: "deny", Pattern: "private/*"}})
	if res.Outcome != protocol.OutcomeSuccess {
		t.Errorf("the run = %s (%s), want success by document_contains on the filled form", res.Outcome, res.Reason)
	}
}

// TestDocumentCheckOfTheWrongKind: a document_contains check on a file
// that is not of its kind fails saying why, and never passes on an
// empty text.
func TestDocumentCheckOfTheWrongKind(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("the total is 42"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := provider.NewScripted(&protocol.Turn{Text: "done"})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	h, err := cl.Submit(t.Context(), &protocol.Contract{Schema: protocol.ContractSchema, Task: "nothing", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{DocumentContains: &protocol.ContainsCheck{Path: "report.pdf", Needle: "42"}}, Budget: protocol.Budget{MaxSteps: 2}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var detail string
	for _, r := range recs {
		if r.Check != nil {
			detail = r.Check.Detail
			if r.Check.Passed {
				t.Errorf("the check passed on a text file named .pdf: %s", detail)
			}
		}
	}
	if res.Outcome == protocol.OutcomeSuccess || !strings.Contains(detail, "cannot be read as a pdf document") {
		t.Errorf("run = %s (%s), check %q; want no success and a check saying the file cannot be read as a pdf", res.Outcome, res.Reason, detail)
	}
}

// TestSandboxerAdvertisesDocuments: a sandboxer built with the documents
// tag says so in its micro service's metadata, the formats it reads and
// the document tools among its tools, where `nats micro info
// harness-sandboxer` shows them and a coordinator looks.
func TestSandboxerAdvertisesDocuments(t *testing.T) {
	cl := clustertest.Start(t, harness.Config{Roots: []string{t.TempDir()}, Provider: provider.NewScripted(), NoTakeover: true})
	m, err := cl.Conn().Request("$SRV.INFO.harness-sandboxer", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if got := info.Metadata["documents"]; got != "barcode,docx,pdf,pptx,xlsx" {
		t.Errorf("documents = %q, want the five formats", got)
	}
	for _, tool := range []string{"xlsx_set_cell", "docx_write", "pptx_read", "pdf_fill_form", "barcode_decode"} {
		if !strings.Contains(","+info.Metadata["tools"]+",", ","+tool+",") {
			t.Errorf("tools = %q, want %s among them", info.Metadata["tools"], tool)
		}
	}
}
