package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeContractMCP(t *testing.T) {
	const good = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}},"mcp":%s}`
	with := func(mcp string) string { return strings.Replace(good, "%s", mcp, 1) }
	tests := []struct {
		name  string
		mcp   string
		want  *Error // nil: accepted
		field string
	}{
		{"stdio", `{"servers":[{"name":"git","command":["mcp-server-git"],"env":{"TOKEN":"x"}}]}`, nil, ""},
		{"https", `{"servers":[{"name":"web","url":"https://mcp.example.com/mcp"}]}`, nil, ""},
		{"http to the loopback", `{"servers":[{"name":"web","url":"http://127.0.0.1:8080/mcp"}]}`, nil, ""},
		{"http to localhost", `{"servers":[{"name":"web","url":"http://localhost:8080/mcp"}]}`, nil, ""},
		{"http to the IPv6 loopback", `{"servers":[{"name":"web","url":"http://[::1]:8080/mcp"}]}`, nil, ""},
		{"http to the loopback written as IPv6", `{"servers":[{"name":"web","url":"http://[::ffff:127.0.0.2]:8080/mcp"}]}`, nil, ""},
		{"plain http to a zoned address", `{"servers":[{"name":"a","url":"http://[fe80::1%25eth0]:8080/mcp"}]}`, ErrInvalidField, "mcp.servers[0].url"},
		{"plain http to the loopback's neighbour", `{"servers":[{"name":"a","url":"http://128.0.0.1/mcp"}]}`, ErrInvalidField, "mcp.servers[0].url"},
		{"no servers", `{"servers":[]}`, ErrMissingField, "mcp.servers"},
		{"unknown field", `{"servers":[{"name":"a","command":["x"],"args":["y"]}]}`, ErrUnknownField, "mcp.servers[0].args"},
		{"no name", `{"servers":[{"command":["x"]}]}`, ErrMissingField, "mcp.servers[0].name"},
		{"name with a dot", `{"servers":[{"name":"a.b","command":["x"]}]}`, ErrInvalidField, "mcp.servers[0].name"},
		{"name with a double underscore", `{"servers":[{"name":"a__b","command":["x"]}]}`, ErrInvalidField, "mcp.servers[0].name"},
		{"name ending in an underscore", `{"servers":[{"name":"a_","command":["x"]}]}`, ErrInvalidField, "mcp.servers[0].name"},
		{"name with single underscores", `{"servers":[{"name":"my_git-1","command":["x"]}]}`, nil, ""},
		{"name too long", `{"servers":[{"name":"` + strings.Repeat("a", 33) + `","command":["x"]}]}`, ErrInvalidField, "mcp.servers[0].name"},
		{"names twice", `{"servers":[{"name":"a","command":["x"]},{"name":"a","url":"https://h/"}]}`, ErrInvalidField, "mcp.servers[1].name"},
		{"neither", `{"servers":[{"name":"a"}]}`, ErrMissingField, "mcp.servers[0]"},
		{"both", `{"servers":[{"name":"a","command":["x"],"url":"https://h/"}]}`, ErrInvalidField, "mcp.servers[0]"},
		{"empty program", `{"servers":[{"name":"a","command":[""]}]}`, ErrMissingField, "mcp.servers[0].command"},
		{"nul in an argument", `{"servers":[{"name":"a","command":["x","a\u0000b"]}]}`, ErrInvalidField, "mcp.servers[0].command[1]"},
		{"env name with =", `{"servers":[{"name":"a","command":["x"],"env":{"A=B":"c"}}]}`, ErrInvalidField, "mcp.servers[0].env"},
		{"env on a url", `{"servers":[{"name":"a","url":"https://h/","env":{"A":"b"}}]}`, ErrInvalidField, "mcp.servers[0].env"},
		{"plain http elsewhere", `{"servers":[{"name":"a","url":"http://mcp.example.com/mcp"}]}`, ErrInvalidField, "mcp.servers[0].url"},
		{"another scheme", `{"servers":[{"name":"a","url":"ws://127.0.0.1/mcp"}]}`, ErrInvalidField, "mcp.servers[0].url"},
		{"not absolute", `{"servers":[{"name":"a","url":"/mcp"}]}`, ErrInvalidField, "mcp.servers[0].url"},
		{"credentials in the url", `{"servers":[{"name":"a","url":"https://u:p@h/mcp"}]}`, ErrInvalidField, "mcp.servers[0].url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeContract([]byte(with(tt.mcp)))
			if tt.want == nil {
				if err != nil || c.MCP == nil {
					t.Fatalf("DecodeContract(%s) = %v, want it accepted", tt.mcp, err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) || !errors.Is(err, tt.want) || pe.Field != tt.field {
				t.Fatalf("DecodeContract(%s) = %v, want %s on %q", tt.mcp, err, tt.want.Code, tt.field)
			}
		})
	}
}

func TestSplitMCPTool(t *testing.T) {
	tests := []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp__github__delete_repo", "github", "delete_repo", true},
		{"mcp__a__b__c", "a", "b__c", true},
		{"mcp__github__", "", "", false},
		{"mcp____x", "", "", false},
		{"mcp__github", "", "", false},
		{"read_file", "", "", false},
	}
	for _, tt := range tests {
		s, tool, ok := SplitMCPTool(tt.name)
		if s != tt.server || tool != tt.tool || ok != tt.ok {
			t.Errorf("SplitMCPTool(%q) = %q, %q, %v; want %q, %q, %v", tt.name, s, tool, ok, tt.server, tt.tool, tt.ok)
		}
		if tt.ok && MCPToolName(s, tool) != tt.name {
			t.Errorf("MCPToolName(%q, %q) = %q, want %q", s, tool, MCPToolName(s, tool), tt.name)
		}
	}
}

func TestContractRedacted(t *testing.T) {
	c := &Contract{MCP: &MCPSpec{Servers: []MCPServer{{Name: "a", Command: []string{"x"}, Env: map[string]string{"TOKEN": "secret"}}, {Name: "b", URL: "https://h/"}}}}
	r := c.Redacted()
	if r == c || r.MCP.Servers[0].Env["TOKEN"] != RedactedValue || r.MCP.Servers[1].URL != "https://h/" {
		t.Fatalf("Redacted() = %+v, want a copy with the env's values redacted", r.MCP)
	}
	if c.MCP.Servers[0].Env["TOKEN"] != "secret" {
		t.Errorf("Redacted changed the contract it was called on: %v", c.MCP.Servers[0].Env)
	}
	plain := &Contract{MCP: &MCPSpec{Servers: []MCPServer{{Name: "b", URL: "https://h/"}}}}
	if plain.Redacted() != plain {
		t.Error("Redacted() of a contract with no env copied it")
	}
}
