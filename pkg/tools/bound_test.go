//go:build unix

package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	long := strings.Repeat("a", 300) + strings.Repeat("é", 300) + strings.Repeat("z", 300)
	tests := []struct {
		name   string
		fn     func(string, int) string
		in     string
		limit  int
		prefix string
		suffix string
		note   string
	}{
		{"tail fits", keepTail, "short", 100, "short", "short", ""},
		{"tail cut", keepTail, long, 300, "…[truncated: elided ", strings.Repeat("z", 100), " of 900 chars — re-read or narrow the query if you need the rest]\n"},
		{"head fits", keepHead, "short", 100, "short", "short", ""},
		{"head cut", keepHead, long, 300, strings.Repeat("a", 100), " of 900 chars — narrow the query if you need the rest]", "\n…[truncated: elided "},
		{"head and tail fit", func(s string, n int) string { return keepHeadTail(s, n, nil) }, "short", 100, "short", "short", ""},
		{"head and tail cut", func(s string, n int) string { return keepHeadTail(s, n, nil) }, long, 300, strings.Repeat("a", 100), strings.Repeat("z", 100), " of 900 chars]…\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.fn(tt.in, tt.limit)
			if !utf8.ValidString(got) {
				t.Fatalf("result is not valid UTF-8: %q", got)
			}
			if n := utf8.RuneCountInString(got); n > tt.limit {
				t.Errorf("result has %d chars, want <= %d", n, tt.limit)
			}
			if !strings.HasPrefix(got, tt.prefix) || !strings.HasSuffix(got, tt.suffix) || !strings.Contains(got, tt.note) {
				t.Errorf("result = %q, want prefix %q, suffix %q and note %q", got, tt.prefix, tt.suffix, tt.note)
			}
		})
	}
}
