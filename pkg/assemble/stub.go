package assemble

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxNamed is the most chars of a target a stub repeats.
const maxNamed = 120

// short cuts s to n chars, marking the cut with an ellipsis.
func short(s string, n int) string {
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	return s[:runeOffset(s, n)] + "…"
}

// describe names a result for a stub: "the read of a.go", "the output of
// `go test ./...`".
func describe(k Kind, target, tool string) string {
	switch k {
	case KindRead:
		return "the read of " + short(target, maxNamed)
	case KindWrite:
		return "the write to " + short(target, maxNamed)
	case KindGrep:
		pattern, glob, _ := strings.Cut(target, "\x00")
		d := `the grep for "` + short(pattern, maxNamed) + `"`
		if glob != "" {
			d += ` in "` + short(glob, maxNamed) + `"`
		}
		return d
	case KindFind:
		return `the find of "` + short(target, maxNamed) + `"`
	case KindExec:
		return "the output of `" + short(target, maxNamed) + "`"
	case KindImage:
		return "the view of " + short(target, maxNamed)
	case KindChild:
		if target == "" {
			return "the report of a sub-agent"
		}
		return `the report of the sub-agent for "` + short(target, maxNamed) + `"`
	}
	if target == "" {
		target = tool
	}
	return "the result of " + short(target, maxNamed)
}

// hint says how to get an elided result back, by kind.
func hint(k Kind) string {
	switch k {
	case KindRead:
		return "; read it again if you need it"
	case KindGrep, KindFind:
		return "; search again if you need it"
	case KindImage:
		return "; view it again if you need it"
	}
	return ""
}

// elidedStub stands for a result the budget had no room for.
func elidedStub(k Kind, target, tool string, step int) string {
	var b strings.Builder
	b.Grow(len(target) + 80)
	b.WriteString("[elided: ")
	b.WriteString(describe(k, target, tool))
	b.WriteString(" at step ")
	b.WriteString(strconv.Itoa(step))
	b.WriteString(hint(k))
	b.WriteString("]")
	return b.String()
}

// supersededStub stands for a result a later one of the same kind and
// target made redundant.
func supersededStub(k Kind, target string, by int) string {
	return "[superseded by " + describe(k, target, "") + " at step " + strconv.Itoa(by) + "]"
}

// staleStub stands for a read of a file written since.
func staleStub(path string, written int) string {
	return "[" + short(path, maxNamed) + " was written at step " + strconv.Itoa(written) +
		" after this read; read it again if you need it]"
}

// imagesStub stands for the images a step attached, elided.
func imagesStub(step int) string {
	return "[elided: the images viewed at step " + strconv.Itoa(step) + "; view them again if you need them]"
}

// missingResult answers a call the run recorded no result for, since a
// provider refuses a call without one.
const missingResult = "[no result was recorded for this call]"

// emptyResult stands for an empty result, which providers refuse.
const emptyResult = "(no output)"

// collapseLine stands for steps from..to removed whole, with their
// results.
func collapseLine(from, to, results int) string {
	var b strings.Builder
	if from == to {
		b.WriteString("[step " + strconv.Itoa(from))
	} else {
		b.WriteString("[steps " + strconv.Itoa(from) + "–" + strconv.Itoa(to))
	}
	b.WriteString(" elided: " + strconv.Itoa(results) + " tool result")
	if results != 1 {
		b.WriteString("s")
	}
	b.WriteString("; read again what you need]")
	return b.String()
}
