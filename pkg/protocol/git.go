package protocol

import (
	"strings"
	"unicode/utf8"
)

// GitSpec is the contract's word on git: who the commits of the run are
// by. The model never chooses it; it reaches the sandboxer with every tool
// call (SandboxOp.Git) and signs the commits git_commit makes, as author
// and as committer, and the commit workspace.commit asks for.
type GitSpec struct {
	// Author is "Name <email>", as git writes an identity, such as
	// "Review Bot <bot@example.com>". Required when git is given.
	Author string `json:"author"`
}

// MaxGitAuthor bounds git.author, in bytes.
const MaxGitAuthor = 512

// ParseGitAuthor splits an identity written "Name <email>" into its name
// and email. The name is what comes before the last " <", trimmed, and is
// not empty; the email is what the angle brackets hold, not empty and
// without spaces. Neither may hold '<', '>', a newline, a NUL or another
// control character, which git would refuse or strip, and the whole is
// valid UTF-8 of at most MaxGitAuthor bytes. Errors: a *Error with
// CodeInvalidField on the field "git.author", saying what is wrong.
func ParseGitAuthor(s string) (name, email string, err error) {
	const field, hint = "git.author", `write the identity as git does: "Name <email>", such as "Review Bot <bot@example.com>"`
	bad := func(format string, args ...any) (string, string, error) {
		return "", "", FieldError(CodeInvalidField, field, hint, format, args...)
	}
	switch {
	case len(s) > MaxGitAuthor:
		return bad("the author is %d bytes, over the limit of %d", len(s), MaxGitAuthor)
	case !utf8.ValidString(s):
		return bad("the author is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return bad("the author holds a control character (%U); git identities are one line of printable text", r)
		}
	}
	t := strings.TrimSpace(s)
	open := strings.LastIndex(t, "<")
	if open < 0 || !strings.HasSuffix(t, ">") {
		return bad("%q is not \"Name <email>\": the email in angle brackets is missing", clipField(s))
	}
	name, email = strings.TrimSpace(t[:open]), t[open+1:len(t)-1]
	switch {
	case name == "":
		return bad("%q has no name before the email", clipField(s))
	case strings.ContainsAny(name, "<>"):
		return bad("the name %q holds '<' or '>', which git does not allow in a name", clipField(name))
	case email == "":
		return bad("%q has an empty email between the angle brackets", clipField(s))
	case strings.ContainsAny(email, "<> \t"):
		return bad("the email %q holds a space, '<' or '>'", clipField(email))
	}
	return name, email, nil
}

func (g *GitSpec) validate() error {
	if g == nil {
		return nil
	}
	if strings.TrimSpace(g.Author) == "" {
		return FieldError(CodeMissingField, "git.author", `give the identity the run's commits are made under, such as "author": "Review Bot <bot@example.com>", or leave git out`,
			"git is set without an author")
	}
	_, _, err := ParseGitAuthor(g.Author)
	return err
}

// CommitInfo is one commit a run made in its snapshot workspace.
type CommitInfo struct {
	// ID is the commit's full object id.
	ID string `json:"id"`
	// Author is the commit's author, "Name <email>".
	Author string `json:"author"`
	// Subject is the first line of its message.
	Subject string `json:"subject"`
}

// MaxPatchCommits bounds the commits a Patch lists; a run that made more
// is recorded with its series left out and an error saying so.
const MaxPatchCommits = 1000
