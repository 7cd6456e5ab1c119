package assemble

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

var stringSeeds = []string{"", "plain", "quote \" and \\ back", "\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&amp;</a>",
	"héllo wörld ✓ 日本", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x80", "emoji 🎉"}

func FuzzStrLen(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := strLen(s); got != len(b) {
			t.Errorf("strLen(%q) = %d, want %d (%s)", s, got, len(b), b)
		}
	})
}

var rawSeeds = []string{`{}`, ` { "a" : [1, 2.5e-3, -0, true, false, null] } `, `{"path":"a<b>&c"}`, `"\u2028"`,
	`{"a":"\u00e9\"\\\/\b\f\n\r\t"}`, `[`, `{"a":}`, `{"a":1,}`, `01`, `1.`, `-`, `"\x"`, "\"\x01\"", `{"a":"b"}x`,
	`nul`, `{"a" "b"}`, `[1 2]`, "{\"k\":\"\u2028\"}", "\t[ ]\n", `1e+5`, `"\ud800"`, `{"a":{"b":[{}]}}`}

func FuzzRawLen(f *testing.F) {
	for _, s := range rawSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := validJSON(raw), json.Valid(raw); got != want {
			t.Fatalf("validJSON(%q) = %v, want %v", raw, got, want)
		}
		if !json.Valid(raw) {
			return
		}
		b, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := rawLen(raw); got != len(b) {
			t.Errorf("rawLen(%q) = %d, want %d (%s)", raw, got, len(b), b)
		}
		// members sees an object's members in order, as a decoder does.
		if raw := bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '{' {
			var keys []string
			if !members(raw, func(m member) bool {
				k, ok := unquote(m.key)
				if !ok || !json.Valid(m.val) {
					t.Errorf("member %q: %q is not a key and a value", m.key, m.val)
				}
				keys = append(keys, k)
				return true
			}) {
				t.Fatalf("members(%q) refused an object", raw)
			}
			d := json.NewDecoder(bytes.NewReader(raw))
			d.Token()
			for i := 0; d.More(); i++ {
				k, _ := d.Token()
				var v json.RawMessage
				d.Decode(&v)
				if i >= len(keys) || keys[i] != k {
					t.Fatalf("members(%q) keys = %q, want %q at %d", raw, keys, k, i)
				}
			}
		}
	})
}

func TestMsgLen(t *testing.T) {
	img := []protocol.Image{{MediaType: "image/png", Data: []byte{1, 2, 3, 4}}, {MediaType: "image/gif"}, {MediaType: "x", Data: []byte{}}}
	msgs := map[string]protocol.Message{
		"empty":     {},
		"user":      {Role: protocol.RoleUser, Content: "Fix <it> & \"go\"\n"},
		"assistant": {Role: protocol.RoleAssistant, Content: "ok", ToolCalls: []protocol.ToolCall{{ID: "a", Name: "read_file", Arguments: json.RawMessage(` {"path": "a.go"} `)}, {ID: "b", Name: "x"}}},
		"tool":      {Role: protocol.RoleTool, ToolCallID: "call_1", Content: "package a\n\nfunc A() {}\n"},
		"images":    {Role: protocol.RoleUser, Content: "The images you asked to view:", Images: img},
		"thinking": {Role: protocol.RoleAssistant, Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "hmm", Signature: "sig=="},
			{Kind: protocol.ThinkingRedacted, Data: "enc"}, {Kind: protocol.ThinkingSummary}}},
	}
	for name, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := msgLen(&m, -1); got != len(b) {
			t.Errorf("msgLen(%s) = %d, want %d (%s)", name, got, len(b), b)
		}
		if m.Role == protocol.RoleTool {
			if got := toolResultLen(m.Content, m.ToolCallID); got != len(b) {
				t.Errorf("toolResultLen(%s) = %d, want %d", name, got, len(b))
			}
		}
	}
	tools := []protocol.ToolSpec{{Name: "read_file", Description: "Read <a> file.", Parameters: json.RawMessage(`{"type": "object"}`)}, {Name: "x"}}
	for _, tt := range [][]protocol.ToolSpec{nil, tools} {
		var ms []protocol.Message
		sum := 0
		for _, name := range []string{"user", "assistant", "tool", "images"} {
			m := msgs[name]
			ms = append(ms, m)
			sum += msgLen(&m, -1)
		}
		b, err := json.Marshal(protocol.CompletionRequest{System: "You <are> an agent.", Messages: ms, Tools: tt})
		if err != nil {
			t.Fatal(err)
		}
		if got := requestLen(frameLen("You <are> an agent.", tt), sum, len(ms)); got != len(b) {
			t.Errorf("requestLen with %d tools = %d, want %d (%s)", len(tt), got, len(b), b)
		}
	}
}

func TestTokensAndMaxBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int
		bpt  float64
		want int
	}{{0, 0, 0}, {-3, 4, 0}, {1, 0, 1}, {4, 0, 1}, {5, 0, 2}, {8, 4, 2}, {10, 2.5, 4}, {11, 2.5, 5}, {7, -1, 2}, {9, 3.7, 3}} {
		if got := Tokens(tt.n, tt.bpt); got != tt.want {
			t.Errorf("Tokens(%d, %v) = %d, want %d", tt.n, tt.bpt, got, tt.want)
		}
	}
	for _, bpt := range []float64{4, 3.3, 2.5, 1, 0.7, 7.9} {
		for tokens := 0; tokens < 300; tokens++ {
			n := maxBytes(tokens, bpt)
			if Tokens(n, bpt) > tokens || Tokens(n+1, bpt) <= tokens {
				t.Fatalf("maxBytes(%d, %v) = %d: Tokens(n) = %d, Tokens(n+1) = %d", tokens, bpt, n, Tokens(n, bpt), Tokens(n+1, bpt))
			}
		}
	}
	if got := maxBytes(-1, 4); got != -1 {
		t.Errorf("maxBytes(-1, 4) = %d, want -1", got)
	}
}

func TestLineLen(t *testing.T) {
	for _, c := range [][3]int{{1, 1, 1}, {1, 9, 0}, {3, 12, 10}, {99, 100, 2}, {7, 123456, 1}, {-1, 5, 3}} {
		m := protocol.Message{Role: protocol.RoleUser, Content: collapseLine(c[0], c[1], c[2])}
		if got, want := lineLen(c[0], c[1], c[2]), len(mustJSON(m))+1; got != want {
			t.Errorf("lineLen(%v) = %d, want %d for %q", c, got, want, m.Content)
		}
	}
}
