package ledger_test

import (
	"math"
	"testing"

	"github.com/ioharness/harness/pkg/ledger"
)

func TestPricesCost(t *testing.T) {
	p := ledger.Prices{
		"m":     {InputPerMillion: 3_000_000, OutputPerMillion: 15_000_000},
		"cheap": {InputPerMillion: 1, OutputPerMillion: 1},
		"free":  {},
		"huge":  {InputPerMillion: math.MaxInt64, OutputPerMillion: math.MaxInt64},
	}
	tests := []struct {
		name    string
		model   string
		in, out int64
		want    int64
		ok      bool
	}{
		{"priced", "m", 1_000_000, 1_000_000, 18_000_000, true},
		{"small", "m", 1000, 200, 6000, true},
		{"rounds up", "cheap", 1, 0, 1, true},
		{"rounds up the sum", "cheap", 500_000, 500_001, 2, true},
		{"exact", "cheap", 500_000, 500_000, 1, true},
		{"zero tokens", "m", 0, 0, 0, true},
		{"free model", "free", 1000, 1000, 0, true},
		{"negative counts count as zero", "m", -5, 1_000_000, 15_000_000, true},
		{"saturates", "huge", math.MaxInt64, math.MaxInt64, math.MaxInt64, true},
		{"unpriced", "other", 1000, 1000, 0, false},
	}
	for _, tt := range tests {
		got, ok := p.Cost(tt.model, tt.in, tt.out)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Cost(%q, %d, %d) = %d, %v; want %d, %v", tt.name, tt.model, tt.in, tt.out, got, ok, tt.want, tt.ok)
		}
	}
	var none ledger.Prices
	if got, ok := none.Cost("m", 10, 10); got != 0 || ok {
		t.Errorf("nil Prices Cost = %d, %v; want 0, false", got, ok)
	}
}
