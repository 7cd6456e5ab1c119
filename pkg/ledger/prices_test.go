package ledger_test

import (
	"math"
	"testing"

	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
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

// TestPricesCostOf prices the parts of a call's input on their own: cache
// reads and writes at their prices, or at the input price when the table
// gives none, the rest of the input at the input price.
func TestPricesCostOf(t *testing.T) {
	p := ledger.Prices{
		"cached": {InputPerMillion: 3_000_000, OutputPerMillion: 15_000_000, CachedInputPerMillion: 300_000, CacheWritePerMillion: 3_750_000},
		"plain":  {InputPerMillion: 3_000_000, OutputPerMillion: 15_000_000},
	}
	u := protocol.Usage{InputTokens: 1_000_000, CachedTokens: 500_000, CacheWriteTokens: 200_000, OutputTokens: 100_000, ReasoningTokens: 40_000}
	// 300k plain at 3, 500k read at 0.3, 200k written at 3.75, 100k out at 15.
	if got, ok := p.CostOf("cached", u); got != 900_000+150_000+750_000+1_500_000 || !ok {
		t.Errorf("CostOf(cached) = %d, %v; want 3300000, true", got, ok)
	}
	// Without cache prices every input token is input.
	if got, ok := p.CostOf("plain", u); got != 3_000_000+1_500_000 || !ok {
		t.Errorf("CostOf(plain) = %d, %v; want 4500000, true", got, ok)
	}
	// A report whose parts exceed its whole prices no negative input.
	odd := protocol.Usage{InputTokens: 10, CachedTokens: 1_000_000}
	if got, _ := p.CostOf("cached", odd); got != 300_000 {
		t.Errorf("CostOf(parts over the whole) = %d, want 300000", got)
	}
	if got, ok := p.CostOf("other", u); got != 0 || ok {
		t.Errorf("CostOf(unpriced) = %d, %v; want 0, false", got, ok)
	}
}
