//go:build barcode || documents

package barcode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/oned"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

func TestMain(m *testing.M) {
	documents.RunChildIfRequested() // after this package's init registered its operations
	os.Exit(m.Run())
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeFixtures decodes images from ZXing's black-box test data,
// scans and photographs of real codes, against the texts ZXing's own
// tests expect of them.
func TestDecodeFixtures(t *testing.T) {
	multiQR := []Code{
		{"QR_CODE", "You earned the class a 5 MINUTE DANCE PARTY!!  Awesome!  Way to go!  Let's boogie!"},
		{"QR_CODE", "You earned the class 5 EXTRA MINUTES OF RECESS!!  Fabulous!!  Way to go!!"},
		{"QR_CODE", "You get to SIT AT MRS. SIGMON'S DESK FOR A DAY!!  Awesome!!  Way to go!! Guess I better clean up! :)"},
		{"QR_CODE", "You get to CREATE OUR JOURNAL PROMPT FOR THE DAY!  Yay!  Way to go!  "},
	}
	for _, tc := range []struct {
		file string
		want []Code
	}{
		{"qrcode-3_13.png", []Code{{"QR_CODE", "MECARD:N:Google 411,;TEL:18665881077;;"}}},
		{"ean13-4_14.png", []Code{{"EAN_13", "9780441014989"}}},
		{"upca-2_29.png", []Code{{"UPC_A", "752050200137"}}},
		{"ean8-1_1.png", []Code{{"EAN_8", "48512343"}}},
		{"code128-1_1.png", []Code{{"CODE_128", "168901"}}},
		{"code39-1_1.png", []Code{{"CODE_39", "TEST-SHEET"}}},
		{"code39-1_3.png", []Code{{"CODE_39", "MOROVIA"}}},
		{"multi-1_1.png", []Code{{"QR_CODE", "www.airtable.com/jobs"}, {"UPC_A", "031415926531"}}},
		{"multi-qrcode-1_1.png", multiQR},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := Decode(context.Background(), fixture(t, tc.file))
			if err != nil {
				t.Fatalf("Decode(%s): %v", tc.file, err)
			}
			sortCodes(got)
			sortCodes(tc.want)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Decode(%s) (-want +got):\n%s", tc.file, d)
			}
		})
	}
}

// TestDecodeLongQR reads a QR code holding a paragraph (backslashes and
// all), against the text ZXing's test data gives for it.
func TestDecodeLongQR(t *testing.T) {
	want := string(bytes.TrimSpace(fixture(t, "qrcode-2_1.txt")))
	got, err := Decode(context.Background(), fixture(t, "qrcode-2_1.png"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Format != "QR_CODE" || got[0].Text != want {
		t.Fatalf("Decode(qrcode-2_1.png) = %+v, want one QR_CODE with the paragraph %.60q…", got, want)
	}
}

func sortCodes(cs []Code) {
	slices.SortFunc(cs, func(a, b Code) int {
		if c := strings.Compare(a.Format, b.Format); c != 0 {
			return c
		}
		return strings.Compare(a.Text, b.Text)
	})
}

// TestDecodeJPEG reads a fixture turned into a JPEG, with its
// compression's blur.
func TestDecodeJPEG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(fixture(t, "ean13-4_14.png")))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(context.Background(), b.Bytes())
	if err != nil || len(got) != 1 || got[0] != (Code{"EAN_13", "9780441014989"}) {
		t.Fatalf("Decode(JPEG) = %+v, %v, want the EAN-13 9780441014989", got, err)
	}
}

// encode draws contents as a code of format, with a quiet margin, as a
// PNG.
func encode(t *testing.T, w gozxing.Writer, format gozxing.BarcodeFormat, contents string, width, height int) []byte {
	t.Helper()
	m, err := w.Encode(contents, format, width, height, nil)
	if err != nil {
		t.Fatalf("encode %s %q: %v", format, contents, err)
	}
	const margin = 20
	img := image.NewGray(image.Rect(0, 0, m.GetWidth()+2*margin, m.GetHeight()+2*margin))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	for y := 0; y < m.GetHeight(); y++ {
		for x := 0; x < m.GetWidth(); x++ {
			if m.Get(x, y) {
				img.SetGray(x+margin, y+margin, color.Gray{})
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeGenerated decodes codes drawn by gozxing's encoders, with
// text beyond ASCII in the QR code.
func TestDecodeGenerated(t *testing.T) {
	for _, tc := range []struct {
		name string
		img  []byte
		want Code
	}{
		{"qr", encode(t, qrcode.NewQRCodeWriter(), gozxing.BarcodeFormat_QR_CODE, "invoice 2291 — paid in full, Zürich", 300, 300), Code{"QR_CODE", "invoice 2291 — paid in full, Zürich"}},
		{"code128", encode(t, oned.NewCode128Writer(), gozxing.BarcodeFormat_CODE_128, "SHIP-0042-XY", 400, 120), Code{"CODE_128", "SHIP-0042-XY"}},
		{"ean13", encode(t, oned.NewEAN13Writer(), gozxing.BarcodeFormat_EAN_13, "4006381333931", 400, 120), Code{"EAN_13", "4006381333931"}},
		{"ean8", encode(t, oned.NewEAN8Writer(), gozxing.BarcodeFormat_EAN_8, "96385074", 300, 120), Code{"EAN_8", "96385074"}},
		{"code39", encode(t, oned.NewCode39Writer(), gozxing.BarcodeFormat_CODE_39, "PART 7734", 500, 120), Code{"CODE_39", "PART 7734"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(context.Background(), tc.img)
			if err != nil || len(got) != 1 || got[0] != tc.want {
				t.Fatalf("Decode = %+v, %v, want [%+v]", got, err, tc.want)
			}
		})
	}
}

// TestNoCode: an image with no code decodes to nothing, and barcode.text
// says none was found rather than returning "".
func TestNoCode(t *testing.T) {
	img := image.NewGray(image.Rect(0, 0, 200, 120))
	for i := range img.Pix {
		img.Pix[i] = byte(i % 251)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(context.Background(), b.Bytes())
	if err != nil || len(got) != 0 {
		t.Fatalf("Decode(noise) = %+v, %v, want none", got, err)
	}
	_, err = documents.Call(context.Background(), "barcode.text", nil, b.Bytes())
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "no barcode or QR code was found") {
		t.Fatalf("barcode.text(noise) = %v, want a refusal saying none was found", err)
	}
}

// TestText: barcode.text holds every decoded text.
func TestText(t *testing.T) {
	res, err := documents.Call(context.Background(), "barcode.text", nil, fixture(t, "multi-1_1.png"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"www.airtable.com/jobs\n", "031415926531\n"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("barcode.text = %q, want it to hold %q", res.Text, want)
		}
	}
	if _, err := documents.Call(context.Background(), "barcode.text", json.RawMessage(`{"page":1}`), fixture(t, "multi-1_1.png")); !errors.Is(err, protocol.ErrBadArguments) {
		t.Errorf("barcode.text with arguments = %v, want a refusal", err)
	}
}

// hugePNG is a valid PNG header declaring w×h pixels, with no pixel data
// worth the name: what a decompression bomb of an image looks like
// before it is decoded.
func hugePNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		b.Write(n[:])
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		b.WriteString(typ)
		b.Write(data)
		binary.BigEndian.PutUint32(n[:], crc.Sum32())
		b.Write(n[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 0 // 8-bit greyscale
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

// TestHostile: a huge declared image is refused from its header, and a
// file that is not an image is refused by its signature, both in an
// isolated child process.
func TestHostile(t *testing.T) {
	documents.Isolate(true)
	defer documents.Isolate(false)
	start := time.Now()
	_, err := documents.Call(context.Background(), "barcode.decode", nil, hugePNG(100_000, 100_000))
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "100000x100000 pixels, over the document tools' limit") {
		t.Fatalf("huge PNG: %v, want a refusal naming the declared size and the limit", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the huge PNG took %s to refuse; it must be refused from its header", time.Since(start))
	}
	_, err = documents.Call(context.Background(), "barcode.decode", nil, []byte("%PDF-1.7\n"))
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "not a PNG or JPEG") {
		t.Fatalf("a PDF: %v, want a refusal saying it is not a PNG or JPEG", err)
	}
	_, err = documents.Call(context.Background(), "barcode.decode", nil, fixture(t, "ean8-1_1.png")[:200])
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a cut PNG: %v, want a refusal saying it is damaged", err)
	}
	res, err := documents.Call(context.Background(), "barcode.decode", nil, fixture(t, "ean8-1_1.png"))
	if err != nil || !strings.Contains(res.Text, "EAN_8: 48512343") {
		t.Fatalf("isolated decode: %+v, %v", res, err)
	}
}

// TestTool runs barcode_decode against a real workspace: it decodes, its
// arguments are checked, and the policy's judge is asked, through a
// symbolic link by the link's target too.
func TestTool(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scans", "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"scans/label.png":         fixture(t, "multi-1_1.png"),
		"scans/private/badge.png": fixture(t, "qrcode-3_13.png"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("private/badge.png", filepath.Join(dir, "scans", "link.png")); err != nil {
		t.Fatal(err)
	}
	w, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var asked []string
	env := &tools.Env{Workspace: w, Judge: func(act, rel string) error {
		asked = append(asked, act+" "+rel)
		if strings.HasPrefix(rel, "scans/private/") {
			return protocol.Errorf(protocol.CodeRefused, "%s is private", rel)
		}
		return nil
	}}
	tool := DecodeTool{}
	if tool.Spec().Name != "barcode_decode" || tool.Gate() != (protocol.ToolGate{Act: "read", Arg: "path"}) {
		t.Fatalf("spec %+v gate %+v", tool.Spec(), tool.Gate())
	}
	var schema map[string]any
	if err := json.Unmarshal(tool.Spec().Parameters, &schema); err != nil {
		t.Fatalf("schema: %v", err)
	}

	out, err := tool.Invoke(context.Background(), env, json.RawMessage(`{"path":"scans/label.png"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scans/label.png: 2 codes found", "QR_CODE: www.airtable.com/jobs", "UPC_A: 031415926531"} {
		if !strings.Contains(out.Content, want) {
			t.Errorf("output %q lacks %q", out.Content, want)
		}
	}
	if !slices.Contains(asked, "read scans/label.png") {
		t.Errorf("judge asked %v, want a read of scans/label.png", asked)
	}

	_, err = tool.Invoke(context.Background(), env, json.RawMessage(`{"path":"scans/private/badge.png"}`))
	if !errors.Is(err, protocol.ErrRefused) {
		t.Errorf("private file: %v, want the judge's refusal", err)
	}
	_, err = tool.Invoke(context.Background(), env, json.RawMessage(`{"path":"scans/link.png"}`))
	if !errors.Is(err, protocol.ErrRefused) {
		t.Errorf("link to a private file: %v, want the judge's refusal of its target", err)
	}
	for _, bad := range []string{`{"file":"scans/label.png"}`, `{}`, `{"path":3}`, `[]`} {
		_, err := tool.Invoke(context.Background(), env, json.RawMessage(bad))
		if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), `{"path": "scans/label.png"}`) {
			t.Errorf("arguments %s: %v, want a refusal showing the right shape", bad, err)
		}
	}
}
