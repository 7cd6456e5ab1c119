//go:build xlsx || documents

package xlsx_test

import (
	"context"
	"fmt"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/documents/xlsx"
)

// Write makes a one-sheet workbook; SetCell changes one cell of it and
// keeps the rest.
func ExampleSetCell() {
	ctx := context.Background()
	b, err := xlsx.Write("Costs", [][]string{{"Item", "Cost"}, {"Tea", "4"}, {"Total", "=SUM(B2:B2)"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, ref, err := xlsx.SetCell(ctx, b, "Costs", "b2", "4.5", documents.DefaultLimits)
	if err != nil {
		fmt.Println(err)
		return
	}
	text, err := xlsx.Read(ctx, b, "Costs", documents.DefaultLimits)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ref)
	fmt.Println(text)
	// Output:
	// B2
	// Sheet "Costs" (A1:B3, 3 rows × 2 columns)
	// A1: Item | B1: Cost
	// A2: Tea | B2: 4.5
	// A3: Total | B3: =SUM(B2:B2) → (not calculated)
}
