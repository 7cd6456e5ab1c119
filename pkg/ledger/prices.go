package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"

	"github.com/ioharness/harness/pkg/protocol"
)

// Price is what one model costs, in micro-units per million tokens: a model
// at $3 per million input tokens has InputPerMillion 3_000_000.
type Price struct {
	// InputPerMillion is the price of a million prompt tokens.
	InputPerMillion int64 `json:"input_per_million"`
	// OutputPerMillion is the price of a million completion tokens,
	// reasoning tokens included.
	OutputPerMillion int64 `json:"output_per_million"`
	// CachedInputPerMillion is the price of a million prompt tokens read
	// from the provider's prompt cache; zero prices them as input.
	CachedInputPerMillion int64 `json:"cached_input_per_million,omitempty"`
	// CacheWritePerMillion is the price of a million prompt tokens written
	// to the provider's prompt cache; zero prices them as input.
	CacheWritePerMillion int64 `json:"cache_write_per_million,omitempty"`
}

// Prices maps a model name, as sent to the provider, to its price. It comes
// from the configuration; a nil Prices prices nothing.
type Prices map[string]Price

// Cost returns what in input and out output tokens of model cost, in
// micro-units, rounded up so a draw never undercounts. ok is false when the
// model has no price: the cost is then 0, and the caller should say so
// (such calls draw tokens and steps but no cost). Negative counts count as
// zero; a cost beyond the int64 range saturates at its maximum.
func (p Prices) Cost(model string, in, out int64) (micros int64, ok bool) {
	return p.CostOf(model, protocol.Usage{InputTokens: in, OutputTokens: out})
}

// CostOf is Cost for a call's whole usage: the prompt tokens read from and
// written to the provider's cache at their own prices (when the table
// gives them), the rest of the input at the input price, and the output,
// reasoning included, at the output price.
func (p Prices) CostOf(model string, u protocol.Usage) (micros int64, ok bool) {
	price, ok := p[model]
	if !ok {
		return 0, false
	}
	cached, written := max(u.CachedTokens, 0), max(u.CacheWriteTokens, 0)
	plain := max(u.InputTokens-cached-written, 0)
	cachedPrice, writePrice := price.CachedInputPerMillion, price.CacheWritePerMillion
	if cachedPrice == 0 {
		cachedPrice = price.InputPerMillion
	}
	if writePrice == 0 {
		writePrice = price.InputPerMillion
	}
	var hi, lo uint64
	for _, term := range [][2]int64{{plain, price.InputPerMillion}, {cached, cachedPrice}, {written, writePrice}, {u.OutputTokens, price.OutputPerMillion}} {
		h, l := mulPos(term[0], term[1])
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi, carry = bits.Add64(hi, h, carry)
		if carry != 0 {
			return 1<<63 - 1, true
		}
	}
	// Round up: add 999,999 before dividing by a million.
	var carry uint64
	lo, carry = bits.Add64(lo, 999_999, 0)
	hi += carry
	if hi >= 1_000_000 { // the quotient would not fit in 64 bits
		return 1<<63 - 1, true
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > 1<<63-1 {
		return 1<<63 - 1, true
	}
	return int64(q), true
}

// mulPos multiplies two counts as unsigned 128-bit, treating negatives as 0.
func mulPos(a, b int64) (hi, lo uint64) {
	if a <= 0 || b <= 0 {
		return 0, 0
	}
	return bits.Mul64(uint64(a), uint64(b))
}

// LoadPrices reads a price table from a JSON file:
// {"model": {"input_per_million": N, "output_per_million": M}, ...}, in
// micro-units of one currency. Errors: the file cannot be read, or is not
// such an object (unknown fields included).
func LoadPrices(path string) (Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Prices
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return p, nil
}
