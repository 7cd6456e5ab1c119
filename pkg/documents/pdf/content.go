//go:build pdf || documents

package pdf

import (
	"bytes"
	"strconv"
)

// A content stream is a sequence of operands followed by an operator
// (PDF 32000-1:2008, 7.8.2). lexer reads one operand or operator at a
// time; it never fails: what it cannot make sense of it skips, as
// viewers do.
type lexer struct {
	b []byte
	i int
}

// tokKind is what a token is.
type tokKind int

const (
	tokEOF tokKind = iota
	tokNumber
	tokString // a literal or hexadecimal string, its bytes decoded
	tokName
	tokOp // an operator, or a keyword such as true, false, null
	tokArrayOpen
	tokArrayClose
	tokDictOpen
	tokDictClose
)

// token is one lexical item.
type token struct {
	kind tokKind
	num  float64
	str  []byte // a string's bytes, a name's or an operator's text
}

func isSpace(c byte) bool {
	switch c {
	case 0, '\t', '\n', '\f', '\r', ' ':
		return true
	}
	return false
}

func isDelim(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

// next returns the next token.
func (l *lexer) next() token {
	for l.i < len(l.b) {
		c := l.b[l.i]
		if isSpace(c) {
			l.i++
			continue
		}
		if c == '%' { // a comment, to the end of the line
			for l.i < len(l.b) && l.b[l.i] != '\n' && l.b[l.i] != '\r' {
				l.i++
			}
			continue
		}
		break
	}
	if l.i >= len(l.b) {
		return token{kind: tokEOF}
	}
	c := l.b[l.i]
	switch {
	case c == '(':
		l.i++
		return token{kind: tokString, str: l.literal()}
	case c == '<' && l.i+1 < len(l.b) && l.b[l.i+1] == '<':
		l.i += 2
		return token{kind: tokDictOpen}
	case c == '>' && l.i+1 < len(l.b) && l.b[l.i+1] == '>':
		l.i += 2
		return token{kind: tokDictClose}
	case c == '<':
		l.i++
		return token{kind: tokString, str: l.hex()}
	case c == '[':
		l.i++
		return token{kind: tokArrayOpen}
	case c == ']':
		l.i++
		return token{kind: tokArrayClose}
	case c == '/':
		l.i++
		return token{kind: tokName, str: l.name()}
	case c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9'):
		start := l.i
		l.i++
		for l.i < len(l.b) && !isSpace(l.b[l.i]) && !isDelim(l.b[l.i]) {
			l.i++
		}
		f, err := strconv.ParseFloat(string(l.b[start:l.i]), 64)
		if err != nil {
			return token{kind: tokOp, str: l.b[start:l.i]}
		}
		return token{kind: tokNumber, num: f}
	case isDelim(c): // a stray ')', '>', '{' or '}'
		l.i++
		return l.next()
	}
	start := l.i
	for l.i < len(l.b) && !isSpace(l.b[l.i]) && !isDelim(l.b[l.i]) {
		l.i++
	}
	return token{kind: tokOp, str: l.b[start:l.i]}
}

// literal reads a literal string after its '(' and returns its bytes.
func (l *lexer) literal() []byte {
	var out []byte
	depth := 1
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return out
			}
		case '\\':
			if l.i >= len(l.b) {
				return out
			}
			e := l.b[l.i]
			l.i++
			switch e {
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case '\r': // a line continuation
				if l.i < len(l.b) && l.b[l.i] == '\n' {
					l.i++
				}
			case '\n':
			default:
				if e >= '0' && e <= '7' {
					v := int(e - '0')
					for k := 0; k < 2 && l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '7'; k++ {
						v = v*8 + int(l.b[l.i]-'0')
						l.i++
					}
					out = append(out, byte(v))
				} else {
					out = append(out, e)
				}
			}
			continue
		}
		out = append(out, c)
	}
	return out
}

// hex reads a hexadecimal string after its '<' and returns its bytes.
func (l *lexer) hex() []byte {
	var out []byte
	var hi int = -1
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		if c == '>' {
			break
		}
		v := hexVal(c)
		if v < 0 {
			continue
		}
		if hi < 0 {
			hi = v
		} else {
			out = append(out, byte(hi<<4|v))
			hi = -1
		}
	}
	if hi >= 0 {
		out = append(out, byte(hi<<4))
	}
	return out
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// name reads a name after its '/', with its #xx escapes decoded.
func (l *lexer) name() []byte {
	var out []byte
	for l.i < len(l.b) && !isSpace(l.b[l.i]) && !isDelim(l.b[l.i]) {
		c := l.b[l.i]
		if c == '#' && l.i+2 < len(l.b) && hexVal(l.b[l.i+1]) >= 0 && hexVal(l.b[l.i+2]) >= 0 {
			out = append(out, byte(hexVal(l.b[l.i+1])<<4|hexVal(l.b[l.i+2])))
			l.i += 3
			continue
		}
		out = append(out, c)
		l.i++
	}
	return out
}

// skipInlineImage moves past an inline image's data, after its ID
// operator, to just after the EI that ends it: EI preceded by white
// space and followed by white space or the end.
func (l *lexer) skipInlineImage() {
	if l.i < len(l.b) && isSpace(l.b[l.i]) {
		l.i++
	}
	for {
		k := bytes.Index(l.b[l.i:], []byte("EI"))
		if k < 0 {
			l.i = len(l.b)
			return
		}
		at := l.i + k
		l.i = at + 2
		before := at == 0 || isSpace(l.b[at-1])
		after := l.i >= len(l.b) || isSpace(l.b[l.i])
		if before && after {
			return
		}
	}
}
