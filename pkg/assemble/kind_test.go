package assemble

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestKindOf(t *testing.T) {
	tests := []struct {
		name, tool, args string
		kind             Kind
		target           string
	}{
		{"read", "read_file", `{"path":"pkg/a.go"}`, KindRead, "pkg/a.go"},
		{"read cleaned", "read_file", `{"path":"./pkg/x/../a.go"}`, KindRead, "pkg/a.go"},
		{"read dot slash", "read_file", `{"path":"./b.go"}`, KindRead, "b.go"},
		{"read escaped", "read_file", `{"path":"a\u002fb.go"}`, KindRead, "a/b.go"},
		{"read escaped key", "read_file", `{"p\u0061th":"c.go"}`, KindRead, "c.go"},
		{"read last key wins", "read_file", `{"path":"a.go","path":"b.go"}`, KindRead, "b.go"},
		{"read spaces", "read_file", " {\n \"path\" : \"a.go\" }\n", KindRead, "a.go"},
		{"read no path", "read_file", `{}`, KindTool, ""},
		{"read null path", "read_file", `{"path":null}`, KindTool, ""},
		{"read path number", "read_file", `{"path":5}`, KindTool, ""},
		{"read not json", "read_file", `{"path":"a.go"`, KindTool, ""},
		{"read trailing", "read_file", `{"path":"a.go"} x`, KindTool, ""},
		{"read array", "read_file", `["a.go"]`, KindTool, ""},
		{"write", "write_file", `{"path":"a.go","content":"package a"}`, KindWrite, "a.go"},
		{"edit", "edit_file", `{"path":"dir/../a.go","search":"x","replace":""}`, KindWrite, "a.go"},
		{"grep", "grep", `{"pattern":"func \\w+","path_glob":"*.go"}`, KindGrep, "func \\w+\x00*.go"},
		{"grep no glob", "grep", `{"pattern":"TODO"}`, KindGrep, "TODO\x00"},
		{"grep null glob", "grep", `{"pattern":"TODO","path_glob":null}`, KindGrep, "TODO\x00"},
		{"grep bad glob", "grep", `{"pattern":"TODO","path_glob":3}`, KindTool, ""},
		{"grep no pattern", "grep", `{"path_glob":"*.go"}`, KindTool, ""},
		{"find", "find", `{"name_glob":"*_test.go"}`, KindFind, "*_test.go"},
		{"find alias", "find", `{"glob":"**/*.md"}`, KindFind, "**/*.md"},
		{"find both names", "find", `{"glob":"a","name_glob":"b"}`, KindTool, ""},
		{"find alias null", "find", `{"glob":null,"name_glob":"b"}`, KindFind, "b"},
		{"exec", "exec", `{"argv":["go","test","./..."]}`, KindExec, "go test ./..."},
		{"exec empty argv", "exec", `{"argv":[]}`, KindTool, ""},
		{"exec argv string", "exec", `{"argv":"go test"}`, KindTool, ""},
		{"exec argv mixed", "exec", `{"argv":["go",1]}`, KindTool, ""},
		{"image", "view_image", `{"path":"shots/a.png"}`, KindImage, "shots/a.png"},
		{"child", "spawn_agent", `{"goal":"fix the parser","verify_file":"a","verify_contains":"b"}`, KindChild, "fix the parser"},
		{"remember", "remember", `{"key":"k","value":"v"}`, KindTool, "remember"},
		{"mcp", "mcp__gh__issues", `{"q":{"nested":[1,2]}}`, KindTool, "mcp__gh__issues"},
		{"empty args", "git_status", ``, KindTool, "git_status"},
		{"null args", "git_status", `null`, KindTool, "git_status"},
		{"bad args", "git_status", `{`, KindTool, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, target := KindOf(protocol.ToolCall{ID: "c", Name: tt.tool, Arguments: json.RawMessage(tt.args)})
			if k != tt.kind || target != tt.target {
				t.Errorf("KindOf(%s %s) = %q, %q; want %q, %q", tt.tool, tt.args, k, target, tt.kind, tt.target)
			}
		})
	}
}

// FuzzKindOf holds KindOf's reading of a path to encoding/json's.
func FuzzKindOf(f *testing.F) {
	for _, s := range []string{`{"path":"a.go"}`, `{"path":"a\"b"}`, `{"path":"\ud83d\ude00"}`, `{"path":"x","path":null}`, `{"PATH":"a"}`, "{\"path\":\"\xff\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k, target := KindOf(protocol.ToolCall{Name: "read_file", Arguments: json.RawMessage(raw)})
		var m map[string]json.RawMessage
		var p string
		wantKind, wantTarget := KindTool, ""
		if json.Unmarshal([]byte(raw), &m) == nil && m != nil && m["path"] != nil && json.Unmarshal(m["path"], &p) == nil &&
			p != "" && string(m["path"]) != "null" {
			wantKind, wantTarget = KindRead, cleanPath(p)
		}
		if strings.TrimSpace(raw) == "" {
			wantKind, wantTarget = KindTool, ""
		}
		if k != wantKind || target != wantTarget {
			t.Errorf("KindOf(read_file %q) = %q, %q; want %q, %q", raw, k, target, wantKind, wantTarget)
		}
	})
}

func TestEffective(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		share     float64
		remaining int64
		want      int
	}{
		{"no budget", 200_000, 0.5, -1, 200_000},
		{"no budget default", 0, 0, -1, protocol.DefaultContextTokens},
		{"plenty left", 24_000, 0.5, 1_000_000, 24_000},
		{"share of what is left", 24_000, 0.5, 10_000, 5_000},
		{"default share", 24_000, 0, 10_000, 5_000},
		{"share over one is the default", 24_000, 1.5, 10_000, 5_000},
		{"floor", 24_000, 0.5, 1_000, protocol.ContextFloor},
		{"nothing left", 24_000, 0.5, 0, protocol.ContextFloor},
		{"floor above max", 1_500, 0.5, 100, 1_500},
		{"whole share", 24_000, 1, 20_000, 20_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Effective(tt.max, tt.share, tt.remaining); got != tt.want {
				t.Errorf("Effective(%d, %v, %d) = %d, want %d", tt.max, tt.share, tt.remaining, got, tt.want)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	tests := map[string]int{
		"gpt-4.1":                     1_047_576,
		"gpt-4.1-mini-2025-04-14":     1_047_576,
		"openai/gpt-4.1-nano":         1_047_576,
		"gpt-5":                       400_000,
		"GPT-5-mini":                  400_000,
		"gpt-4o-mini":                 128_000,
		"gpt-4":                       8_192,
		"o1":                          200_000,
		"o3-mini":                     200_000,
		"openai/o4-mini":              200_000,
		"claude-sonnet-4-5":           200_000,
		"anthropic/claude-3.5-sonnet": 200_000,
		"gemini-2.5-pro":              1_048_576,
		"google/gemini-2.0-flash-001": 1_048_576,
		"x-ai/grok-4":                 256_000,
		"deepseek/deepseek-chat":      128_000,
		"someone/unknown-model":       protocol.DefaultContextTokens,
		"":                            protocol.DefaultContextTokens,
	}
	for model, want := range tests {
		if got := Window(model); got != want {
			t.Errorf("Window(%q) = %d, want %d", model, got, want)
		}
	}
}

func TestBound(t *testing.T) {
	long := strings.Repeat("0123456789", 500) + "THE END"
	tests := []struct {
		name  string
		s     string
		limit int
		tail  bool
		keep  string // what the cut keeps
		cut   bool   // whether it is cut
	}{
		{"short", "hello", 10, false, "hello", false},
		{"exact", "héllo", 5, true, "héllo", false},
		{"head", long, 2000, false, "0123456789", true},
		{"tail", long, 2000, true, "THE END", true},
		{"runes", strings.Repeat("é", 3000), 2000, false, "éé", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bound(tt.s, tt.limit, tt.tail)
			if n := utf8.RuneCountInString(got); n > tt.limit {
				t.Errorf("bound(%d chars, %d) has %d chars", utf8.RuneCountInString(tt.s), tt.limit, n)
			}
			if !utf8.ValidString(got) {
				t.Errorf("bound cut a rune: %q", got[len(got)-8:])
			}
			if !tt.cut {
				if got != tt.s {
					t.Errorf("bound(%q, %d) = %q, want it whole", tt.s, tt.limit, got)
				}
				return
			}
			n := utf8.RuneCountInString(tt.s)
			kept := tt.limit - utf8.RuneCountInString(cutNote(n, n)) - 1 // the note and its newline
			if utf8.RuneCountInString(got) != tt.limit {
				t.Errorf("bound(%d chars, %d) has %d chars, want the limit used", n, tt.limit, utf8.RuneCountInString(got))
			}
			note := cutNote(n-kept, n)
			switch {
			case tt.tail && !(strings.HasPrefix(got, note+"\n") && strings.HasSuffix(got, tt.keep)):
				t.Errorf("bound(tail) = %q...%q, want %q first and the tail kept", got[:100], got[len(got)-20:], note)
			case !tt.tail && !(strings.HasSuffix(got, "\n"+note) && strings.HasPrefix(got, tt.keep)):
				t.Errorf("bound(head) = %q...%q, want the head kept and %q last", got[:20], got[len(got)-100:], note)
			}
		})
	}
}

func TestBoundArgs(t *testing.T) {
	content := strings.Repeat("x", 5000)
	raw := args(map[string]any{"path": "a.go", "content": content, "n": 3})
	got, cut := boundArgs(raw, 2000)
	if !cut {
		t.Fatalf("boundArgs(%d bytes, 2000) cut nothing", len(raw))
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("boundArgs gave %q, not JSON: %v", got, err)
	}
	if m["path"] != "a.go" || m["n"] != 3.0 || utf8.RuneCountInString(m["content"].(string)) > 2000 || !strings.Contains(m["content"].(string), "…[truncated") {
		t.Errorf("boundArgs = %.200s, want path and n kept and content cut to 2000 chars", got)
	}
	if !strings.HasPrefix(string(got), `{"content":`) {
		t.Errorf("boundArgs = %.40s, want the keys in their order", got)
	}
	if got, cut := boundArgs(json.RawMessage(`{"path":"a.go"}`), 2000); cut || string(got) != `{"path":"a.go"}` {
		t.Errorf("boundArgs(short) = %s, %v; want it as it is", got, cut)
	}
}
