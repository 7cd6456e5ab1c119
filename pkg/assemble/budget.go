package assemble

import (
	"math"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// defaultBytesPerToken is the estimate's calibration when none is given:
// four bytes of JSON to a token, as io-harness counts four chars.
const defaultBytesPerToken = 4

// calibration returns bytesPerToken, or the default when it is not a
// positive finite number.
func calibration(bytesPerToken float64) float64 {
	if !(bytesPerToken > 0) || math.IsInf(bytesPerToken, 1) {
		return defaultBytesPerToken
	}
	return bytesPerToken
}

// Tokens estimates the tokens of n bytes of text: ceil(n / bytesPerToken),
// with 4 bytes to a token when bytesPerToken is 0 (or negative, NaN or
// infinite). Zero or fewer bytes are zero tokens.
func Tokens(n int, bytesPerToken float64) int {
	if n <= 0 {
		return 0
	}
	return int(math.Ceil(float64(n) / calibration(bytesPerToken)))
}

// maxBytes is the most bytes whose estimate is at most tokens: -1 when
// tokens is negative, so that nothing fits.
func maxBytes(tokens int, bytesPerToken float64) int {
	if tokens < 0 {
		return -1
	}
	bpt := calibration(bytesPerToken)
	f := float64(tokens) * bpt
	if f >= 1<<62 {
		return 1 << 62
	}
	n := int(f)
	// Correct the float's rounding either way: Tokens is the arbiter.
	for n > 0 && Tokens(n, bpt) > tokens {
		n--
	}
	for Tokens(n+1, bpt) <= tokens {
		n++
	}
	return n
}

// Effective is the budget of one request: max, the most a request may
// carry (the contract's context.max_tokens, else the model's Window; zero
// means protocol.DefaultContextTokens), capped, when the run has a token
// budget, at share of what the budget has left, never under
// protocol.ContextFloor. remaining is the run's tokens left, or a negative
// number (-1) when it has no token budget; share is a fraction in (0, 1],
// zero (or anything outside that range) meaning
// protocol.DefaultContextShare.
func Effective(max int, share float64, remaining int64) int {
	if max <= 0 {
		max = protocol.DefaultContextTokens
	}
	if remaining < 0 {
		return max
	}
	if !(share > 0 && share <= 1) {
		share = protocol.DefaultContextShare
	}
	part := math.Max(float64(remaining)*share, protocol.ContextFloor)
	if part >= float64(max) {
		return max
	}
	return int(part)
}

// window is one row of the table of known models' context windows.
type window struct {
	prefix string
	tokens int
}

// windows are the context windows of known model families, in tokens,
// matched by the longest prefix of the model's name. Where a family's
// models differ, the figure is its smallest current one, since a window
// overstated is a request refused.
var windows = []window{
	{"gpt-5", 400_000},
	{"gpt-4.1", 1_047_576},
	{"gpt-4.5", 128_000},
	{"gpt-4o", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-4-32k", 32_768},
	{"gpt-4", 8_192},
	{"gpt-3.5-turbo", 16_385},
	{"gpt-oss", 131_072},
	{"chatgpt-4o", 128_000},
	{"codex-mini", 200_000},
	{"o1", 200_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"claude-", 200_000},
	{"gemini-", 1_048_576},
	{"gemini-1.0", 32_760},
	{"gemma-3", 131_072},
	{"grok-3", 131_072},
	{"grok-4", 256_000},
	{"grok-code-fast", 256_000},
	{"deepseek", 128_000},
	{"mistral-large", 131_072},
	{"mistral-medium", 131_072},
	{"codestral", 256_000},
	{"devstral", 131_072},
	{"llama-3.1", 131_072},
	{"llama-3.3", 131_072},
	{"qwen3-coder", 262_144},
	{"kimi-k2", 131_072},
	{"glm-4.5", 131_072},
	{"glm-4.6", 200_000},
}

// Window is the context window of a known model, by the longest matching
// prefix of its name (case folded, after any OpenRouter "vendor/" prefix):
// gpt-4.1* 1,047,576; gpt-5* 400,000; gpt-4o* 128,000; o1*, o3*, o4*
// 200,000; claude-* 200,000; gemini-* 1,048,576; and other common
// families. An unknown model gets protocol.DefaultContextTokens.
func Window(model string) int {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, tokens := 0, protocol.DefaultContextTokens
	for _, w := range windows {
		if len(w.prefix) > best && strings.HasPrefix(name, w.prefix) {
			best, tokens = len(w.prefix), w.tokens
		}
	}
	return tokens
}
