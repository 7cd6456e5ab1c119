package assemble

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// minEntryCap is the least an entry may be cut to, in chars.
const minEntryCap = 2000

// entryCap is the most chars one entry (a tool result, a turn's text, one
// string argument of a call) may carry: an eighth of the budget at 4
// chars to a token, and never under 2,000, as io-harness's
// entry_cap_chars.
func entryCap(budget int) int {
	return max(minEntryCap, budget/2)
}

// cutNote is the marker that stands for what a cut removed.
func cutNote(elided, total int) string {
	return "…[truncated: elided " + strconv.Itoa(elided) + " of " + strconv.Itoa(total) +
		" chars — re-read or narrow the query if you need the rest]"
}

// runeOffset is the byte offset of the n-th rune of s (len(s) past the
// end).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// bound cuts s to at most limit chars, the marker included: keeping its
// tail (the marker first) when tail is set, else its head (the marker
// last). Text within the limit is returned as it is.
func bound(s string, limit int, tail bool) string {
	if len(s) <= limit {
		return s // bytes bound chars
	}
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	keep := max(limit-utf8.RuneCountInString(cutNote(n, n))-1, 0)
	if tail {
		return cutNote(n-keep, n) + "\n" + s[runeOffset(s, n-keep):]
	}
	return s[:runeOffset(s, keep)] + "\n" + cutNote(n-keep, n)
}

// boundArgs cuts each top-level string argument of a call over limit
// chars to its head, keeping the arguments one JSON object with its keys
// in their order. Arguments within the limit, or that are not an object,
// are returned as they are; cut reports whether any was cut.
func boundArgs(args json.RawMessage, limit int) (_ json.RawMessage, cut bool) {
	if len(args) <= limit {
		return args, false
	}
	var out []byte
	ok := members(args, func(m member) bool {
		if out == nil {
			out = append(make([]byte, 0, limit+256), '{')
		} else {
			out = append(out, ',')
		}
		out = append(out, m.key...)
		out = append(out, ':')
		if len(m.val) > limit && m.val[0] == '"' {
			if s, ok := unquote(m.val); ok && utf8.RuneCountInString(s) > limit {
				b, err := json.Marshal(bound(s, limit, false))
				if err == nil {
					out = append(out, b...)
					cut = true
					return true
				}
			}
		}
		out = append(out, m.val...)
		return true
	})
	if !ok || !cut {
		return args, false
	}
	return append(out, '}'), true
}
