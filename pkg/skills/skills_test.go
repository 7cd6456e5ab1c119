package skills

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in   string
		skill, why string // why: a part of the error, "" for none
	}{
		{"plain", "---\nname: deploy\ndescription: How to deploy to staging.\n---\nbody", "deploy|How to deploy to staging.", ""},
		{"crlf and bom", "\xef\xbb\xbf---\r\nname: deploy\r\ndescription: Deploy it.\r\n---\r\n", "deploy|Deploy it.", ""},
		{"quoted", "---\nname: \"a_b-1\"\ndescription: 'It''s: quoted'\n---\n", "a_b-1|It's: quoted", ""},
		{"comments, blanks and other keys", "---\n# a skill\n\nlicense: MIT\nmetadata:\n  owner: ops\nname: x\ndescription: d # a comment\n---\n", "x|d", ""},
		{"no front matter", "# Deploy\n\nSteps.", "", `first line must be "---"`},
		{"empty file", "", "", `first line must be "---"`},
		{"not closed", "---\nname: x\ndescription: d\n", "", "not closed"},
		{"no name", "---\ndescription: d\n---\n", "", `no "name:" line`},
		{"no description", "---\nname: x\n---\n", "", `no "description:" line`},
		{"name twice", "---\nname: x\nname: y\ndescription: d\n---\n", "", `line 3 of its front matter gives "name" a second time`},
		{"name not a token", "---\nname: deploy it\ndescription: d\n---\n", "", "not a simple token"},
		{"name with a slash", "---\nname: ../x\ndescription: d\n---\n", "", "not a simple token"},
		{"name too long", "---\nname: " + strings.Repeat("a", MaxNameLen+1) + "\ndescription: d\n---\n", "", "over 64"},
		{"empty description", "---\nname: x\ndescription:\n---\n", "", "description is empty"},
		{"block description", "---\nname: x\ndescription: >\n  folded\n---\n", "", "YAML block"},
		{"continued description", "---\nname: x\ndescription: one\n  two\n---\n", "", `continues "description"`},
		{"not key value", "---\nname: x\n- item\ndescription: d\n---\n", "", `line 3 of its front matter is not "key: value"`},
		{"bad quote", "---\nname: \"x\ndescription: d\n---\n", "", "double quote"},
		{"long description", "---\nname: x\ndescription: " + strings.Repeat("é", MaxDescription+1) + "\n---\n", "", "over 1024"},
		{"control in description", "---\nname: x\ndescription: \"a\\u0007b\"\n---\n", "", "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, desc, err := Parse([]byte(tt.in))
			if tt.why != "" {
				if err == nil || !strings.Contains(err.Error(), tt.why) {
					t.Fatalf("Parse(%q) = %q, %q, %v; want an error saying %q", tt.in, name, desc, err, tt.why)
				}
				return
			}
			if err != nil || name+"|"+desc != tt.skill {
				t.Fatalf("Parse(%q) = %q, %q, %v; want %s", tt.in, name, desc, err, tt.skill)
			}
		})
	}
}

func skillFile(name, desc string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte("---\nname: " + name + "\ndescription: " + desc + "\n---\nThe body of " + name + ".\n")}
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"skills/deploy.md":           skillFile("deploy", "Deploy to staging."),
		"skills/review/SKILL.md":     skillFile("code-review", "Review a change."),
		"skills/review/notes.txt":    {Data: []byte("not a skill")},
		"skills/empty-dir/x.txt":     {Data: []byte("no SKILL.md here")},
		"skills/picture.png":         {Data: []byte{0x89}},
		"skills/Changelog.MD":        skillFile("changelog", "Keep the changelog."),
		"elsewhere/not-a-skill.md":   {Data: []byte("# nothing")},
		"bad/ok.md":                  skillFile("ok", "Fine."),
		"bad/broken.md":              {Data: []byte("# Broken\nno front matter")},
		"dup/a.md":                   skillFile("same", "One."),
		"dup/b.md":                   skillFile("same", "Two."),
		"linked/real.md":             skillFile("real", "Real."),
		"linked/link.md":             {Data: []byte("real.md"), Mode: fs.ModeSymlink},
		"none/readme.txt":            {Data: []byte("nothing")},
		"afile":                      {Data: []byte("x")},
		"many/.keep":                 {},
		"sub/skills/x/SKILL.md":      skillFile("x", "Deep."),
		"sub/skills/x/more/SKILL.md": skillFile("y", "Too deep: not read."),
	}
	for i := range protocol.MaxSkills + 1 {
		n := string(rune('a'+i/26)) + string(rune('a'+i%26))
		fsys["many/"+n+".md"] = skillFile("s"+n, "One of many.")
	}
	got, err := Load(fsys, "skills")
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Skill{
		{Name: "changelog", Description: "Keep the changelog.", Path: "skills/Changelog.MD"},
		{Name: "code-review", Description: "Review a change.", Path: "skills/review/SKILL.md"},
		{Name: "deploy", Description: "Deploy to staging.", Path: "skills/deploy.md"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(skills) (-want +got):\n%s", diff)
	}
	if got, err := Load(fsys, "sub/skills"); err != nil || len(got) != 1 || got[0].Path != "sub/skills/x/SKILL.md" {
		t.Errorf("Load(sub/skills) = %v, %v; want the one skill x", got, err)
	}
	for _, tt := range []struct{ dir, why string }{
		{"bad", "the skill bad/broken.md: it has no front matter"},
		{"dup", `the skills dup/a.md and dup/b.md are both named "same"`},
		{"linked", "the skill linked/link.md is a symbolic link"},
		{"none", "holds no skills"},
		{"missing", "the skills directory missing does not exist"},
		{"afile", "cannot be read"},
		{"many", "holds 65 skills"},
	} {
		_, err := Load(fsys, tt.dir)
		pe := protocol.AsError(err)
		if !errors.Is(err, protocol.ErrInvalidField) || pe.Field != "skills.dir" || !strings.Contains(pe.Message, tt.why) {
			t.Errorf("Load(%s) = %v, want invalid_field skills.dir saying %q", tt.dir, err, tt.why)
		}
	}
}

// TestLoadSnapshot reads a skills snapshot as the sandboxer unpacks it,
// under protocol.SkillsSnapshotRoot: the paths are the ones a policy
// judges, and the errors name the field skills.snapshot, the ref and the
// file.
func TestLoadSnapshot(t *testing.T) {
	const ref = "sha256-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	good := fstest.MapFS{
		"skills/deploy.md":       skillFile("deploy", "Deploy to staging."),
		"skills/review/SKILL.md": skillFile("code-review", "Review a change."),
	}
	got, err := LoadSnapshot(good, ref)
	want := []protocol.Skill{
		{Name: "code-review", Description: "Review a change.", Path: "skills/review/SKILL.md"},
		{Name: "deploy", Description: "Deploy to staging.", Path: "skills/deploy.md"},
	}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("LoadSnapshot = %v (-want +got):\n%s", err, diff)
	}
	for _, tt := range []struct {
		name string
		fsys fstest.MapFS
		why  string
	}{
		{"malformed", fstest.MapFS{"skills/ok.md": skillFile("ok", "Fine."), "skills/bad.md": {Data: []byte("---\nname: bad\n---\n")}},
			`the skill skills/bad.md: its front matter has no "description:" line`},
		{"empty", fstest.MapFS{"skills/readme.txt": {Data: []byte("x")}}, "the skills snapshot " + ref + " holds no skills"},
		{"not unpacked", fstest.MapFS{}, "the skills snapshot " + ref + " was not unpacked"},
	} {
		_, err := LoadSnapshot(tt.fsys, ref)
		pe := protocol.AsError(err)
		if !errors.Is(err, protocol.ErrInvalidField) || pe.Field != "skills.snapshot" || !strings.Contains(pe.Message, tt.why) {
			t.Errorf("%s: LoadSnapshot = %v, want invalid_field skills.snapshot saying %q", tt.name, err, tt.why)
		}
	}
}
