//go:build docx || documents

package docx_test

import (
	"context"
	"fmt"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/docx"
)

// A document written with Write reads back with its heading and table
// marked.
func ExampleWrite() {
	b, err := docx.Write([]docx.Block{
		{Heading: "Minutes", Level: 1},
		{Text: "All present."},
		{Table: [][]string{{"Item", "Owner"}, {"Budget", "Ana"}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	text, err := docx.Read(context.Background(), b, documents.DefaultLimits)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(text)
	// Output:
	// # Minutes
	// All present.
	// Item | Owner
	// Budget | Ana
}
