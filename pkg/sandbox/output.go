package sandbox

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// elisionReserve is what a capture keeps free of its budget for the elision
// line, so that head, line and tail together fit in the budget.
const elisionReserve = 64

// elisionPrefix and elisionSuffix frame the line that stands for the bytes a
// capture dropped: "\n…[elided 12345 bytes]…\n".
const (
	elisionPrefix = "…[elided "
	elisionSuffix = " bytes]…"
)

// elisionLine is the line that replaces n dropped bytes.
func elisionLine(n int64) string {
	return "\n" + elisionPrefix + strconv.FormatInt(n, 10) + elisionSuffix + "\n"
}

// ElidedBytes returns how many bytes the elision line in out says were
// dropped from the middle of a stream, or 0 when out has no elision line.
// Backends mark an elision as "…[elided 12345 bytes]…" on a line of its
// own; tools that bound the output again use this to keep the figure.
func ElidedBytes(out string) int64 {
	var total int64
	for {
		i := strings.Index(out, elisionPrefix)
		if i < 0 {
			return total
		}
		rest := out[i+len(elisionPrefix):]
		j := strings.Index(rest, elisionSuffix)
		if j < 0 {
			return total
		}
		if n, err := strconv.ParseInt(rest[:j], 10, 64); err == nil {
			total += n
		}
		out = rest[j+len(elisionSuffix):]
	}
}

// Capture is an io.Writer that bounds a command's output stream as Result
// documents: it keeps the first and the last bytes written to it and
// counts the rest, and String stands an elision line (see ElidedBytes)
// for what it dropped. Memory use is bounded by its limit however much is
// written. It is not safe for concurrent use; each stream has its own.
type Capture struct {
	headMax, tailMax int
	head             []byte
	ring             []byte // tailMax bytes, allocated on first use
	ringLen          int    // valid bytes in ring
	ringPos          int    // next write position in ring
	total            int64
}

// NewCapture returns a Capture whose String never exceeds limit bytes
// (for a limit of at least 128; Limits.OutputBytes, say).
func NewCapture(limit int) *Capture {
	budget := limit
	if budget > 2*elisionReserve {
		budget -= elisionReserve
	}
	h := budget / 2
	return &Capture{headMax: h, tailMax: budget - h}
}

// Write keeps what fits and never fails.
func (c *Capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailMax == 0 {
		return n, nil
	}
	if c.ring == nil {
		c.ring = make([]byte, c.tailMax)
	}
	if len(p) >= c.tailMax {
		copy(c.ring, p[len(p)-c.tailMax:])
		c.ringPos, c.ringLen = 0, c.tailMax
		return n, nil
	}
	k := copy(c.ring[c.ringPos:], p)
	copy(c.ring, p[k:])
	c.ringPos = (c.ringPos + len(p)) % c.tailMax
	c.ringLen = min(c.ringLen+len(p), c.tailMax)
	return n, nil
}

// tail returns the kept tail in order.
func (c *Capture) tail() []byte {
	if c.ringLen < c.tailMax {
		return c.ring[:c.ringLen]
	}
	out := make([]byte, 0, c.tailMax)
	out = append(out, c.ring[c.ringPos:]...)
	return append(out, c.ring[:c.ringPos]...)
}

// String returns everything written if it fitted, else the head, an
// elision line stating how many bytes were dropped, and the tail. The cut
// falls on UTF-8 character boundaries; the bytes of a character split by
// the cut are counted as elided.
func (c *Capture) String() string {
	tail := c.tail()
	elided := c.total - int64(len(c.head)) - int64(len(tail))
	if elided == 0 {
		return string(c.head) + string(tail)
	}
	head := trimPartialEnd(c.head)
	t := trimPartialStart(tail)
	elided += int64(len(c.head) - len(head) + len(tail) - len(t))
	return string(head) + elisionLine(elided) + string(t)
}

// trimPartialEnd drops an incomplete UTF-8 sequence at the end of b.
func trimPartialEnd(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// trimPartialStart drops continuation bytes at the start of b, left over
// from a character whose first bytes were cut off.
func trimPartialStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax-1; i++ {
		if utf8.RuneStart(b[0]) {
			break
		}
		b = b[1:]
	}
	return b
}
