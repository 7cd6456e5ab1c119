//go:build pptx || documents

package pptx_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/pptx"
)

// Read gives a deck's text slide by slide, tables with " | " between
// their cells.
func ExampleRead() {
	in, err := os.ReadFile("testdata/test_slides.pptx")
	if err != nil {
		fmt.Println(err)
		return
	}
	text, err := pptx.Read(context.Background(), in, documents.DefaultLimits)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(text)
	// Output:
	// Slide 1
	// Test text
	// Group test text
	// Box 1
	// Box 2
	// Col head 1 | Col head 2
	// Cell text 1 | Cell text 2
}
