package assemble

import (
	"encoding/json"
	"unicode/utf8"
)

// This file reads tool-call arguments without encoding/json's reflection:
// assembling a long run looks at every call of every step, so the scanner
// checks a JSON text and finds the top-level members of an object in one
// pass, allocating nothing. Strings are decoded by encoding/json only when
// they hold escapes or invalid UTF-8.

// maxDepth bounds nesting as encoding/json does.
const maxDepth = 10000

// scanner walks one JSON text.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value skips one JSON value, reporting whether it is well formed.
func (s *scanner) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return true
		}
		for {
			s.ws()
			if !s.str() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.num()
	}
	return false
}

func (s *scanner) lit(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// str skips one string, starting at its opening quote.
func (s *scanner) str() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *scanner) num() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return false
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if !s.digits() {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// validJSON reports whether b is one well-formed JSON text, as json.Valid.
func validJSON(b []byte) bool {
	s := scanner{b: b}
	if !s.value(0) {
		return false
	}
	s.ws()
	return s.i == len(b)
}

// member is one top-level member of a JSON object: the raw key (quotes
// included) and the raw value.
type member struct{ key, val []byte }

// members calls f on each member of the JSON object b in order, and
// reports whether b is one well-formed object (f returning false stops
// early, and members then reports false).
func members(b []byte, f func(m member) bool) bool {
	s := scanner{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(b) && b[s.i] == '}' {
		s.i++
		s.ws()
		return s.i == len(b)
	}
	for {
		s.ws()
		k := s.i
		if !s.str() {
			return false
		}
		key := b[k:s.i]
		s.ws()
		if s.i >= len(b) || b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		v := s.i
		if !s.value(1) {
			return false
		}
		if !f(member{key: key, val: b[v:s.i]}) {
			return false
		}
		s.ws()
		if s.i >= len(b) {
			return false
		}
		switch b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.ws()
			return s.i == len(b)
		default:
			return false
		}
	}
}

// unquote decodes a well-formed JSON string token as encoding/json does.
func unquote(tok []byte) (string, bool) {
	if len(tok) < 2 || tok[0] != '"' {
		return "", false
	}
	if in := tok[1 : len(tok)-1]; !containsByte(in, '\\') && utf8.Valid(in) {
		return string(in), true
	}
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return "", false
	}
	return s, true
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// keyIs reports whether the raw key token names want (compared decoded).
func keyIs(key []byte, want string) bool {
	if len(key) == len(want)+2 && string(key[1:len(key)-1]) == want {
		return true
	}
	if !containsByte(key, '\\') {
		return false
	}
	k, ok := unquote(key)
	return ok && k == want
}

// compactLen is the length of raw as encoding/json writes a
// json.RawMessage: whitespace outside strings dropped, <, > and & escaped
// as \u003c..., U+2028 and U+2029 as \u2028 and \u2029. raw must be
// well formed.
func compactLen(raw []byte) int {
	n := len(raw)
	in, esc := false, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case '<', '>', '&':
			n += 5
			continue
		case 0xE2:
			if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8 {
				n += 3
			}
		}
		if in {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case ' ', '\t', '\n', '\r':
			n--
		}
	}
	return n
}
