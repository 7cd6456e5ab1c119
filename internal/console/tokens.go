package console

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
)

// Role is what a principal may do in the console.
type Role string

// Roles a token file gives.
const (
	// Decider may read everything the console shows, decide approvals and
	// cancel runs. A line with no role is a decider's.
	Decider Role = "decider"
	// Viewer may read everything the console shows and change nothing: the
	// approval and cancel buttons are not shown, and their requests are
	// refused.
	Viewer Role = "viewer"
)

// Principal is a person the token file names: who a decision or a cancel
// is recorded as ("console:" and the name), and what they may do.
type Principal struct {
	Name string
	Role Role
}

// CanDecide reports whether the principal may decide approvals and
// cancel runs.
func (p *Principal) CanDecide() bool { return p != nil && p.Role == Decider }

// Recorded is how the trace records the principal as the one who decided
// or cancelled.
func (p *Principal) Recorded() string { return "console:" + p.Name }

// MinTokenLength is the shortest token the console accepts: 16 bytes of
// hex from `openssl rand -hex 16` and more are fine, a word is not.
const MinTokenLength = 16

// Tokens are the login tokens of a token file, by the SHA-256 of each, so
// a comparison takes the same time whatever the token offered.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum       [sha256.Size]byte
	principal Principal
}

// TokenFileError is a token file the console refuses to start with: which
// file, which line (0 for the file as a whole), and what to change.
type TokenFileError struct {
	Path string
	Line int
	Msg  string
}

func (e *TokenFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("token file %s, line %d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("token file %s: %s", e.Path, e.Msg)
}

// LoadTokens reads a token file. Each line that is not blank or a #
// comment is one principal:
//
//	NAME:TOKEN          a decider: reads, decides approvals, cancels runs
//	NAME:TOKEN:viewer   a viewer: reads only
//	NAME:TOKEN:decider  the same as no role
//	TOKEN               a decider named "operator"
//
// Names are letters, digits, '.', '_' and '-'; tokens are at least
// MinTokenLength characters with no whitespace or ':'. The file must be
// readable by its owner alone (chmod 600), like an ssh key, since it holds
// the keys to the approvals.
//
// Errors: a *TokenFileError for a file that cannot be read, is readable
// by others, holds no token, or has a malformed line, a token too short, a
// name or a token twice.
func LoadTokens(path string) (*Tokens, error) {
	if path == "" {
		return nil, &TokenFileError{Path: "(none)", Msg: "no token file given: pass --token-file FILE with one NAME:TOKEN line per person (there is no default password)"}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &TokenFileError{Path: path, Msg: err.Error()}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, &TokenFileError{Path: path, Msg: fmt.Sprintf("it is readable by others (mode %04o); make it the owner's alone: chmod 600 %s", fi.Mode().Perm(), path)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &TokenFileError{Path: path, Msg: err.Error()}
	}
	return ParseTokens(path, data)
}

// ParseTokens parses a token file's content (see LoadTokens); path names
// it in errors.
func ParseTokens(path string, data []byte) (*Tokens, error) {
	t := &Tokens{}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) error {
			return &TokenFileError{Path: path, Line: n, Msg: fmt.Sprintf(format, a...)}
		}
		parts := strings.Split(line, ":")
		var p Principal
		var token string
		switch len(parts) {
		case 1:
			p, token = Principal{Name: "operator", Role: Decider}, parts[0]
		case 2, 3:
			p, token = Principal{Name: parts[0], Role: Decider}, parts[1]
			if len(parts) == 3 {
				switch Role(parts[2]) {
				case Decider, Viewer:
					p.Role = Role(parts[2])
				default:
					return nil, bad("role %q is neither viewer nor decider", parts[2])
				}
			}
		default:
			return nil, bad("expected NAME:TOKEN or NAME:TOKEN:viewer")
		}
		if !validName(p.Name) {
			return nil, bad("name %q: use letters, digits, '.', '_' and '-'", p.Name)
		}
		if len(token) < MinTokenLength || strings.ContainsAny(token, " \t") {
			return nil, bad("the token of %s is shorter than %d characters or has spaces; make one with: openssl rand -hex 32", p.Name, MinTokenLength)
		}
		if names[p.Name] {
			return nil, bad("%s is named twice", p.Name)
		}
		names[p.Name] = true
		sum := sha256.Sum256([]byte(token))
		for _, e := range t.entries {
			if e.sum == sum {
				return nil, bad("the token of %s is also %s's: give each person a token of their own", p.Name, e.principal.Name)
			}
		}
		t.entries = append(t.entries, tokenEntry{sum: sum, principal: p})
	}
	if err := sc.Err(); err != nil {
		return nil, &TokenFileError{Path: path, Msg: err.Error()}
	}
	if len(t.entries) == 0 {
		return nil, &TokenFileError{Path: path, Msg: "it holds no token: add a line NAME:TOKEN (make a token with: openssl rand -hex 32)"}
	}
	return t, nil
}

// Lookup returns the principal whose token this is, or nil. Every entry
// is compared, in constant time each.
func (t *Tokens) Lookup(token string) *Principal {
	if t == nil || token == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	var found *Principal
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = &t.entries[i].principal
		}
	}
	return found
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
