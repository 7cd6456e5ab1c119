package assemble

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenInputs are the assemblies whose messages testdata/ holds.
func goldenInputs() map[string]Input {
	think := []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "The test fails on a.go.", Signature: "c2lnbmVk"}}
	fits := Input{System: "You are an agent.", Task: "Task: make go test pass.", Budget: 200_000, Output: 4096, Step: 4,
		Notes: []protocol.Note{{Key: "build", Value: "go test ./... takes 40 s", Run: "r1", Step: 3, Time: time.Unix(0, 0).UTC()}},
		Steps: []Step{
			st(1, "Let me look.", ex("c1", []string{"go", "test", "./..."}, "--- FAIL: TestAdd\nadd_test.go:9: Add(1, 2) = -1, want 3\nFAIL")),
			st(2, "", rd("c2", "add.go", "package add\n\nfunc Add(a, b int) int { return a - b }\n")),
			st(3, "Fixing the sign.", mkop("c3", "edit_file", map[string]string{"path": "add.go", "search": "a - b", "replace": "a + b"}, "edited add.go")),
		}}
	for i := range fits.Steps {
		fits.Steps[i].Turn.Thinking = think
	}
	fits.Steps[1].After = []protocol.Message{{Role: protocol.RoleUser, Content: "You have 8 steps left."}}

	pressure := Input{Task: "Task: fix the parser.", Budget: 1500, Output: 200, Step: 7, Steps: []Step{
		st(1, "", ex("c1", []string{"go", "test", "./..."}, fill("FAIL parse", 1900))),
		st(2, "", rd("c2", "parse.go", fill("parse.go v1", 600)), gr("c3", "func parse", "parse.go:12: func parse(s string) (*Node, error) {")),
		st(3, "", rd("c4", "./parse.go", fill("parse.go v1", 600)), rd("c5", "lex.go", "package parse\n\n// lex splits s into tokens.\n")),
		st(4, "Rewriting lex.", mkop("c6", "write_file", map[string]string{"path": "lex.go", "content": "package parse\n"}, "wrote lex.go (14 bytes)")),
		st(5, "", ex("c7", []string{"go", "vet"}, fill("vet", 900))),
		st(6, "", ex("c8", []string{"go", "test", "-run", "Parse"}, fill("FAIL TestParse", 700))),
	}}
	fresh := pressure
	fresh.Fresh = map[string]string{"c5": "package parse\n"}

	var many []Step
	for i := 1; i <= 40; i++ {
		many = append(many, st(i, "", rd("c"+itoa(i), "src/f"+itoa(i)+".go", fill("f"+itoa(i), 1200))))
	}
	collapse := Input{Task: "Task: read every file.", Budget: 6000, Output: 500, Steps: many, Step: 41}
	return map[string]Input{"fits": fits, "pressure": pressure, "reread": fresh, "collapse": collapse}
}

func TestGolden(t *testing.T) {
	for name, in := range goldenInputs() {
		t.Run(name, func(t *testing.T) {
			out := Assemble(in)
			checkOutput(t, in, out)
			got, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read the golden file (go test -update writes it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Assemble(%s) differs from %s; run go test -update and read the diff:\n%s", name, path, got)
			}
		})
	}
}
