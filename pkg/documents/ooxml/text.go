package ooxml

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text collects a document's text, one line at a time, up to a number of
// characters, and says where it was cut.
type Text struct {
	b    strings.Builder
	n    int
	max  int
	full bool
}

// NewText returns an empty Text that holds at most max characters,
// counting a newline after each line.
func NewText(max int) *Text { return &Text{max: max} }

// Line adds s and a newline. A line that does not fit is cut to the
// characters that do, and Line then reports false, as it does for every
// later call, which adds nothing: the caller may stop.
func (t *Text) Line(s string) bool {
	if t.full {
		return false
	}
	n := utf8.RuneCountInString(s) + 1
	if t.n+n > t.max {
		t.full = true
		t.b.WriteString(s[:RuneOffset(s, max(t.max-t.n, 0))])
		return false
	}
	t.n += n
	t.b.WriteString(s)
	t.b.WriteByte('\n')
	return true
}

// Full reports whether the text was cut: a line did not fit, and no
// more are kept.
func (t *Text) Full() bool { return t.full }

// String returns the text; when it was cut, a last line says so and
// names the limit.
func (t *Text) String() string {
	if t.full {
		return t.b.String() + fmt.Sprintf("\n…[cut: the text is longer than the document tools' limit of %d characters]", t.max)
	}
	return t.b.String()
}

// RuneOffset returns the byte offset in s of its rune n (counting from
// 0), len(s) when s has n runes or fewer: s[:RuneOffset(s, n)] is s's
// first n characters.
func RuneOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
