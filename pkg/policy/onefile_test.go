package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestOneFile checks a policy confined to one file: that file is read and
// written, whatever the contract's defaults said, and nothing else is,
// whatever its allows said, in the root or below it (a pattern is also
// matched by its last element, so "sub/notes.txt" is the case an allow of
// "notes.txt" alone would let through); a deny still binds the file, an
// ask of the file stays an ask of it alone, and a command runs only where
// a rule allows it.
func TestOneFile(t *testing.T) {
	p, err := FromProtocol(&protocol.Policy{Layers: []protocol.Layer{{Name: "contract", Rules: []protocol.Rule{
		{Act: "read", Effect: "allow", Pattern: "*"},
		{Act: "write", Effect: "allow", Pattern: "*.txt"},
		{Act: "write", Effect: "ask", Pattern: "*.md"},
		{Act: "write", Effect: "deny", Pattern: "locked.md"},
		{Act: "exec", Effect: "allow", Pattern: "sort*"},
	}}}, Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "ask"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file string
		q    query
		want Effect
	}{
		{"reads the file", "notes.txt", query{act: Read, target: "notes.txt"}, Allow},
		{"writes the file", "notes.txt", query{act: Write, target: "notes.txt"}, Allow},
		{"a sibling is unread", "notes.txt", query{act: Read, target: "other.txt"}, Deny},
		{"a sibling is unwritten", "notes.txt", query{act: Write, target: "other.txt"}, Deny},
		{"the root is unlisted", "notes.txt", query{act: Read, target: "."}, Deny},
		{"the same name below is unread", "notes.txt", query{act: Read, target: "sub/notes.txt"}, Deny},
		{"the same name below is unwritten", "notes.txt", query{act: Write, target: "sub/notes.txt"}, Deny},
		{"a path climbing back is still the file", "notes.txt", query{act: Read, target: "sub/../notes.txt"}, Allow},
		{"an ask of the file stays", "todo.md", query{act: Write, target: "todo.md"}, Ask},
		{"an ask of a sibling goes", "todo.md", query{act: Write, target: "other.md"}, Deny},
		{"a deny of the file binds", "locked.md", query{act: Write, target: "locked.md"}, Deny},
		{"a secret stays secret", ".env", query{act: Read, target: ".env"}, Deny},
		{"an allowed command runs", "notes.txt", query{argv: []string{"sort", "notes.txt"}}, Allow},
		{"any other command does not", "notes.txt", query{argv: []string{"cat", "/etc/passwd"}}, Deny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.q.run(p.OneFile(tt.file)); got.Effect != tt.want {
				t.Errorf("OneFile(%q).%s = %v, want %v", tt.file, tt.q, got, tt.want)
			}
		})
	}
	one := p.OneFile("todo.md")
	if diff := cmp.Diff(one.Protocol(), one.OneFile("todo.md").Protocol()); diff != "" {
		t.Errorf("OneFile is not idempotent (-once +twice):\n%s", diff)
	}
	// Compiled again from its wire form, as every sandbox op carries it.
	back, err := FromProtocol(one.Protocol())
	if err != nil {
		t.Fatal(err)
	}
	if v := back.Check(Read, "other.md"); v.Effect != Deny {
		t.Errorf("FromProtocol(OneFile(todo.md)).Check(read, other.md) = %v, want deny", v)
	}
}
