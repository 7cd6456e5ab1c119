package protocol

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseGitAuthor(t *testing.T) {
	tests := []struct {
		in, name, email string
		bad             string // a substring of the error; "" for valid
	}{
		{"Ada Lovelace <ada@example.com>", "Ada Lovelace", "ada@example.com", ""},
		{"  bot   <bot@ci>  ", "bot", "bot@ci", ""},
		{"Zoë Ünïcode <z@example.org>", "Zoë Ünïcode", "z@example.org", ""},
		{"Ada", "", "", "email in angle brackets is missing"},
		{"ada@example.com", "", "", "email in angle brackets is missing"},
		{"<ada@example.com>", "", "", "has no name"},
		{"Ada <>", "", "", "empty email"},
		{"Ada <a b@example.com>", "", "", "holds a space"},
		{"Ada <x> <ada@example.com>", "", "", "'<' or '>'"},
		{"Ada <ada@example.com>\nCommitter: Mallory <m@evil>", "", "", "control character"},
		{"Ada\x00 <ada@example.com>", "", "", "control character"},
		{"Ada\t<ada@example.com>", "", "", "control character"},
		{"Ada <ada@example.com> trailing", "", "", "email in angle brackets is missing"},
		{"\xff <a@b>", "", "", "UTF-8"},
		{strings.Repeat("a", 600) + " <a@b>", "", "", "over the limit"},
	}
	for _, tt := range tests {
		name, email, err := ParseGitAuthor(tt.in)
		if tt.bad == "" {
			if err != nil || name != tt.name || email != tt.email {
				t.Errorf("ParseGitAuthor(%q) = %q, %q, %v; want %q, %q", tt.in, name, email, err, tt.name, tt.email)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeInvalidField || pe.Field != "git.author" || !strings.Contains(pe.Message, tt.bad) || pe.Hint == "" {
			t.Errorf("ParseGitAuthor(%q) = %v, want invalid_field on git.author saying %q, with a hint", tt.in, err, tt.bad)
		}
	}
}

func TestContractGit(t *testing.T) {
	const base = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}}GIT}`
	tests := []struct {
		name, git string
		want      *Error // nil: valid
		field     string
	}{
		{"absent", ``, nil, ""},
		{"author", `,"git":{"author":"Review Bot <bot@example.com>"}`, nil, ""},
		{"no author", `,"git":{}`, ErrMissingField, "git.author"},
		{"blank author", `,"git":{"author":"  "}`, ErrMissingField, "git.author"},
		{"malformed author", `,"git":{"author":"Review Bot"}`, ErrInvalidField, "git.author"},
		{"author not a string", `,"git":{"author":7}`, ErrInvalidField, "git.author"},
		{"unknown field", `,"git":{"author":"A <a@b>","committer":"M <m@evil>"}`, ErrUnknownField, "git.committer"},
		{"git not an object", `,"git":"A <a@b>"`, ErrInvalidField, "git"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeContract([]byte(strings.Replace(base, "GIT", tt.git, 1)))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("DecodeContract(git %s) = %v, want it accepted", tt.git, err)
				}
				if tt.git != "" && (c.Git == nil || c.Git.Author != "Review Bot <bot@example.com>") {
					t.Errorf("git = %+v", c.Git)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeContract(git %s) = %v, want code %v", tt.git, err, tt.want.Code)
			}
			var pe *Error
			if errors.As(err, &pe); pe.Field != tt.field {
				t.Errorf("field = %q, want %q", pe.Field, tt.field)
			}
		})
	}
}

// TestGitGolden pins the wire JSON of a git tool's operation, carrying the
// contract's identity, and of a patch with the run's commits. Regenerate
// with go test ./pkg/protocol -update.
func TestGitGolden(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	patch := &Patch{Ref: "sha256-60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", Size: 412, Node: "sb-1",
		Files:   []FileChange{{Path: "notes.md", Change: ChangeAdded, Kind: FileText}},
		Commits: []CommitInfo{{ID: "3b18e512dba79e4c8300dd08aeb37f8e728b8dad", Author: "Review Bot <bot@example.com>", Subject: "Add notes"}},
		Series:  "sha256-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	values := map[string]any{
		"sandbox_op_git": &SandboxOp{OpID: "r1.4.0.1", Run: "r1", Kind: OpTool, Workspace: "/srv/w",
			Call: &ToolCall{ID: "call_7", Name: "git_commit", Arguments: json.RawMessage(`{"message":"Add notes"}`)},
			Git:  &GitSpec{Author: "Review Bot <bot@example.com>"}},
		"record_finished_commits": &Record{Format: TraceFormat, Kind: RecordFinished, Run: "r1", Step: 4, Time: at, Outcome: OutcomeFinished,
			Reason: "done", Tokens: 900, Patch: patch},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(mustRead(t, path)), string(got)); diff != "" {
				t.Errorf("%s changed (-golden +now):\n%s\nif intended, go test ./pkg/protocol -update", path, diff)
			}
		})
	}
}
