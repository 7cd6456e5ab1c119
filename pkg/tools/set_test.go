//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ioharness/harness/pkg/protocol"
)

// namedTool is a minimal Tool for Set tests.
type namedTool string

func (n namedTool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{Name: string(n), Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (namedTool) Invoke(context.Context, *Env, json.RawMessage) (*Output, error) {
	return &Output{}, nil
}

func TestNewSet(t *testing.T) {
	tests := []struct {
		name      string
		tools     []Tool
		wantNames []string
		wantErr   string
	}{
		{"empty", nil, nil, ""},
		{"order kept", []Tool{namedTool("b"), namedTool("a"), namedTool("c")}, []string{"b", "a", "c"}, ""},
		{"duplicate", []Tool{namedTool("a"), namedTool("a")}, nil, `duplicate tool name "a"`},
		{"duplicate of a builtin", []Tool{Grep{}, namedTool("grep")}, nil, `duplicate tool name "grep"`},
		{"nil tool", []Tool{nil}, nil, "nil"},
		{"empty name", []Tool{namedTool("")}, nil, "name"},
		{"bad name", []Tool{namedTool("a b")}, nil, "name"},
		{"long name", []Tool{namedTool(strings.Repeat("x", 65))}, nil, "name"},
		{"an MCP server's name", []Tool{namedTool("mcp__github__delete_repo")}, nil, `begins with "mcp__"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSet(tt.tools...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewSet() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewSet() = %v", err)
			}
			if diff := cmp.Diff(tt.wantNames, s.Names()); diff != "" {
				t.Errorf("Names() mismatch (-want +got):\n%s", diff)
			}
			for _, n := range tt.wantNames {
				if tool, ok := s.Get(n); !ok || tool.Spec().Name != n {
					t.Errorf("Get(%q) = %v, %v", n, tool, ok)
				}
			}
			if _, ok := s.Get("nope"); ok {
				t.Errorf("Get(nope) found a tool")
			}
		})
	}
}

func TestBuiltinsSpecs(t *testing.T) {
	s := Builtins()
	want := []string{"grep", "find", "read_file", "write_file", "edit_file", "exec"}
	if diff := cmp.Diff(want, s.Names()); diff != "" {
		t.Fatalf("Builtins().Names() mismatch (-want +got):\n%s", diff)
	}
	type schema struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties bool     `json:"additionalProperties"`
	}
	wantRequired := map[string][]string{
		"grep":       {"pattern"},
		"find":       {"name_glob"},
		"read_file":  {"path"},
		"write_file": {"path", "content"},
		"edit_file":  {"path", "search", "replace"},
		"exec":       {"argv"},
	}
	specs := s.Specs()
	for i, sp := range specs {
		if sp.Name != want[i] || sp.Description == "" {
			t.Errorf("Specs()[%d] = %q with description %q", i, sp.Name, sp.Description)
		}
		var sc schema
		if err := json.Unmarshal(sp.Parameters, &sc); err != nil {
			t.Fatalf("%s parameters %s: %v", sp.Name, sp.Parameters, err)
		}
		if sc.Type != "object" || sc.AdditionalProperties {
			t.Errorf("%s schema = %s, want a closed object", sp.Name, sp.Parameters)
		}
		if diff := cmp.Diff(wantRequired[sp.Name], sc.Required); diff != "" {
			t.Errorf("%s required mismatch (-want +got):\n%s", sp.Name, diff)
		}
		for n, p := range sc.Properties {
			if p.Description == "" || (p.Type != "string" && p.Type != "array") {
				t.Errorf("%s.%s = %+v, want a typed, described property", sp.Name, n, p)
			}
		}
	}
	if b, _ := json.Marshal(specs); string(b) != func() string { b, _ := json.Marshal(Builtins().Specs()); return string(b) }() {
		t.Errorf("Specs() is not stable between calls")
	}
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name      string
		tool      string
		args      string
		wantField string
		wantMsg   []string
	}{
		{"not an object", "read_file", `["a"]`, "", []string{"one JSON object", "read_file takes path (a string)"}},
		{"not JSON", "read_file", `{path:`, "", []string{"one JSON object"}},
		{"unknown argument", "read_file", `{"path":"a","offset":3}`, "offset", []string{`read_file has no argument "offset"`, "read_file takes path (a string)"}},
		{"case matters", "read_file", `{"Path":"a"}`, "Path", []string{`no argument "Path"`}},
		{"wrong type", "read_file", `{"path":7}`, "path", []string{`"path" must be a string, not a number`}},
		{"object for a string", "write_file", `{"path":"a","content":{"x":1}}`, "content", []string{`"content" must be a string, not an object`}},
		{"missing required", "write_file", `{"path":"a"}`, "content", []string{`required argument "content" is missing`, "write_file takes path (a string), content (a string)"}},
		{"null counts as missing", "write_file", `{"path":"a","content":null}`, "content", []string{`"content" is missing`}},
		{"empty arguments", "grep", ``, "pattern", []string{`"pattern" is missing`, "path_glob (a string, optional)"}},
		{"array of non-strings", "exec", `{"argv":[["ls"]]}`, "argv", []string{"element 0 is an array"}},
		{"boolean for array", "exec", `{"argv":true}`, "argv", []string{"not a boolean"}},
		{"alias and name", "find", `{"glob":"a","name_glob":"b"}`, "name_glob", []string{"given twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := invoke(t, newEnv(t), tt.tool, tt.args)
			pe := protocol.AsError(err)
			if pe == nil || pe.Code != protocol.CodeBadArguments {
				t.Fatalf("%s(%s) = %v, %v; want bad_arguments", tt.tool, tt.args, out, err)
			}
			if pe.Field != tt.wantField {
				t.Errorf("%s(%s) field = %q, want %q", tt.tool, tt.args, pe.Field, tt.wantField)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(pe.Message, m) {
					t.Errorf("%s(%s) message %q lacks %q", tt.tool, tt.args, pe.Message, m)
				}
			}
		})
	}
}

func TestNoWorkspace(t *testing.T) {
	for _, name := range Builtins().Names() {
		t.Run(name, func(t *testing.T) {
			tool, _ := Builtins().Get(name)
			args := map[string]string{
				"grep": `{"pattern":"a"}`, "find": `{"name_glob":"a"}`, "read_file": `{"path":"a"}`,
				"write_file": `{"path":"a","content":""}`, "edit_file": `{"path":"a","search":"a","replace":""}`, "exec": `{"argv":["true"]}`,
			}[name]
			if _, err := tool.Invoke(context.Background(), &Env{}, json.RawMessage(args)); codeOf(err) != protocol.CodeUnsupported {
				t.Errorf("%s(%s) with no workspace = %v, want code %v", name, args, err, protocol.CodeUnsupported)
			}
		})
	}
}

// TestReadOnlyTools pins which built-in tools change nothing: a call of
// one of them cut off by a restart is run again instead of reported as
// indeterminate, so a tool that writes must never be among them.
func TestReadOnlyTools(t *testing.T) {
	s := BuiltinsWithImages()
	var got []string
	for _, n := range s.Names() {
		if s.ReadOnly(n) {
			got = append(got, n)
		}
	}
	if want := []string{"grep", "find", "read_file", "view_image"}; !slices.Equal(got, want) {
		t.Errorf("read-only tools = %v, want %v", got, want)
	}
	if s.ReadOnly("no_such_tool") {
		t.Error("an unknown tool counts as read-only")
	}
}

// TestInProcessTools pins which built-in tools run no command, server or
// archive: a sandboxer runs their calls without one of its slots, so exec
// and the git tools, which run programs, must never be among them.
func TestInProcessTools(t *testing.T) {
	for _, c := range []struct {
		s    *Set
		want []string
	}{
		{BuiltinsWithImages(), []string{"grep", "find", "read_file", "write_file", "edit_file", "view_image"}},
		{Git(), nil},
	} {
		s, want := c.s, c.want
		var got []string
		for _, n := range s.Names() {
			if s.InProcess(n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("in-process tools of %v = %v, want %v", s.Names(), got, want)
		}
	}
	if BuiltinsWithImages().InProcess("no_such_tool") {
		t.Error("an unknown tool counts as in-process")
	}
}
