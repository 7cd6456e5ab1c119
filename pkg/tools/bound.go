package tools

import (
	"fmt"
	"unicode/utf8"
)

// runeOffset returns the byte offset of the n-th rune of s (len(s) past
// the end).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// tailNote is the note that stands for the start of a text cut to its tail.
func tailNote(elided, total int) string {
	return fmt.Sprintf("…[truncated: elided %d of %d chars — re-read or narrow the query if you need the rest]\n", elided, total)
}

// headNote is the note that stands for the end of a text cut to its head.
func headNote(elided, total int) string {
	return fmt.Sprintf("\n…[truncated: elided %d of %d chars — narrow the query if you need the rest]", elided, total)
}

// middleNote is the line that stands for the middle of a text cut to its
// head and tail; extra adds to it.
func middleNote(elided, total int, extra string) string {
	return fmt.Sprintf("\n…[elided %d of %d chars%s]…\n", elided, total, extra)
}

// keepTail returns s if it has at most limit runes, else a note saying how
// much was cut followed by the end of s, limit runes in all.
func keepTail(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	keep := max(limit-utf8.RuneCountInString(tailNote(n, n)), 0)
	return tailNote(n-keep, n) + s[runeOffset(s, n-keep):]
}

// keepHead returns s if it has at most limit runes, else the start of s
// followed by a note saying how much was cut, limit runes in all.
func keepHead(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	keep := max(limit-utf8.RuneCountInString(headNote(n, n)), 0)
	return s[:runeOffset(s, keep)] + headNote(n-keep, n)
}

// keepHeadTail returns s if it has at most limit runes, else its start and
// its end around a line saying how much of the middle was cut, limit runes
// in all. extraNote, given the cut middle, may add to that line.
func keepHeadTail(s string, limit int, extraNote func(middle string) string) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	extra := ""
	for {
		keep := max(limit-utf8.RuneCountInString(middleNote(n, n, extra)), 0)
		h := keep / 2
		i, j := runeOffset(s, h), runeOffset(s, n-(keep-h))
		e := ""
		if extraNote != nil {
			e = extraNote(s[i:j])
		}
		// A longer note shrinks what is kept, so the middle only grows and
		// the note stays the same on the second pass.
		if utf8.RuneCountInString(e) <= utf8.RuneCountInString(extra) {
			return s[:i] + middleNote(n-keep, n, extra) + s[j:]
		}
		extra = e
	}
}

// truncateLine cuts one line of output to limit runes, marking the cut.
func truncateLine(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return s[:runeOffset(s, limit)] + "…"
}

// Bound returns an observation's content cut to limit runes (at least
// the floor of Env.EntryCap): its start and its end around a line saying
// how much of the middle was cut. An embedder's tool's output is bounded
// this way wherever it runs.
func Bound(s string, limit int) string {
	return keepHeadTail(s, max(limit, minEntryCap), nil)
}
