//go:build pdf || documents

package pdf

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"codeberg.org/go-pdf/fpdf"
	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
	"golang.org/x/text/encoding/charmap"

	"github.com/ioharness/harness/pkg/documents"
)

// The layout of a written page: A4, in points.
const (
	margin      = 56.0 // about 2 cm
	maxFontSize = 11.0
	minFontSize = 6.0
	lineSpacing = 1.3 // of the text size
	// MaxWritePages is the most pages pdf.write makes.
	MaxWritePages = 2000
)

// Write returns a new PDF with one A4 page for each item of pages, its
// text wrapped to the page in Helvetica: at 11 points, or smaller, down
// to 6, when that is what it takes to fit the page. Line breaks in an
// item are kept; tabs become spaces. Helvetica is one of the PDF core
// fonts, which every viewer has, so its text is limited to their code
// page (Windows-1252: Western European letters and common signs).
// Errors, each a refusal: no pages, or more than MaxWritePages; a
// character outside that code page (named, with its page); an item too
// long for one page even at 6 points.
func Write(pages []string) ([]byte, error) {
	if len(pages) == 0 {
		return nil, documents.Errorf("no pages were given; give pages as [\"the first page's text\", …], one item a page")
	}
	if len(pages) > MaxWritePages {
		return nil, documents.Errorf("%d pages were given, over the pdf tools' limit of %d a file", len(pages), MaxWritePages)
	}
	encoded := make([]string, len(pages))
	for i, p := range pages {
		s, err := winAnsiText(p)
		if err != nil {
			return nil, documents.Errorf("page %d: %v", i+1, err)
		}
		encoded[i] = s
	}
	pdf := fpdf.NewCustom(&fpdf.InitType{OrientationStr: "P", UnitStr: "pt", SizeStr: "A4"})
	pdf.SetMargins(margin, margin, margin)
	pdf.SetAutoPageBreak(false, margin)
	pdf.SetCreationDate(time.Unix(0, 0).UTC())
	pdf.SetModificationDate(time.Unix(0, 0).UTC())
	pdf.SetProducer("harness pdf_write", false)
	pdf.SetCompression(true)
	pageW, pageH := pdf.GetPageSize()
	width, height := pageW-2*margin, pageH-2*margin
	for i, text := range encoded {
		pdf.AddPage()
		size, lines := fitPage(pdf, text, width, height)
		if lines == nil {
			return nil, documents.Errorf("page %d's text is too long for one page even at %g points; split it into several items", i+1, minFontSize)
		}
		pdf.SetFont("Helvetica", "", size)
		lh := size * lineSpacing
		for k, ln := range lines {
			pdf.Text(margin, margin+size+float64(k)*lh, ln)
		}
	}
	if err := pdf.Error(); err != nil {
		return nil, documents.Errorf("the PDF cannot be made: %v", err)
	}
	var b bytes.Buffer
	if err := pdf.Output(&b); err != nil {
		return nil, documents.Errorf("the PDF cannot be made: %v", err)
	}
	return b.Bytes(), nil
}

// winAnsiText is s in Windows-1252, as the core fonts take it, with tabs
// as spaces and other control characters but line breaks dropped. A
// character outside the code page is refused, named.
func winAnsiText(s string) (string, error) {
	var out []byte
	for i, r := range strings.ReplaceAll(s, "\r\n", "\n") {
		switch {
		case r == '\n':
			out = append(out, '\n')
			continue
		case r == '\t':
			out = append(out, ' ')
			continue
		case unicode.IsControl(r):
			continue
		}
		b, ok := charmap.Windows1252.EncodeRune(r)
		if !ok {
			return "", fmt.Errorf("the character %q (U+%04X, at byte %d) is outside what the PDF's core font (Helvetica, Windows-1252: Western European letters and common signs) can show; replace it, or write the text in another format", r, r, i)
		}
		out = append(out, b)
	}
	return string(out), nil
}

// fitPage finds the largest text size from maxFontSize down to
// minFontSize at which text fits the width×height box, and the lines it
// wraps to; nil lines when none does.
func fitPage(pdf *fpdf.Fpdf, text string, width, height float64) (float64, []string) {
	for size := maxFontSize; size >= minFontSize; size -= 0.5 {
		pdf.SetFont("Helvetica", "", size)
		lines := wrap(pdf, text, width)
		if float64(len(lines)-1)*size*lineSpacing+size <= height {
			return size, lines
		}
	}
	return 0, nil
}

// wrap breaks text (in Windows-1252) into lines no wider than width in
// the current font: at spaces, and inside a word longer than a line.
func wrap(pdf *fpdf.Fpdf, text string, width float64) []string {
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			for pdf.GetStringWidth(word) > width {
				// A word longer than a line is cut where it fills one.
				k := 1
				for k < len(word) && pdf.GetStringWidth(word[:k+1]) <= width {
					k++
				}
				if line != "" {
					lines = append(lines, line)
					line = ""
				}
				lines = append(lines, word[:k])
				word = word[k:]
			}
			if word == "" {
				continue
			}
			next := word
			if line != "" {
				next = line + " " + word
			}
			if line != "" && pdf.GetStringWidth(next) > width {
				lines = append(lines, line)
				line = word
				continue
			}
			line = next
		}
		lines = append(lines, line)
	}
	return lines
}

// Watermark returns the PDF in with text stamped across every page,
// diagonally, in translucent grey Helvetica, and the number of pages.
// The text is limited to the core fonts' code page (see Write). Errors:
// empty or over-long text, or a character outside the code page; those
// of open; pdfcpu's failure to stamp or write the file.
func Watermark(ctx context.Context, in []byte, text string) ([]byte, int, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, 0, documents.Errorf("the watermark text is empty; give the text to stamp, such as {\"text\": \"DRAFT\"}")
	}
	if len([]rune(text)) > 200 {
		return nil, 0, documents.Errorf("the watermark text has %d characters, over the limit of 200; give a shorter one", len([]rune(text)))
	}
	if strings.ContainsAny(text, "\r\n\t") {
		return nil, 0, documents.Errorf("the watermark text must be one line, without line breaks or tabs")
	}
	if _, err := winAnsiText(text); err != nil {
		return nil, 0, documents.Errorf("the watermark text: %v", err)
	}
	d, err := open(ctx, in)
	if err != nil {
		return nil, 0, err
	}
	if err := api.ValidateContext(d.ctx); err != nil {
		return nil, 0, documents.Errorf("the PDF is too damaged to stamp (%v)", err)
	}
	wm, err := api.TextWatermark(escapeDesc(text), "fontname:Helvetica, points:48, scalefactor:0.6 rel, rotation:45, opacity:0.35, fillcolor:#808080", true, false, types.POINTS)
	if err != nil {
		return nil, 0, documents.Errorf("the watermark cannot be made: %v", err)
	}
	if err := pdfcpu.AddWatermarks(d.ctx, nil, wm); err != nil {
		return nil, 0, documents.Errorf("the PDF cannot be stamped (%v); the file may be damaged", err)
	}
	out, err := d.write()
	if err != nil {
		return nil, 0, err
	}
	return out, d.ctx.PageCount, nil
}

// escapeDesc keeps a watermark's text as it is: pdfcpu reads "\n" in it
// as a line break, so a backslash is doubled.
func escapeDesc(s string) string {
	return strings.ReplaceAll(s, `\`, `\\`)
}
