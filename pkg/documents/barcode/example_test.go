//go:build barcode || documents

package barcode_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ioharness/harness/pkg/documents/barcode"
)

// Decode lists the codes in an image, QR codes first.
func ExampleDecode() {
	img, err := os.ReadFile("testdata/multi-1_1.png")
	if err != nil {
		fmt.Println(err)
		return
	}
	codes, err := barcode.Decode(context.Background(), img)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range codes {
		fmt.Println(c.Format, c.Text)
	}
	// Output:
	// QR_CODE www.airtable.com/jobs
	// UPC_A 031415926531
}
