package glob

import (
	"regexp"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "a/b/c", true},
		{"", "", true},
		{"", "a", false},
		{"a", "a", true},
		{"a", "ab", false},
		{"?", "é", true},
		{"?", "", false},
		{"??", "é", false},
		{"src/*", "src/a/b.go", true},
		{"src/*", "srca", false},
		{"*.go", "a/b.go", true},
		{"*.go", "a/b.go.txt", false},
		{"go *", "go test ./...", true},
		{"go *", "go", false},
		{"git push*", "git push origin main", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"a**b", "ab", true},
		{"*a*a*a*a*b", strings.Repeat("a", 60), false},
		{"h?llo", "hello", true},
		{"h?llo", "hllo", false},
		{"[a]", "[a]", true},
		{"a.c", "abc", false},
		{"a+b", "a+b", true},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{".env", "config/.env", true},
		{".env", ".env", true},
		{".env", "config/.envrc", false},
		{"*.pem", "certs/deep/a.pem", true},
		{"id_rsa", "home/.ssh/id_rsa", true},
		{"vendor/*", "vendor/lib/src/main.rs", true},
		{"secrets/*", "app/secrets/x", false},
	}
	for _, tt := range tests {
		if got := MatchPath(tt.pattern, tt.path); got != tt.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// FuzzMatch checks Match against the regular expression the syntax is
// defined by: '*' is (?s).*, '?' is one character, the rest literal.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*", "x"}, {"a*b?c", "aXXbYc"}, {"*.go", "a/b.go"}, {"?é*", "xé/"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 256 {
			return
		}
		var b strings.Builder
		b.WriteString(`(?s)^`)
		for _, r := range pattern {
			switch r {
			case '*':
				b.WriteString(`.*`)
			case '?':
				b.WriteString(`.`)
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		b.WriteString(`$`)
		re, err := regexp.Compile(b.String())
		if err != nil {
			return
		}
		if !strings.ContainsRune(pattern, '\uFFFD') && !strings.ContainsRune(name, '\uFFFD') && validUTF8(pattern) && validUTF8(name) {
			if got, want := Match(pattern, name), re.MatchString(name); got != want {
				t.Fatalf("Match(%q, %q) = %v, regexp says %v", pattern, name, got, want)
			}
		}
	})
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "") == s }

func BenchmarkMatch(b *testing.B) {
	for b.Loop() {
		Match("src/*/internal/*.go", "src/github.com/ioharness/harness/internal/glob/glob.go")
	}
}
