//go:build pdf || documents

package pdf

import (
	"context"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/ioharness/harness/pkg/documents"
)

// matrix is a PDF transformation [a b c d e f].
type matrix [6]float64

var identity = matrix{1, 0, 0, 1, 0, 0}

// mul is m then n: m × n.
func (m matrix) mul(n matrix) matrix {
	return matrix{
		m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

// span is a run of text shown by one operator, placed on the page.
type span struct {
	x, y float64 // start of its baseline, in page space
	endX float64 // where its last glyph ends
	size float64 // its text size, in page space
	text string
	vert bool // its baseline is not horizontal
}

// gstate is the part of the graphics state text extraction needs.
type gstate struct {
	ctm                   matrix
	font                  *font
	size                  float64
	charSpace, wordSpace  float64
	hscale, leading, rise float64
}

// extractor runs one page's content streams and collects its spans.
type extractor struct {
	d     *doc
	ctx   context.Context
	fonts map[int]*font // by font dictionary object number
	spans []span
	ops   int
	// forms are the form XObjects being drawn, by object number, to stop
	// one that draws itself.
	forms map[int]bool
	err   error
}

// maxOpsBetweenChecks is how many operators run between looks at ctx.
const maxOpsBetweenChecks = 4096

// pageText returns the text of page p in reading order, as best it can
// be told: lines in the order the page draws them, each line's pieces
// left to right, a space where the gap between two is wide, a blank
// line where a paragraph's gap is. Errors: a refusal when the page's
// forms nest past MaxDepth or its streams past the budget; ctx.Err().
func (d *doc) pageText(ctx context.Context, p page, fonts map[int]*font) (string, error) {
	x := &extractor{d: d, ctx: ctx, fonts: fonts, forms: map[int]bool{}}
	contents, ok := p.dict.Find("Contents")
	if ok {
		var streams []types.Object
		if a, _ := d.array(contents); a != nil {
			streams = a
		} else {
			streams = []types.Object{contents}
		}
		// The streams of a page are one stream cut in pieces; a piece may
		// end inside an operator, so they are joined first.
		var all []byte
		for i, s := range streams {
			sd, err := d.streamData(s, "a content stream of a page", false)
			if err != nil {
				return "", err
			}
			if sd == nil {
				continue
			}
			if i > 0 {
				all = append(all, '\n')
			}
			all = append(all, sd...)
		}
		g := gstate{ctm: identity, hscale: 1}
		x.run(all, p.res, g, 0)
	}
	if x.err != nil {
		return "", x.err
	}
	return layout(x.spans), nil
}

// contentStream is streamData of a stream read more than once (a form,
// a font's map), kept decoded.
func (d *doc) contentStream(o types.Object, what string) ([]byte, error) {
	return d.streamData(o, what, true)
}

// streamData resolves o to a stream and returns its decoded bytes, nil
// for one that is missing or cannot be decoded; keep keeps them in the
// document for the next reader. Errors: the bomb refusal; a reference
// chain past the limit.
func (d *doc) streamData(o types.Object, what string, keep bool) ([]byte, error) {
	ir, isRef := o.(types.IndirectRef)
	o, err := d.resolve(o)
	if err != nil {
		return nil, err
	}
	sd, ok := o.(types.StreamDict)
	if !ok {
		return nil, nil
	}
	if sd.Content == nil {
		if err := d.decode(&sd, what); err != nil {
			if isBomb(err) {
				return nil, err
			}
			return nil, nil
		}
		if isRef && keep {
			if e, ok := d.xrt.FindTableEntryForIndRef(&ir); ok {
				e.Object = sd
			}
		}
	}
	return sd.Content, nil
}

// run interprets content with resources res from state g; depth is how
// deeply forms nest here.
func (x *extractor) run(content []byte, res types.Dict, g gstate, depth int) {
	l := &lexer{b: content}
	var stack []gstate
	var tm, tlm matrix
	var operands []token
	var arr []token // the operand array being read, of TJ
	inArray := false
	for x.err == nil {
		t := l.next()
		if t.kind == tokEOF {
			return
		}
		switch t.kind {
		case tokArrayOpen:
			inArray, arr = true, arr[:0]
			continue
		case tokArrayClose:
			inArray = false
			operands = append(operands, token{kind: tokArrayOpen})
			continue
		case tokDictOpen, tokDictClose:
			continue
		case tokOp:
		default:
			if inArray {
				arr = append(arr, t)
			} else {
				operands = append(operands, t)
			}
			continue
		}
		if inArray { // an operator inside an array: the array was never closed
			inArray = false
		}
		x.ops++
		if x.ops%maxOpsBetweenChecks == 0 {
			if err := x.ctx.Err(); err != nil {
				x.err = err
				return
			}
		}
		num := func(i int) float64 {
			if i < len(operands) && operands[i].kind == tokNumber {
				return operands[i].num
			}
			return 0
		}
		n := len(operands)
		switch string(t.str) {
		case "q":
			if len(stack) < 1024 {
				stack = append(stack, g)
			}
		case "Q":
			if len(stack) > 0 {
				g = stack[len(stack)-1]
				stack = stack[:len(stack)-1]
			}
		case "cm":
			if n >= 6 {
				g.ctm = matrix{num(n - 6), num(n - 5), num(n - 4), num(n - 3), num(n - 2), num(n - 1)}.mul(g.ctm)
			}
		case "BT":
			tm, tlm = identity, identity
		case "ET":
		case "Tf":
			if n >= 2 {
				g.size = num(n - 1)
				g.font = x.font(res, operands[n-2])
			}
		case "Tc":
			g.charSpace = num(n - 1)
		case "Tw":
			g.wordSpace = num(n - 1)
		case "Tz":
			g.hscale = num(n-1) / 100
		case "TL":
			g.leading = num(n - 1)
		case "Ts":
			g.rise = num(n - 1)
		case "Td":
			if n >= 2 {
				tlm = matrix{1, 0, 0, 1, num(n - 2), num(n - 1)}.mul(tlm)
				tm = tlm
			}
		case "TD":
			if n >= 2 {
				g.leading = -num(n - 1)
				tlm = matrix{1, 0, 0, 1, num(n - 2), num(n - 1)}.mul(tlm)
				tm = tlm
			}
		case "Tm":
			if n >= 6 {
				tlm = matrix{num(n - 6), num(n - 5), num(n - 4), num(n - 3), num(n - 2), num(n - 1)}
				tm = tlm
			}
		case "T*":
			tlm = matrix{1, 0, 0, 1, 0, -g.leading}.mul(tlm)
			tm = tlm
		case "Tj":
			if n >= 1 && operands[n-1].kind == tokString {
				x.show(&tm, g, []token{operands[n-1]})
			}
		case "'":
			tlm = matrix{1, 0, 0, 1, 0, -g.leading}.mul(tlm)
			tm = tlm
			if n >= 1 && operands[n-1].kind == tokString {
				x.show(&tm, g, []token{operands[n-1]})
			}
		case "\"":
			if n >= 3 {
				g.wordSpace, g.charSpace = num(n-3), num(n-2)
			}
			tlm = matrix{1, 0, 0, 1, 0, -g.leading}.mul(tlm)
			tm = tlm
			if n >= 1 && operands[n-1].kind == tokString {
				x.show(&tm, g, []token{operands[n-1]})
			}
		case "TJ":
			x.show(&tm, g, arr)
		case "Do":
			if n >= 1 && operands[n-1].kind == tokName {
				x.form(res, string(operands[n-1].str), g, depth)
			}
		case "BI":
			// An inline image: its dictionary up to ID, then its data.
			for {
				u := l.next()
				if u.kind == tokEOF || (u.kind == tokOp && string(u.str) == "ID") {
					break
				}
			}
			l.skipInlineImage()
		}
		operands = operands[:0]
		if string(t.str) != "TJ" {
			arr = arr[:0]
		}
	}
}

// font returns the font the resource name tok names, read once per
// font dictionary.
func (x *extractor) font(res types.Dict, tok token) *font {
	if tok.kind != tokName || res == nil {
		return fallbackFont
	}
	fonts, _ := x.d.dict(res["Font"])
	if fonts == nil {
		return fallbackFont
	}
	o, ok := fonts.Find(string(tok.str))
	if !ok {
		return fallbackFont
	}
	key := -1
	if ir, ok := o.(types.IndirectRef); ok {
		key = ir.ObjectNumber.Value()
		if f, ok := x.fonts[key]; ok {
			return f
		}
	}
	fd, err := x.d.dict(o)
	if err != nil || fd == nil {
		return fallbackFont
	}
	f := x.d.loadFont(fd)
	if key >= 0 {
		x.fonts[key] = f
	}
	return f
}

// show places the strings of items (and, in a TJ array, the numbers
// that move the next glyph back by thousandths of the text size), moving
// the text matrix past them.
func (x *extractor) show(tm *matrix, g gstate, items []token) {
	f := g.font
	if f == nil {
		f = fallbackFont
	}
	var b strings.Builder
	var start matrix
	started := false
	flush := func() {
		if b.Len() == 0 {
			return
		}
		x.addSpan(start, *tm, g, b.String())
		b.Reset()
		started = false
	}
	for _, it := range items {
		if it.kind == tokNumber {
			adj := -it.num / 1000 * g.size * g.hscale
			// A gap as wide as a good part of a space is a word break.
			if it.num < -200 && b.Len() > 0 && !strings.HasSuffix(b.String(), " ") {
				b.WriteByte(' ')
			}
			*tm = matrix{1, 0, 0, 1, adj, 0}.mul(*tm)
			continue
		}
		if it.kind != tokString {
			continue
		}
		for _, gl := range f.decode(it.str) {
			if !started {
				start = *tm
				started = true
			}
			b.WriteString(gl.text)
			adv := gl.width/1000*g.size + g.charSpace
			if gl.space {
				adv += g.wordSpace
			}
			*tm = matrix{1, 0, 0, 1, adv * g.hscale, 0}.mul(*tm)
		}
	}
	flush()
}

// addSpan records text shown from the text matrix start to end.
func (x *extractor) addSpan(start, end matrix, g gstate, text string) {
	rise := matrix{1, 0, 0, 1, 0, g.rise}
	s := rise.mul(start).mul(g.ctm)
	e := rise.mul(end).mul(g.ctm)
	// The text size in page space: the length of a unit vertical in text
	// space, times the size.
	scaled := matrix{0, 0, 0, g.size, 0, 0}.mul(start).mul(g.ctm)
	size := math.Hypot(scaled[2], scaled[3])
	if size < 0.1 {
		size = 0.1
	}
	dx, dy := e[4]-s[4], e[5]-s[5]
	vert := math.Abs(dy) > math.Abs(dx)*0.2 && math.Abs(dy) > size*0.1
	x.spans = append(x.spans, span{x: s[4], y: s[5], endX: e[4], size: size, text: text, vert: vert})
}

// form draws the XObject named name when it is a form, with its own
// resources and matrix.
func (x *extractor) form(res types.Dict, name string, g gstate, depth int) {
	if res == nil {
		return
	}
	xobjs, _ := x.d.dict(res["XObject"])
	if xobjs == nil {
		return
	}
	o, ok := xobjs.Find(name)
	if !ok {
		return
	}
	objNr := -1
	if ir, ok := o.(types.IndirectRef); ok {
		objNr = ir.ObjectNumber.Value()
	}
	fd, err := x.d.dict(o)
	if err != nil {
		x.err = err
		return
	}
	if fd == nil || x.d.name(fd["Subtype"]) != "Form" {
		return
	}
	if depth+1 > MaxDepth {
		x.err = formDepthError()
		return
	}
	if objNr >= 0 {
		if x.forms[objNr] {
			return // a form that draws itself is drawn once
		}
		x.forms[objNr] = true
		defer delete(x.forms, objNr)
	}
	content, err := x.d.contentStream(o, "a form drawn on a page")
	if err != nil {
		x.err = err
		return
	}
	if content == nil {
		return
	}
	if m, _ := x.d.array(fd["Matrix"]); len(m) == 6 {
		var fm matrix
		for i := range fm {
			fm[i], _ = x.d.number(m[i])
		}
		g.ctm = fm.mul(g.ctm)
	}
	inner := res
	if r, _ := x.d.dict(fd["Resources"]); r != nil {
		inner = r
	}
	x.run(content, inner, g, depth+1)
}

func formDepthError() error {
	return documents.Errorf("the PDF draws forms inside forms deeper than the pdf tools' limit of %d levels; the file is damaged or built to exhaust a parser", MaxDepth)
}

// layout joins spans into lines: a span starts a new line when its
// baseline is not the current line's; a line's spans are put left to
// right, a space between two a gap apart.
func layout(spans []span) string {
	type line struct {
		y, size float64
		spans   []span
	}
	var lines []*line
	var cur *line
	for _, s := range spans {
		if strings.TrimSpace(s.text) == "" && cur == nil {
			continue
		}
		if cur != nil && !s.vert && math.Abs(s.y-cur.y) <= 0.4*max(s.size, cur.size) {
			cur.spans = append(cur.spans, s)
			continue
		}
		cur = &line{y: s.y, size: s.size, spans: []span{s}}
		lines = append(lines, cur)
	}
	var b strings.Builder
	var prev *line
	for _, ln := range lines {
		slices.SortStableFunc(ln.spans, func(a, c span) int {
			switch {
			case a.x < c.x-0.01:
				return -1
			case a.x > c.x+0.01:
				return 1
			}
			return 0
		})
		var lb strings.Builder
		endX := math.Inf(-1)
		for _, s := range ln.spans {
			if lb.Len() > 0 {
				gap := s.x - endX
				last, _ := lastRune(lb.String())
				if gap > 0.15*s.size && !unicode.IsSpace(last) && !strings.HasPrefix(s.text, " ") {
					lb.WriteByte(' ')
				}
			}
			lb.WriteString(s.text)
			endX = max(endX, s.endX)
		}
		text := strings.TrimRightFunc(cleanText(lb.String()), unicode.IsSpace)
		if strings.TrimSpace(text) == "" {
			continue
		}
		if prev != nil && prev.y-ln.y > 2.2*max(ln.size, prev.size) {
			b.WriteByte('\n') // a paragraph's gap
		}
		b.WriteString(text)
		b.WriteByte('\n')
		prev = ln
	}
	return b.String()
}

func lastRune(s string) (rune, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0x80 || s[i] >= 0xc0 {
			r := []rune(s[i:])
			if len(r) > 0 {
				return r[0], true
			}
		}
	}
	return 0, false
}

// ligatures are the ligature characters a search for their letters must
// find, with those letters.
var ligatures = strings.NewReplacer("ﬀ", "ff", "ﬁ", "fi", "ﬂ", "fl", "ﬃ", "ffi", "ﬄ", "ffl", "ﬅ", "st", "ﬆ", "st")

// cleanText spells ligatures out and drops control characters and the
// replacement character.
func cleanText(s string) string {
	s = ligatures.Replace(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r == '\ufffd' || r == 0xad || (unicode.IsControl(r) && r != '\n'):
			return -1
		case r == '\n':
			return ' '
		}
		return r
	}, s)
}
