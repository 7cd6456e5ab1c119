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

const testRef = "sha256-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestWorkspaceValidation(t *testing.T) {
	const good = `{"schema":"harness.contract/v1","task":"t","workspace":WS,"verification":{"none":{}}}`
	tests := []struct {
		name  string
		ws    string
		want  *Error // nil: valid
		field string
	}{
		{"root", `{"root":"/w"}`, nil, ""},
		{"snapshot", `{"snapshot":"` + testRef + `"}`, nil, ""},
		{"snapshot with commit", `{"snapshot":"` + testRef + `","commit":{}}`, nil, ""},
		{"snapshot with message", `{"snapshot":"` + testRef + `","commit":{"message":"m"}}`, nil, ""},
		{"neither", `{}`, ErrMissingField, "workspace.root"},
		{"blank root", `{"root":"  "}`, ErrMissingField, "workspace.root"},
		{"both", `{"root":"/w","snapshot":"` + testRef + `"}`, ErrInvalidField, "workspace"},
		{"short ref", `{"snapshot":"sha256-abc"}`, ErrInvalidField, "workspace.snapshot"},
		{"upper-case ref", `{"snapshot":"` + strings.ToUpper(testRef) + `"}`, ErrInvalidField, "workspace.snapshot"},
		{"path as ref", `{"snapshot":"../../etc/passwd"}`, ErrInvalidField, "workspace.snapshot"},
		{"commit on a root", `{"root":"/w","commit":{}}`, ErrInvalidField, "workspace.commit"},
		{"commit is not a bool", `{"snapshot":"` + testRef + `","commit":true}`, ErrInvalidField, "workspace.commit"},
		{"unknown commit field", `{"snapshot":"` + testRef + `","commit":{"author":"x"}}`, ErrUnknownField, "workspace.commit.author"},
		{"unknown workspace field", `{"snapshot":"` + testRef + `","patch":true}`, ErrUnknownField, "workspace.patch"},
		{"nul in message", `{"snapshot":"` + testRef + `","commit":{"message":"a\u0000b"}}`, ErrInvalidField, "workspace.commit.message"},
		{"file", `{"file":"/srv/notes/todo.md"}`, nil, ""},
		{"relative file", `{"file":"todo.md"}`, nil, ""},
		{"file and root", `{"file":"/w/a.txt","root":"/w"}`, ErrInvalidField, "workspace"},
		{"file and snapshot", `{"file":"/w/a.txt","snapshot":"` + testRef + `"}`, ErrInvalidField, "workspace"},
		{"file with commit", `{"file":"/w/a.txt","commit":{}}`, ErrInvalidField, "workspace.commit"},
		{"blank file", `{"file":" "}`, ErrMissingField, "workspace.file"},
		{"file is a directory", `{"file":"/w/"}`, ErrInvalidField, "workspace.file"},
		{"file is the root", `{"file":"/"}`, ErrInvalidField, "workspace.file"},
		{"file is dot-dot", `{"file":"/w/.."}`, ErrInvalidField, "workspace.file"},
		{"unclean file", `{"file":"/w/x/../a.txt"}`, ErrInvalidField, "workspace.file"},
		{"wildcard in the file's name", `{"file":"/w/*.txt"}`, ErrInvalidField, "workspace.file"},
		{"newline in the file", `{"file":"/w/a\nb"}`, ErrInvalidField, "workspace.file"},
		{"file is not a string", `{"file":["/w/a.txt"]}`, ErrInvalidField, "workspace.file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeContract([]byte(strings.Replace(good, "WS", tt.ws, 1)))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("DecodeContract(workspace %s) = %v, want it accepted", tt.ws, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeContract(workspace %s) = %v, want code %v", tt.ws, err, tt.want.Code)
			}
			var pe *Error
			if errors.As(err, &pe); pe.Field != tt.field {
				t.Errorf("field = %q, want %q", pe.Field, tt.field)
			}
		})
	}
}

// TestWorkspaceGolden pins the wire JSON of snapshot workspaces and the
// patches that come back. Regenerate with go test ./pkg/protocol -update.
func TestWorkspaceGolden(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	contract, err := DecodeContract(mustRead(t, "testdata/contract_snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	patch := &Patch{Ref: "sha256-60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", Size: 412, Node: "sb-1",
		Commit: "3b18e512dba79e4c8300dd08aeb37f8e728b8dad",
		Files: []FileChange{{Path: "hello.txt", Change: ChangeModified, Kind: FileText}, {Path: "logo.png", Change: ChangeAdded, Kind: FileBinary},
			{Path: "run.sh", Change: ChangeMode, Kind: FileText}}}
	file, err := DecodeContract(mustRead(t, "testdata/contract_file.json"))
	if err != nil {
		t.Fatal(err)
	}
	skills, err := DecodeContract(mustRead(t, "testdata/contract_skills.json"))
	if err != nil {
		t.Fatal(err)
	}
	skillsSnap, err := DecodeContract(mustRead(t, "testdata/contract_skills_snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"contract_skills_snapshot": skillsSnap,
		// The read of a skill of a skills snapshot, as a coordinator sends it.
		"sandbox_read_skill": &SandboxOp{OpID: "r1.2.0.1", Run: "r1", Kind: OpTool, Workspace: "/srv/work/app", Skills: skillsSnap.Skills,
			Call: &ToolCall{ID: "call_1", Name: "read_skill", Arguments: json.RawMessage(`{"path":"skills/release-notes.md"}`)}, Policy: skillsSnap.Policy},
		"contract_snapshot":   contract,
		"contract_file":       file,
		"contract_skills":     skills,
		"sandbox_open_skills": &SandboxOp{OpID: "r1.open", Run: "r1", Kind: OpOpen, Workspace: "/srv/work/app", Skills: skills.Skills},
		"open_reply_skills": &SandboxReply{OpID: "r1.open", Node: "sb-1", Tools: []ToolSpec{{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)}},
			Skills: []Skill{{Name: "release-notes", Description: "How to write the release notes of a version.", Path: "docs/skills/release-notes.md"},
				{Name: "changelog", Description: "Where the changelog lives and its format.", Path: "docs/skills/changelog/SKILL.md"}}},
		"sandbox_open_snapshot": &SandboxOp{OpID: "r1.open", Run: "r1", Kind: OpOpen, Snapshot: testRef,
			Sandbox: &SandboxSpec{Backend: "auto", Limits: Limits{}.WithDefaults()}},
		"sandbox_collect": &SandboxOp{OpID: "r1.collect", Run: "r1", Kind: OpCollect, Snapshot: testRef, Commit: &CommitSpec{Message: "friendlier greeting"}},
		"collect_reply":   &SandboxReply{OpID: "r1.collect", Node: "sb-1", Patch: patch},
		"record_finished_patch": &Record{Format: TraceFormat, Kind: RecordFinished, Run: "r1", Step: 2, Time: at, Outcome: OutcomeSuccess,
			Reason: "passed", Tokens: 900, Patch: patch},
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

func TestValidSnapshotRef(t *testing.T) {
	for ref, want := range map[string]bool{
		testRef: true, "": false, "sha256-": false, "sha1-" + testRef[7:]: false, testRef + "0": false,
		"sha256-" + strings.Repeat("g", 64): false, "sha256-" + strings.Repeat("0", 63) + "/": false,
	} {
		if got := ValidSnapshotRef(ref); got != want {
			t.Errorf("ValidSnapshotRef(%q) = %v, want %v", ref, got, want)
		}
	}
}
