// Package glob matches the one glob syntax harness uses everywhere: in
// policy rules and in the find and grep tools. '*' matches any run of
// characters, '/' included; '?' matches exactly one character; every other
// character matches itself. There are no classes, no braces and no escapes,
// and "**" is simply two stars.
package glob

import "unicode/utf8"

// Match reports whether name matches pattern as a whole. It does not
// allocate.
func Match(pattern, name string) bool {
	// Greedy match with one backtrack point: the last '*' seen and the
	// position in name it has absorbed up to. Linear in practice, and at
	// worst O(len(pattern) * len(name)); never exponential.
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[n:])
				p++
				n += w
				continue
			default:
				if name[n] == c {
					p++
					n++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star absorb one more character and retry.
		_, w := utf8.DecodeRuneInString(name[starN:])
		starN += w
		p, n = starP+1, starN
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// MatchPath reports whether a slash-separated relative path matches pattern
// either whole or by its last element, so "*.pem" covers "certs/a.pem" and
// ".env" covers "config/.env".
func MatchPath(pattern, path string) bool {
	if Match(pattern, path) {
		return true
	}
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return Match(pattern, path[i+1:])
		}
	}
	return false
}
