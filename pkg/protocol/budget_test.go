package protocol

import (
	"errors"
	"testing"
)

// TestTreeMaxConcurrent decodes budget.tree.max_concurrent on a root,
// refuses a negative one by its field, and refuses it on a sub-agent,
// which cannot set (or raise) any tree cap.
func TestTreeMaxConcurrent(t *testing.T) {
	const head = `{"schema":"harness.contract/v1","task":"t","workspace":{"root":"/w"},"verification":{"none":{}},`
	c, err := DecodeContract([]byte(head + `"budget":{"tree":{"max_agents":5,"max_concurrent":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Budget.Tree == nil || c.Budget.Tree.MaxConcurrent != 2 {
		t.Fatalf("budget.tree = %+v, want max_concurrent 2", c.Budget.Tree)
	}
	for _, tt := range []struct {
		name, in, field string
	}{
		{"negative", head + `"budget":{"tree":{"max_concurrent":-1}}}`, "budget.tree.max_concurrent"},
		{"on a sub-agent", head + `"parent":"r1","budget":{"tree":{"max_concurrent":8}}}`, "budget.tree"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeContract([]byte(tt.in))
			var pe *Error
			if !errors.Is(err, ErrInvalidField) || !errors.As(err, &pe) || pe.Field != tt.field {
				t.Errorf("DecodeContract = %v, want an invalid field %s", err, tt.field)
			}
		})
	}
}
