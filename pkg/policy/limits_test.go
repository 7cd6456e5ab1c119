package policy

import "testing"

// TestArgvPatternLimits records, honestly, what an argv pattern can and
// cannot express. A pattern sees the command line as text, not what the
// program will do with it, so the rows marked "known limit" pass by
// asserting that the command is NOT denied. They are a known limit, to be
// documented in docs/security.md with the advice that follows (deny the
// wrappers and shells themselves; prefer an allow list of exact commands to a
// deny list of dangerous ones). If one of them starts failing, the policy got
// stronger: move the row to the caught side and update the documentation.
func TestArgvPatternLimits(t *testing.T) {
	// The policy a user would write to let an agent use npm but not publish.
	p := New(Defaults{}, layer("app",
		r(Exec, Allow, "npm*"),
		r(Exec, Deny, "npm publish*")))

	tests := []struct {
		name   string
		argv   []string
		denied bool
		want   want
	}{
		{"caught: the plain form", []string{"npm", "publish"}, true, want{Deny, "npm publish*", "app"}},
		{"caught: with arguments after", []string{"npm", "publish", "--tag", "next"}, true, want{Deny, "npm publish*", "app"}},
		// Normalisation: the program's last element is checked as well, in
		// the program and in argv, so a path to the program does not escape.
		{"caught: program by absolute path", []string{"/usr/bin/npm", "publish"}, true, want{Deny, "npm publish*", "app"}},
		{"caught: program by relative path", []string{"./node_modules/.bin/npm", "publish"}, true, want{Deny, "npm publish*", "app"}},

		// Known limit: an option before the subcommand changes the text, and
		// "npm*" allows what is left.
		{"known limit: an option before the subcommand", []string{"npm", "--loglevel", "x", "publish"}, false, want{Allow, "npm*", "app"}},
		// Known limit: a wrapper program runs npm for us; the program is env.
		{"known limit: env wrapper", []string{"env", "npm", "publish"}, false, want{Ask, "", ""}},
		// Known limit: a shell runs a string the pattern never sees as argv.
		{"known limit: sh -c", []string{"sh", "-c", "npm publish"}, false, want{Ask, "", ""}},
		// Known limit: an empty argument doubles the space.
		{"known limit: an empty argument", []string{"npm", "", "publish"}, false, want{Allow, "npm*", "app"}},
		// Known limit: an argument holding the space makes the same text as
		// two arguments, so this one is caught though it is not publish.
		{"ambiguity: an argument with a space is matched as two", []string{"npm", "publish --dry-run"}, true, want{Deny, "npm publish*", "app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := p.CheckExec(tt.argv)
			if got := v.Effect == Deny; got != tt.denied {
				t.Errorf("CheckExec(%q) = %v, denied %v, want denied %v", tt.argv, v, got, tt.denied)
			}
			if got(v) != tt.want {
				t.Errorf("CheckExec(%q) = %v, want %+v", tt.argv, v, tt.want)
			}
		})
	}
}
