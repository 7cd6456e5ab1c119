//go:build pdf || documents

package pdf

import (
	"strings"
	"unicode/utf16"

	pdffont "github.com/pdfcpu/pdfcpu/pkg/font"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
	"golang.org/x/text/encoding/charmap"
)

// font turns the bytes a text-showing operator shows into text and
// advances, as the font's dictionary says: a ToUnicode CMap where there
// is one, else the simple font's encoding (its base encoding and
// Differences, through glyph names), else, for a composite font with a
// UCS-2 or UTF-16 CMap, the codes themselves.
type font struct {
	composite bool
	// codespace splits a composite font's bytes into codes; empty means
	// two bytes a code.
	codespace []codeRange
	toUnicode *cmap
	// enc is a simple font's text for each code.
	enc *[256]string
	// utf16 says a composite font's codes are UTF-16 code units.
	utf16 bool
	// widths are glyph widths in thousandths of the text size, by code
	// (simple) or CID (composite, Identity CMaps only).
	widths   map[uint32]float64
	defWidth float64
	// core is the standard-14 font whose metrics stand in for missing
	// widths, or "".
	core string
	// scale turns a Type 3 font's glyph space into thousandths.
	scale float64
}

// glyph is one code a string shows.
type glyph struct {
	code  uint32
	text  string
	width float64 // thousandths of the text size
	space bool    // the single-byte code 32, which word spacing widens
}

// codeRange is one range of a CMap's codespace: codes of len(lo) bytes
// whose every byte lies between lo's and hi's.
type codeRange struct {
	lo, hi []byte
}

// fallbackFont reads a string whose font is missing: one byte a
// character, as Latin-1.
var fallbackFont = &font{enc: &latin1Encoding, defWidth: 500, scale: 1}

// loadFont reads the font dictionary fd.
func (d *doc) loadFont(fd types.Dict) *font {
	f := &font{defWidth: 0, scale: 1}
	sub := d.name(fd["Subtype"])
	base := d.name(fd["BaseFont"])
	if i := strings.IndexByte(base, '+'); i == 6 { // a subset's tag, ABCDEF+Name
		base = base[i+1:]
	}
	if tu, ok := fd.Find("ToUnicode"); ok {
		if data, _ := d.contentStream(tu, "a font's ToUnicode map"); data != nil {
			f.toUnicode = parseCMap(data)
		}
	}
	if sub == "Type0" {
		f.composite = true
		f.defWidth = 1000
		encName := ""
		if eo, ok := fd.Find("Encoding"); ok {
			if data, _ := d.contentStream(eo, "a font's encoding"); data != nil {
				if cm := parseCMap(data); cm != nil {
					f.codespace = cm.codespace
				}
			} else {
				encName = d.name(eo)
			}
		}
		if len(f.codespace) == 0 && f.toUnicode != nil && encName != "Identity-H" && encName != "Identity-V" {
			f.codespace = f.toUnicode.codespace
		}
		f.utf16 = strings.Contains(encName, "UCS2") || strings.Contains(encName, "UTF16")
		identity := encName == "Identity-H" || encName == "Identity-V"
		if desc, _ := d.array(fd["DescendantFonts"]); len(desc) > 0 {
			if cf, _ := d.dict(desc[0]); cf != nil {
				if dw, ok := d.number(cf["DW"]); ok {
					f.defWidth = dw
				}
				if identity {
					f.widths = d.cidWidths(cf["W"])
				}
			}
		}
		return f
	}
	// A simple font: Type1, MMType1, TrueType or Type3.
	f.enc = d.simpleEncoding(fd, sub)
	if sub == "Type3" {
		if m, _ := d.array(fd["FontMatrix"]); len(m) > 0 {
			if a, ok := d.number(m[0]); ok {
				f.scale = a * 1000
			}
		}
	}
	if pdffont.IsCoreFont(base) {
		f.core = base
	}
	first, _ := d.number(fd["FirstChar"])
	if ws, _ := d.array(fd["Widths"]); len(ws) > 0 {
		f.widths = make(map[uint32]float64, len(ws))
		for i, w := range ws {
			if v, ok := d.number(w); ok {
				f.widths[uint32(int(first)+i)] = v
			}
		}
	}
	if fdesc, _ := d.dict(fd["FontDescriptor"]); fdesc != nil {
		if mw, ok := d.number(fdesc["MissingWidth"]); ok {
			f.defWidth = mw
		}
	}
	if f.defWidth == 0 {
		f.defWidth = 500
	}
	return f
}

// cidWidths reads a CIDFont's W array: "c [w1 w2 …]" gives widths from
// CID c on, "c1 c2 w" one width to a range (capped at 65536 CIDs).
func (d *doc) cidWidths(o types.Object) map[uint32]float64 {
	a, _ := d.array(o)
	if len(a) == 0 {
		return nil
	}
	m := map[uint32]float64{}
	for i := 0; i < len(a); {
		c, ok := d.number(a[i])
		if !ok || i+1 >= len(a) {
			break
		}
		if ws, _ := d.array(a[i+1]); ws != nil {
			for k, w := range ws {
				if v, ok := d.number(w); ok {
					m[uint32(int(c)+k)] = v
				}
			}
			i += 2
			continue
		}
		if i+2 >= len(a) {
			break
		}
		c2, ok2 := d.number(a[i+1])
		w, ok3 := d.number(a[i+2])
		if ok2 && ok3 && c2 >= c && c2-c < 65536 {
			for k := uint32(c); k <= uint32(c2); k++ {
				m[k] = w
			}
		}
		i += 3
	}
	return m
}

// simpleEncoding is a simple font's text for each code.
func (d *doc) simpleEncoding(fd types.Dict, subtype string) *[256]string {
	base := &standardEncoding
	if subtype == "TrueType" {
		base = &winAnsiEncoding
	}
	var diffs types.Array
	eo, ok := fd.Find("Encoding")
	if ok {
		if n := d.name(eo); n != "" {
			base = namedEncoding(n, base)
		} else if ed, _ := d.dict(eo); ed != nil {
			if n := d.name(ed["BaseEncoding"]); n != "" {
				base = namedEncoding(n, base)
			}
			diffs, _ = d.array(ed["Differences"])
		}
	}
	if len(diffs) == 0 {
		return base
	}
	enc := *base
	code := -1
	for _, o := range diffs {
		if v, ok := d.number(o); ok {
			code = int(v)
			continue
		}
		if n := d.name(o); n != "" && code >= 0 && code < 256 {
			enc[code] = glyphText(n)
			code++
		}
	}
	return &enc
}

// namedEncoding is the table of a predefined encoding, or def.
func namedEncoding(name string, def *[256]string) *[256]string {
	switch name {
	case "WinAnsiEncoding":
		return &winAnsiEncoding
	case "MacRomanEncoding":
		return &macRomanEncoding
	case "StandardEncoding":
		return &standardEncoding
	case "PDFDocEncoding":
		return &latin1Encoding
	}
	return def
}

// decode splits s into the font's codes.
func (f *font) decode(s []byte) []glyph {
	var out []glyph
	if !f.composite {
		for _, b := range s {
			c := uint32(b)
			g := glyph{code: c, width: f.width(c), space: b == ' '}
			if t, ok := f.toUnicode.lookup(c, 1); ok {
				g.text = t
			} else {
				g.text = f.enc[b]
			}
			out = append(out, g)
		}
		return out
	}
	for i := 0; i < len(s); {
		n := f.codeLen(s[i:])
		var c uint32
		for _, b := range s[i : i+n] {
			c = c<<8 | uint32(b)
		}
		g := glyph{code: c, width: f.width(c), space: n == 1 && c == 32}
		if t, ok := f.toUnicode.lookup(c, n); ok {
			g.text = t
		} else if f.utf16 {
			g.text = string(utf16.Decode([]uint16{uint16(c)}))
		}
		out = append(out, g)
		i += n
	}
	return out
}

// codeLen is the length of the code s begins with.
func (f *font) codeLen(s []byte) int {
	if len(f.codespace) == 0 {
		return min(2, len(s))
	}
	for n := 1; n <= 4 && n <= len(s); n++ {
		for _, r := range f.codespace {
			if len(r.lo) == n && inRange(s[:n], r) {
				return n
			}
		}
	}
	return min(len(f.codespace[0].lo), len(s))
}

func inRange(b []byte, r codeRange) bool {
	for k := range b {
		if b[k] < r.lo[k] || b[k] > r.hi[k] {
			return false
		}
	}
	return true
}

// width is a code's advance in thousandths of the text size.
func (f *font) width(c uint32) float64 {
	if w, ok := f.widths[c]; ok {
		return w * f.scale
	}
	if f.core != "" && c < 256 {
		if w, err := pdffont.CharWidth(f.core, rune(c)); err == nil && w > 0 {
			return float64(w)
		}
	}
	return f.defWidth
}

// cmap is a parsed CMap: its codespace, and, for a ToUnicode CMap, the
// text of codes, one by one (bfchar) and by ranges (bfrange).
type cmap struct {
	codespace []codeRange
	single    map[uint64]string // by code length<<32 | code
	ranges    []bfRange
}

// bfRange maps the codes lo…hi of n bytes: to dst with its last UTF-16
// unit incremented, or to list's entries in turn.
type bfRange struct {
	lo, hi uint32
	n      int
	dst    []uint16
	list   []string
}

// maxCMapEntries bounds what one CMap may define.
const maxCMapEntries = 200_000

// parseCMap reads a CMap's codespace and mappings, or returns nil for
// one with neither. What it cannot parse it skips.
func parseCMap(b []byte) *cmap {
	if len(b) == 0 {
		return nil
	}
	cm := &cmap{single: map[uint64]string{}}
	l := &lexer{b: b}
	var operands []token
	entries := 0
	for entries < maxCMapEntries {
		t := l.next()
		if t.kind == tokEOF {
			break
		}
		if t.kind != tokOp {
			if t.kind == tokArrayOpen {
				// an array of destinations, in a bfrange
				var arr []token
				for {
					u := l.next()
					if u.kind == tokArrayClose || u.kind == tokEOF {
						break
					}
					arr = append(arr, u)
				}
				operands = append(operands, token{kind: tokArrayOpen, str: nil, num: float64(len(arr))})
				operands = append(operands, arr...)
				continue
			}
			operands = append(operands, t)
			continue
		}
		switch string(t.str) {
		case "begincodespacerange", "beginbfchar", "beginbfrange", "begincidrange", "begincidchar", "beginnotdefrange":
			operands = operands[:0]
			continue
		case "endcodespacerange":
			for i := 0; i+1 < len(operands); i += 2 {
				lo, hi := operands[i].str, operands[i+1].str
				if len(lo) > 0 && len(lo) == len(hi) && len(lo) <= 4 {
					cm.codespace = append(cm.codespace, codeRange{lo: lo, hi: hi})
				}
			}
		case "endbfchar":
			for i := 0; i+1 < len(operands); i += 2 {
				src, dst := operands[i], operands[i+1]
				if src.kind != tokString || len(src.str) == 0 || len(src.str) > 4 {
					continue
				}
				text := ""
				switch dst.kind {
				case tokString:
					text = utf16Text(dst.str)
				case tokName:
					text = glyphText(string(dst.str))
				}
				cm.single[uint64(len(src.str))<<32|uint64(codeOf(src.str))] = text
				entries++
			}
		case "endbfrange":
			for i := 0; i+2 < len(operands); {
				lo, hi := operands[i], operands[i+1]
				i += 2
				r := bfRange{n: len(lo.str), lo: codeOf(lo.str), hi: codeOf(hi.str)}
				dst := operands[i]
				i++
				if dst.kind == tokArrayOpen {
					n := int(dst.num)
					for k := 0; k < n && i < len(operands); k++ {
						r.list = append(r.list, utf16Text(operands[i].str))
						i++
					}
				} else if dst.kind == tokString {
					r.dst = utf16Units(dst.str)
				}
				if lo.kind == tokString && hi.kind == tokString && r.n > 0 && r.n <= 4 && r.hi >= r.lo && (r.dst != nil || r.list != nil) {
					cm.ranges = append(cm.ranges, r)
					entries++
				}
			}
		}
		operands = operands[:0]
	}
	if len(cm.codespace) == 0 && len(cm.single) == 0 && len(cm.ranges) == 0 {
		return nil
	}
	return cm
}

// lookup is the text of the code c of n bytes.
func (cm *cmap) lookup(c uint32, n int) (string, bool) {
	if cm == nil {
		return "", false
	}
	if t, ok := cm.single[uint64(n)<<32|uint64(c)]; ok {
		return t, true
	}
	for _, r := range cm.ranges {
		if r.n != n || c < r.lo || c > r.hi {
			continue
		}
		off := c - r.lo
		if r.list != nil {
			if int(off) < len(r.list) {
				return r.list[off], true
			}
			return "", false
		}
		u := append([]uint16(nil), r.dst...)
		u[len(u)-1] += uint16(off)
		return string(utf16.Decode(u)), true
	}
	return "", false
}

func codeOf(b []byte) uint32 {
	var c uint32
	for _, x := range b {
		c = c<<8 | uint32(x)
	}
	return c
}

func utf16Units(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if len(b)%2 == 1 {
		b = append([]byte{0}, b...)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	return u
}

func utf16Text(b []byte) string {
	return string(utf16.Decode(utf16Units(b)))
}

// The simple fonts' predefined encodings, by code.
var (
	standardEncoding [256]string
	winAnsiEncoding  [256]string
	macRomanEncoding [256]string
	latin1Encoding   [256]string
)

// standardHigh is where Adobe's StandardEncoding differs from ASCII: its
// codes from 0x80 up (all others undefined), and two quotes below.
var standardHigh = map[byte]rune{
	0x27: '’', 0x60: '‘',
	0xa1: '¡', 0xa2: '¢', 0xa3: '£', 0xa4: '⁄', 0xa5: '¥', 0xa6: 'ƒ', 0xa7: '§', 0xa8: '¤',
	0xa9: '\'', 0xaa: '“', 0xab: '«', 0xac: '‹', 0xad: '›', 0xae: 'ﬁ', 0xaf: 'ﬂ',
	0xb1: '–', 0xb2: '†', 0xb3: '‡', 0xb4: '·', 0xb6: '¶', 0xb7: '•', 0xb8: '‚', 0xb9: '„',
	0xba: '”', 0xbb: '»', 0xbc: '…', 0xbd: '‰', 0xbf: '¿',
	0xc1: '`', 0xc2: '´', 0xc3: 'ˆ', 0xc4: '˜', 0xc5: '¯', 0xc6: '˘', 0xc7: '˙', 0xc8: '¨',
	0xca: '˚', 0xcb: '¸', 0xcd: '˝', 0xce: '˛', 0xcf: 'ˇ', 0xd0: '—',
	0xe1: 'Æ', 0xe3: 'ª', 0xe8: 'Ł', 0xe9: 'Ø', 0xea: 'Œ', 0xeb: 'º',
	0xf1: 'æ', 0xf5: 'ı', 0xf8: 'ł', 0xf9: 'ø', 0xfa: 'œ', 0xfb: 'ß',
}

func init() {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if c >= 32 && c < 127 {
			standardEncoding[c] = string(rune(c))
		}
		if r, ok := standardHigh[b]; ok {
			standardEncoding[c] = string(r)
		}
		if c >= 32 {
			if r := charmap.Windows1252.DecodeByte(b); r != '\ufffd' {
				winAnsiEncoding[c] = string(r)
			}
			if r := charmap.Macintosh.DecodeByte(b); r != '\ufffd' {
				macRomanEncoding[c] = string(r)
			}
			latin1Encoding[c] = string(rune(c))
		}
		if c == 127 {
			winAnsiEncoding[c], macRomanEncoding[c], latin1Encoding[c] = "", "", ""
		}
	}
	// WinAnsi shows the bullet at its undefined codes, and a space at 0xA0.
	for _, c := range []int{0x81, 0x8d, 0x8f, 0x90, 0x9d} {
		winAnsiEncoding[c] = "•"
	}
	winAnsiEncoding[0xa0] = " "
}
