//go:build barcode || documents

// Package barcode is the barcode format of the document tools: it finds
// and decodes the QR codes and the common linear barcodes (EAN-13,
// EAN-8, UPC-A, UPC-E, Code 128, Code 39) in a PNG or JPEG image. It
// registers two operations, barcode.decode (each code's format and
// text) and barcode.text (the decoded texts, for document_contains), and
// one tool, barcode_decode.
//
// Decoding is github.com/makiuchi-d/gozxing, a Go port of ZXing, the
// reference open-source barcode reader. An image whose header declares
// more than documents.DefaultLimits.MaxPixels pixels is refused before a
// pixel is decoded.
package barcode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // the JPEG decoder, for image.Decode
	_ "image/png"  // the PNG decoder, for image.Decode
	"slices"
	"strings"

	"github.com/makiuchi-d/gozxing"
	multiqr "github.com/makiuchi-d/gozxing/multi/qrcode"
	"github.com/makiuchi-d/gozxing/oned"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/tools"
)

func init() {
	documents.Register("barcode.decode", decodeOp)
	documents.Register("barcode.text", textOp)
	documents.AddFormat(documents.Format{
		Tag:        "barcode",
		Extensions: []string{".png", ".jpg", ".jpeg"},
		Text:       "barcode.text",
		Tools:      []tools.Tool{DecodeTool{}},
	})
}

// Code is one barcode found in an image.
type Code struct {
	// Format is ZXing's name of its symbology: QR_CODE, EAN_13, EAN_8,
	// UPC_A, UPC_E, CODE_128 or CODE_39.
	Format string `json:"format"`
	// Text is what it encodes.
	Text string `json:"text"`
}

// maxSplitDepth bounds the search for further linear codes around one
// found: each level looks in the four regions beside the code.
const maxSplitDepth = 3

// Decode returns the barcodes found in img, a PNG or JPEG file's bytes,
// QR codes first, then the linear codes, each once. It returns an empty
// list, not an error, for an image with no code in it. Errors, each a
// refusal of the input (documents.Errorf): bytes that are neither PNG
// nor JPEG, or a damaged image; a header declaring more pixels than
// documents.DefaultLimits.MaxPixels. The end of ctx stops it between
// readers and returns ctx.Err().
func Decode(ctx context.Context, img []byte) ([]Code, error) {
	kind := sniff(img)
	if kind == "" {
		return nil, documents.Errorf("the file is not a PNG or JPEG image (its first bytes are neither signature); barcode_decode reads PNG and JPEG files only, so convert it first")
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img))
	if err != nil {
		return nil, documents.Errorf("the %s image's header cannot be read (%v); the file is damaged", kind, err)
	}
	max := documents.DefaultLimits.MaxPixels
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, documents.Errorf("the %s image declares a size of %dx%d pixels, which holds nothing; the file is damaged", kind, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(max) {
		return nil, documents.Errorf("the %s image declares %dx%d pixels, over the document tools' limit of %d pixels; scale it down or crop it to the code first", kind, cfg.Width, cfg.Height, max)
	}
	pic, _, err := image.Decode(bytes.NewReader(img))
	if err != nil {
		return nil, documents.Errorf("the %s image cannot be decoded (%v); the file is damaged", kind, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	src := gozxing.NewLuminanceSourceFromImage(pic)
	var seen finds
	if err := seen.qr(ctx, src); err != nil {
		return nil, err
	}
	for _, r := range linearReaders() {
		if err := seen.linear(ctx, r, src, 0); err != nil {
			return nil, err
		}
	}
	return seen.codes, nil
}

// sniff names the image kind by its signature, or "".
func sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "PNG"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "JPEG"
	}
	return ""
}

// hints are the decoding hints of every reader: look harder (more rows,
// and the image turned a quarter), at the cost of time.
func hints() map[gozxing.DecodeHintType]any {
	return map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_TRY_HARDER: true}
}

// reader is one linear reader and the hints it decodes with.
type reader struct {
	r     gozxing.Reader
	hints map[gozxing.DecodeHintType]any
}

// linearReaders are the readers of the linear symbologies. The UPC/EAN
// reader reads UPC-A as EAN-13 and names it UPC-A when UPC-A is among
// the formats its call's hints allow.
func linearReaders() []reader {
	upcean := []gozxing.BarcodeFormat{gozxing.BarcodeFormat_EAN_13, gozxing.BarcodeFormat_EAN_8, gozxing.BarcodeFormat_UPC_E}
	h := hints()
	h[gozxing.DecodeHintType_POSSIBLE_FORMATS] = append(slices.Clone(upcean), gozxing.BarcodeFormat_UPC_A)
	return []reader{
		{oned.NewMultiFormatUPCEANReader(map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_POSSIBLE_FORMATS: upcean}), h},
		{oned.NewCode128Reader(), hints()},
		{oned.NewCode39Reader(), hints()},
	}
}

// finds collects codes, each once.
type finds struct {
	codes []Code
}

// add records r unless it was found already; it reports whether it was
// new.
func (f *finds) add(r *gozxing.Result) bool {
	c := Code{Format: r.GetBarcodeFormat().String(), Text: r.GetText()}
	for _, have := range f.codes {
		if have == c {
			return false
		}
	}
	f.codes = append(f.codes, c)
	return true
}

// qr adds the QR codes of src: with the binarizer that suits photographs
// first, then with the one that suits clean, computer-made images.
func (f *finds) qr(ctx context.Context, src gozxing.LuminanceSource) error {
	for _, bin := range []gozxing.Binarizer{gozxing.NewHybridBinarizer(src), gozxing.NewGlobalHistgramBinarizer(src)} {
		if err := ctx.Err(); err != nil {
			return err
		}
		bmp, err := gozxing.NewBinaryBitmap(bin)
		if err != nil {
			return documents.Errorf("the image cannot be read for codes: %v", err)
		}
		rs, err := multiqr.NewQRCodeMultiReader().DecodeMultiple(bmp, hints())
		if err != nil && !notFound(err) {
			return documents.Errorf("the image's QR codes cannot be decoded: %v", err)
		}
		for _, r := range rs {
			f.add(r)
		}
		if len(rs) > 0 {
			return nil
		}
	}
	return nil
}

// linear adds the codes reader finds in src: the one it finds, then,
// recursively, those in the regions left of, right of, above and below
// it (as ZXing's GenericMultipleBarcodeReader does).
func (f *finds) linear(ctx context.Context, rd reader, src gozxing.LuminanceSource, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, h := src.GetWidth(), src.GetHeight()
	if w < 8 || h < 8 {
		return nil
	}
	r, err := decodeOne(rd, src)
	if err != nil {
		return err
	}
	if r == nil || !f.add(r) || depth >= maxSplitDepth {
		return nil
	}
	pts := r.GetResultPoints()
	if len(pts) == 0 {
		return nil
	}
	minX, minY, maxX, maxY := float64(w), float64(h), 0.0, 0.0
	for _, p := range pts {
		if p == nil {
			continue
		}
		minX, maxX = min(minX, p.GetX()), max(maxX, p.GetX())
		minY, maxY = min(minY, p.GetY()), max(maxY, p.GetY())
	}
	regions := []image.Rectangle{
		image.Rect(0, 0, int(minX), h), // left
		image.Rect(int(maxX), 0, w, h), // right
		image.Rect(0, 0, w, int(minY)), // above
		image.Rect(0, int(maxY), w, h), // below
	}
	for _, rg := range regions {
		rg = rg.Intersect(image.Rect(0, 0, w, h))
		if rg.Dx() < 8 || rg.Dy() < 8 || (rg.Dx() == w && rg.Dy() == h) {
			continue
		}
		sub, err := src.Crop(rg.Min.X, rg.Min.Y, rg.Dx(), rg.Dy())
		if err != nil {
			continue
		}
		if err := f.linear(ctx, rd, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// decodeOne runs reader on src with each binarizer in turn and returns
// the first code it finds, or nil.
func decodeOne(rd reader, src gozxing.LuminanceSource) (*gozxing.Result, error) {
	for _, bin := range []gozxing.Binarizer{gozxing.NewHybridBinarizer(src), gozxing.NewGlobalHistgramBinarizer(src)} {
		bmp, err := gozxing.NewBinaryBitmap(bin)
		if err != nil {
			return nil, documents.Errorf("the image cannot be read for codes: %v", err)
		}
		r, err := rd.r.Decode(bmp, rd.hints)
		rd.r.Reset()
		if err == nil {
			return r, nil
		}
		if !notFound(err) {
			return nil, documents.Errorf("the image's barcodes cannot be decoded: %v", err)
		}
	}
	return nil, nil
}

// notFound reports whether err means "no code here", or a code too
// damaged to read, rather than a failure of the reader.
func notFound(err error) bool {
	var re gozxing.ReaderException
	return errors.As(err, &re)
}

// decodeOp is barcode.decode: how many codes were found, then each
// code's format and text, "FORMAT: text", a text's later lines indented;
// an image with no code is an error saying so.
func decodeOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	codes, err := found(ctx, args, in)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if len(codes) == 1 {
		b.WriteString("1 code found\n")
	} else {
		fmt.Fprintf(&b, "%d codes found\n", len(codes))
	}
	for _, c := range codes {
		fmt.Fprintf(&b, "%s: %s\n", c.Format, strings.ReplaceAll(c.Text, "\n", "\n    "))
	}
	return &documents.Result{Text: capText(b.String())}, nil
}

// textOp is barcode.text: the decoded texts, one a line, in the order of
// barcode.decode; an image with no code is an error saying so.
func textOp(ctx context.Context, args json.RawMessage, in []byte) (*documents.Result, error) {
	codes, err := found(ctx, args, in)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, c := range codes {
		b.WriteString(c.Text)
		b.WriteByte('\n')
	}
	return &documents.Result{Text: capText(b.String())}, nil
}

// found is Decode for an operation: it refuses arguments, and an image
// with no code.
func found(ctx context.Context, args json.RawMessage, in []byte) ([]Code, error) {
	if a := bytes.TrimSpace(args); len(a) > 0 && !bytes.Equal(a, []byte("null")) && !bytes.Equal(a, []byte("{}")) {
		return nil, documents.Errorf("the barcode operations take no arguments, only the image")
	}
	codes, err := Decode(ctx, in)
	if err != nil {
		return nil, err
	}
	if len(codes) == 0 {
		return nil, documents.Errorf("no barcode or QR code was found in the image; it may hold none, or one too small, blurred or cut off to read (the reader looks for QR codes, EAN-13, EAN-8, UPC-A, UPC-E, Code 128 and Code 39)")
	}
	return codes, nil
}

// capText cuts s at documents.DefaultLimits.MaxTextChars characters,
// saying so.
func capText(s string) string {
	max := documents.DefaultLimits.MaxTextChars
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + fmt.Sprintf("\n[cut: the decoded text is longer than the document tools' limit of %d characters]\n", max)
		}
		n++
	}
	return s
}
