//go:build pdf || documents

package pdf

import (
	"strconv"
	"strings"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

// glyphText is the text of a glyph name, as a font's Differences name
// its glyphs: the Adobe Glyph List's names of the Latin letters and
// common signs, uniXXXX and uXXXX[XX] names, ligatures joined by "_",
// and a suffix after "." dropped ("a.sc" is "a"). An unknown name is "".
func glyphText(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	if strings.Contains(name, "_") {
		var b strings.Builder
		for _, part := range strings.Split(name, "_") {
			b.WriteString(glyphText(part))
		}
		return b.String()
	}
	if t, ok := glyphNames[name]; ok {
		return t
	}
	if h, ok := strings.CutPrefix(name, "uni"); ok && len(h) >= 4 && len(h)%4 == 0 {
		var u []uint16
		for i := 0; i < len(h); i += 4 {
			v, err := strconv.ParseUint(h[i:i+4], 16, 16)
			if err != nil {
				return ""
			}
			u = append(u, uint16(v))
		}
		return string(utf16.Decode(u))
	}
	if h, ok := strings.CutPrefix(name, "u"); ok && len(h) >= 4 && len(h) <= 6 {
		if v, err := strconv.ParseUint(h, 16, 32); err == nil && v <= 0x10ffff {
			return string(rune(v))
		}
	}
	return ""
}

// asciiNames are the glyph names of the printable ASCII characters, from
// the space on.
var asciiNames = strings.Fields(`space exclam quotedbl numbersign dollar percent ampersand
	quotesingle parenleft parenright asterisk plus comma hyphen period slash zero one two
	three four five six seven eight nine colon semicolon less equal greater question at
	A B C D E F G H I J K L M N O P Q R S T U V W X Y Z bracketleft backslash bracketright
	asciicircum underscore grave a b c d e f g h i j k l m n o p q r s t u v w x y z
	braceleft bar braceright asciitilde`)

// latin1Names are the glyph names of U+00A0 to U+00FF.
var latin1Names = strings.Fields(`nbspace exclamdown cent sterling currency yen brokenbar
	section dieresis copyright ordfeminine guillemotleft logicalnot sfthyphen registered
	macron degree plusminus twosuperior threesuperior acute mu paragraph periodcentered
	cedilla onesuperior ordmasculine guillemotright onequarter onehalf threequarters
	questiondown Agrave Aacute Acircumflex Atilde Adieresis Aring AE Ccedilla Egrave Eacute
	Ecircumflex Edieresis Igrave Iacute Icircumflex Idieresis Eth Ntilde Ograve Oacute
	Ocircumflex Otilde Odieresis multiply Oslash Ugrave Uacute Ucircumflex Udieresis Yacute
	Thorn germandbls agrave aacute acircumflex atilde adieresis aring ae ccedilla egrave
	eacute ecircumflex edieresis igrave iacute icircumflex idieresis eth ntilde ograve
	oacute ocircumflex otilde odieresis divide oslash ugrave uacute ucircumflex udieresis
	yacute thorn ydieresis`)

// otherNames are further glyph names, with their text.
var otherNames = map[string]string{
	"Euro": "€", "quotesinglbase": "‚", "florin": "ƒ", "quotedblbase": "„", "ellipsis": "…",
	"dagger": "†", "daggerdbl": "‡", "circumflex": "ˆ", "perthousand": "‰", "guilsinglleft": "‹",
	"OE": "Œ", "oe": "œ", "quoteleft": "‘", "quoteright": "’", "quotedblleft": "“",
	"quotedblright": "”", "bullet": "•", "endash": "–", "emdash": "—", "tilde": "˜",
	"trademark": "™", "guilsinglright": "›", "fi": "fi", "fl": "fl", "ff": "ff", "ffi": "ffi",
	"ffl": "ffl", "dotlessi": "ı", "Lslash": "Ł", "lslash": "ł", "fraction": "⁄", "minus": "−",
	"breve": "˘", "dotaccent": "˙", "ring": "˚", "ogonek": "˛", "caron": "ˇ", "hungarumlaut": "˝",
	"nonbreakingspace": " ", "softhyphen": "-", "middot": "·", "mu1": "µ", "Omega": "Ω",
	"pi": "π", "minute": "′", "second": "″", "arrowleft": "←", "arrowright": "→",
	"arrowup": "↑", "arrowdown": "↓", "lessequal": "≤", "greaterequal": "≥", "notequal": "≠",
	"infinity": "∞", "approxequal": "≈", "Dcroat": "Đ", "dcroat": "đ", "Hbar": "Ħ", "hbar": "ħ",
	"IJ": "Ĳ", "ij": "ĳ", "kgreenlandic": "ĸ", "Ldot": "Ŀ", "ldot": "ŀ", "napostrophe": "ŉ",
	"Eng": "Ŋ", "eng": "ŋ", "Tbar": "Ŧ", "tbar": "ŧ", "longs": "ſ", "figuredash": "‒",
	"underscoredbl": "‗", "quotereversed": "‛", "checkmark": "✓", "fullstop": ".",
	"periodcentered": "·",
}

// markNames name the combining marks the Latin letters' glyph names end
// with ("Aogonek" is A and the ogonek).
var markNames = map[rune][]string{
	0x0300: {"grave"}, 0x0301: {"acute"}, 0x0302: {"circumflex"}, 0x0303: {"tilde"},
	0x0304: {"macron"}, 0x0306: {"breve"}, 0x0307: {"dotaccent"}, 0x0308: {"dieresis"},
	0x030a: {"ring"}, 0x030b: {"hungarumlaut"}, 0x030c: {"caron"},
	0x0326: {"commaaccent"}, 0x0327: {"cedilla", "commaaccent"}, 0x0328: {"ogonek"},
}

// glyphNames maps a glyph name to its text.
var glyphNames = func() map[string]string {
	m := make(map[string]string, 600)
	for i, n := range asciiNames {
		m[n] = string(rune(' ' + i))
	}
	for i, n := range latin1Names {
		if _, ok := m[n]; !ok {
			m[n] = string(rune(0xa0 + i))
		}
	}
	m["nbspace"] = " "
	m["sfthyphen"] = "-"
	// The accented letters of Latin Extended-A and -B: their names are
	// the letter's and the mark's.
	for r := rune(0x100); r < 0x250; r++ {
		d := []rune(norm.NFD.String(string(r)))
		if len(d) != 2 || d[0] > 'z' {
			continue
		}
		for _, mark := range markNames[d[1]] {
			n := string(d[0]) + mark
			if _, ok := m[n]; !ok {
				m[n] = string(r)
			}
		}
	}
	for n, t := range otherNames {
		m[n] = t
	}
	return m
}()
