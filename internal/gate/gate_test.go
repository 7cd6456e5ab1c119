package gate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

func TestVerdicts(t *testing.T) {
	pol, err := policy.FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "l", Rules: []protocol.Rule{
		{Act: "write", Effect: "allow", Pattern: "*.go"},
		{Act: "exec", Effect: "allow", Pattern: "go"},
		{Act: "exec", Effect: "allow", Pattern: "go test*"},
	}}}, Defaults: &protocol.Defaults{Write: "deny", Exec: "deny"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, args string
		want       policy.Effect
		bad        bool
	}{
		{"read_file", `{"path":"a.go"}`, policy.Allow, false},
		{"read_file", `{"path":".env"}`, policy.Deny, false},
		{"write_file", `{"path":"a.go","content":""}`, policy.Allow, false},
		{"write_file", `{"path":"a.txt","content":""}`, policy.Deny, false},
		{"edit_file", `{"path":"../a.go"}`, policy.Deny, false},
		{"exec", `{"argv":["go","test","./..."]}`, policy.Allow, false},
		{"exec", `{"argv":["go","build"]}`, policy.Deny, false},
		// A program given by path is checked as given and by its base name, and
		// the stricter wins: an allow for go is not an allow for ./go, which
		// the agent may have written.
		{"exec", `{"argv":["./go","test"]}`, policy.Deny, false},
		{"exec", `{"argv":"go test"}`, 0, true},
		{"exec", `{}`, 0, true},
		{"write_file", `{"path":7}`, 0, true},
		{"grep", `{"pattern":"x"}`, policy.Allow, false},
		{"my_tool", `{}`, policy.Deny, false},
	}
	for _, tt := range tests {
		v, bad := Verdict(pol, &protocol.ToolCall{Name: tt.tool, Arguments: json.RawMessage(tt.args)})
		if (bad != "") != tt.bad || (!tt.bad && v.Effect != tt.want) {
			t.Errorf("verdict(%s %s) = %v %q, want %v (bad arguments: %v)", tt.tool, tt.args, v.Effect, bad, tt.want, tt.bad)
		}
	}
	if ok, why := Allowed(pol, protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"go", "test", "./..."}}}); !ok {
		t.Errorf("gate go test refused: %s", why)
	}
	if ok, why := Allowed(pol, protocol.Verification{Command: &protocol.CommandCheck{Argv: []string{"make", "check"}}}); ok || !strings.Contains(why, "explicit allow") {
		t.Errorf("gate make check = %v %q, want refused with a reason", ok, why)
	}
}
