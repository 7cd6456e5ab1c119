package provider

import (
	"slices"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestUniqueCallIDs(t *testing.T) {
	for _, tt := range []struct {
		in, want []string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"call_0", "call_0"}, []string{"call_0", "call_0_1"}},
		{[]string{"x", "x", "x_1"}, []string{"x", "x_2", "x_1"}},
		{[]string{"", ""}, []string{"call_0", "call_1"}},
		{[]string{"call_1", ""}, []string{"call_1", "call_2"}},
		{nil, nil},
	} {
		calls := make([]protocol.ToolCall, len(tt.in))
		for i, id := range tt.in {
			calls[i].ID = id
		}
		uniqueCallIDs(calls)
		var got []string
		for _, c := range calls {
			got = append(got, c.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("uniqueCallIDs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
