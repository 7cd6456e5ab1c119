//go:build pdf || documents

package pdf_test

import (
	"context"
	"fmt"

	"github.com/ioharness/harness/pkg/documents/pdf"
)

// A PDF written with Write reads back page by page.
func ExampleWrite() {
	file, err := pdf.Write([]string{"Minutes of the meeting\nThe budget was approved.", "Next meeting: Tuesday."})
	if err != nil {
		fmt.Println(err)
		return
	}
	pages, err := pdf.Pages(context.Background(), file)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, p := range pages {
		fmt.Printf("page %d: %q\n", i+1, p)
	}
	// Output:
	// page 1: "Minutes of the meeting\nThe budget was approved.\n"
	// page 2: "Next meeting: Tuesday.\n"
}
