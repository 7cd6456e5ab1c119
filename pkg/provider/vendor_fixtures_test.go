package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ioharness/harness/pkg/protocol"
)

// The vendor fixtures are answers taken from the vendors' own SDK test
// suites and documentation (testdata/vendor/SOURCES.md says where each came
// from). Each row serves one fixture's bytes, with the status and headers
// of its .headers file when it has one, and says what the turn or the
// error must be by the vendor's semantics, not by what a client happens to
// do today.

// vendorRequestModel is the model every fixture request names, so a
// fixture whose answer names no model shows the request's.
const vendorRequestModel = "vendor-fixture-model"

// vendorTurn is the part of a turn a fixture row checks.
type vendorTurn struct {
	Text         string
	ToolCalls    []vendorCall
	FinishReason string
	Finish       string // Turn.Finish()
	Usage        protocol.Usage
	Thinking     []protocol.Thinking
	Model        string
}

// vendorCall is a tool call with its arguments as compact JSON text.
type vendorCall struct {
	ID, Name, Arguments string
}

// vendorError is what a fixture row checks of an error.
type vendorError struct {
	Code         protocol.Code
	Retryable    bool
	RetryAfterMS int64
}

type vendorRow struct {
	name   string
	file   string // under testdata/vendor
	client string // "anthropic", "openai" or "openrouter"
	want   *vendorTurn
	err    *vendorError
	// estimated says the answer has thinking text but reports no count of
	// thinking tokens, so the client may estimate Usage.ReasoningTokens:
	// the row checks only that it is a part of OutputTokens.
	estimated bool
}

func TestVendorFixtures(t *testing.T) {
	for _, row := range vendorRows() {
		status, header := vendorHeaders(t, row.file)
		body, err := os.ReadFile(filepath.Join("testdata", "vendor", row.file))
		if err != nil {
			t.Fatalf("read fixture: %v", err)
		}
		// A stream fixture is read with CompleteStream, a whole answer with
		// Complete; an error status is the same error to both.
		methods := []string{"Complete"}
		switch {
		case strings.HasSuffix(row.file, ".sse"):
			methods = []string{"CompleteStream"}
		case status >= 300:
			methods = []string{"Complete", "CompleteStream"}
		}
		for _, method := range methods {
			t.Run(row.name+"/"+method, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for k, vs := range header {
						w.Header()[k] = vs
					}
					w.WriteHeader(status)
					w.Write(body)
				}))
				defer srv.Close()
				p := vendorClient(t, row.client, srv)
				req := &protocol.CompletionRequest{
					Model:           vendorRequestModel,
					Messages:        []protocol.Message{{Role: protocol.RoleUser, Content: "Hello"}},
					MaxOutputTokens: 1024,
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var (
					turn   *protocol.Turn
					err    error
					tokens []string
				)
				if method == "CompleteStream" {
					turn, err = p.(Streamer).CompleteStream(ctx, req, func(s string) { tokens = append(tokens, s) })
				} else {
					turn, err = p.Complete(ctx, req)
				}
				if row.err != nil {
					checkVendorError(t, method, err, *row.err)
					return
				}
				if err != nil {
					t.Fatalf("%s(%s) failed: %v; want a turn", method, row.file, err)
				}
				want, got := *row.want, vendorTurnOf(turn)
				if row.estimated {
					if r := got.Usage.ReasoningTokens; r < 0 || r > got.Usage.OutputTokens {
						t.Errorf("%s(%s) Usage.ReasoningTokens = %d, want an estimate within OutputTokens %d",
							method, row.file, r, got.Usage.OutputTokens)
					}
					want.Usage.ReasoningTokens = got.Usage.ReasoningTokens
				}
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s(%s) turn mismatch (-want +got):\n%s", method, row.file, diff)
				}
				if turn.Served != p.Name() {
					t.Errorf("%s(%s).Served = %q, want %q", method, row.file, turn.Served, p.Name())
				}
				if method == "CompleteStream" {
					if got := strings.Join(tokens, ""); got != turn.Text {
						t.Errorf("%s(%s) streamed %q, want the turn's text %q", method, row.file, got, turn.Text)
					}
				}
			})
		}
	}
}

func checkVendorError(t *testing.T, method string, err error, want vendorError) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want error %s", method, want.Code)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s error %v is not a *protocol.Error", method, err)
	}
	got := vendorError{Code: pe.Code, Retryable: pe.Retryable(), RetryAfterMS: pe.RetryAfterMS}
	if got != want {
		t.Errorf("%s error = %+v (%v), want %+v", method, got, err, want)
	}
}

// vendorTurnOf projects a turn onto what the rows check.
func vendorTurnOf(t *protocol.Turn) vendorTurn {
	v := vendorTurn{Text: t.Text, FinishReason: t.FinishReason, Finish: t.Finish(), Usage: t.Usage,
		Thinking: t.Thinking, Model: t.Model}
	for _, c := range t.ToolCalls {
		v.ToolCalls = append(v.ToolCalls, vendorCall{ID: c.ID, Name: c.Name, Arguments: vendorCompact(string(c.Arguments))})
	}
	return v
}

// vendorCompact compacts JSON text, and leaves text that is not JSON alone.
func vendorCompact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// vendorJSONString is s as a JSON string: what a client keeps as the
// arguments of a call whose input is not JSON.
func vendorJSONString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// vendorHeaders reads a fixture's .headers file: a first line "HTTP
// <status>", then "name: value" lines. A fixture without one is served
// with 200 and the content type its extension names.
func vendorHeaders(t *testing.T, file string) (int, http.Header) {
	t.Helper()
	h := http.Header{}
	if strings.HasSuffix(file, ".sse") {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/json")
	}
	name := filepath.Join("testdata", "vendor", strings.TrimSuffix(file, filepath.Ext(file))+".headers")
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return http.StatusOK, h
	}
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatalf("%s is empty; want a first line \"HTTP <status>\"", name)
	}
	status, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "HTTP "))
	if err != nil {
		t.Fatalf("%s: first line %q is not \"HTTP <status>\"", name, sc.Text())
	}
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			t.Fatalf("%s: line %q is not \"name: value\"", name, sc.Text())
		}
		h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return status, h
}

// vendorClient builds the named client with its base URL at srv.
func vendorClient(t *testing.T, client string, srv *httptest.Server) Provider {
	t.Helper()
	const key = "sk-vendor-fixture"
	var p Provider
	var err error
	switch client {
	case "anthropic":
		p, err = NewAnthropic(AnthropicConfig{APIKey: key, BaseURL: srv.URL, HTTPClient: srv.Client(), Timeout: 10 * time.Second})
	case "openai":
		p, err = NewOpenAI(OpenAIConfig{APIKey: key, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client(), Timeout: 10 * time.Second})
	case "openrouter":
		p, err = NewOpenRouter(OpenRouterConfig{APIKey: key, BaseURL: srv.URL + "/api/v1", HTTPClient: srv.Client(), Timeout: 10 * time.Second})
	default:
		t.Fatalf("unknown client %q", client)
	}
	if err != nil {
		t.Fatalf("new %s client: %v", client, err)
	}
	return p
}

// usageSplitText is the text of openai_stream_usage_split.sse.
const usageSplitText = `Let's take a journey to the beautiful island of Santorini in Greece.

Santorini is a gem in the Aegean Sea, known for its stunning sunsets, white-washed buildings, and crystal-clear waters. The island's rugged landscape is the result of a volcanic eruption that took place around 3,600 years ago, which gave Santorini its distinct caldera. When you visit the island, you can't miss the picturesque town of Oia, perched high on the cliffs with its narrow streets, blue-domed churches, and panoramic views of the sea. Fira, the island's capital, is buzzing with life, offering a variety of shops, restaurants, and cafes. Don't forget to explore the archaeological site of Akrotiri, an ancient Minoan city preserved in volcanic ash, often referred to as the "Pompeii of the Aegean."

Now, let's check the weather in Santorini.`

// taxesPartialInput is the tool input anthropic_stream_max_tokens_in_tool_input.sse
// was cut off in: not JSON, so kept as a JSON string of its text.
const taxesPartialInput = "{\"filename\": \"taxes.txt\", \"lines_of_text\": [\n\"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s\",\n\"\",\n\"## INTRODUCTION\",\n\"\",\n\"Filing taxes"

func vendorRows() []vendorRow {
	return []vendorRow{
		// Anthropic, streamed.
		{name: "anthropic stream message_stop without a final newline", file: "anthropic_stream_basic_no_final_newline.sse", client: "anthropic",
			want: &vendorTurn{Text: "Hello there!", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 11, OutputTokens: 6}, Model: "claude-3-opus-latest"}},
		{name: "anthropic stream tool_use", file: "anthropic_stream_tool_use_no_final_newline.sse", client: "anthropic",
			want: &vendorTurn{Text: "I'll check the current weather in Paris for you.",
				ToolCalls:    []vendorCall{{ID: "toolu_01NRLabsLyVHZPKxbKvkfSMn", Name: "get_weather", Arguments: `{"location":"Paris"}`}},
				FinishReason: "tool_use", Finish: protocol.FinishToolCalls,
				Usage: protocol.Usage{InputTokens: 377, OutputTokens: 65}, Model: "claude-sonnet-4-20250514"}},
		{name: "anthropic stream max_tokens inside a tool_use input", file: "anthropic_stream_max_tokens_in_tool_input.sse", client: "anthropic",
			want: &vendorTurn{Text: "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called taxes.txt. Let me do that for you now.",
				ToolCalls:    []vendorCall{{ID: "toolu_01EKqbqmZrGRXy18eN7m9kvY", Name: "make_file", Arguments: vendorJSONString(taxesPartialInput)}},
				FinishReason: "max_tokens", Finish: protocol.FinishMaxTokens,
				Usage: protocol.Usage{InputTokens: 450, OutputTokens: 124}, Model: "claude-3-7-sonnet-20250219"}},
		{name: "anthropic stream refusal", file: "anthropic_stream_refusal.sse", client: "anthropic",
			want: &vendorTurn{FinishReason: "refusal", Finish: protocol.FinishRefusal,
				Usage: protocol.Usage{InputTokens: 20, OutputTokens: 0}, Model: "claude-opus-4-7"}},
		{name: "anthropic stream thinking with signature, then refusal", file: "anthropic_stream_thinking_signature_refusal.sse", client: "anthropic",
			want: &vendorTurn{Text: "Hi", FinishReason: "refusal", Finish: protocol.FinishRefusal,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText,
					Text:      "Simple educational question about what a solar eclipse is. This is benign general knowledge — definitions are fine. Also the user called me \"claudius\" — I'm Claude. Minor correction or just roll with it politely.",
					Signature: "c3ludGhldGljLXNpZ25hdHVyZS1maXh0dXJlLWEtbm90LWEtcmVhbC1zaWduYXR1cmU="}},
				Usage: protocol.Usage{InputTokens: 28, OutputTokens: 106, ReasoningTokens: 67}, Model: "claude-fable-5"}},
		{name: "anthropic stream thinking with signature_delta", file: "anthropic_stream_thinking_signature_delta.sse", client: "anthropic", estimated: true,
			want: &vendorTurn{Text: "Based on my analysis", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "Let me analyze this...", Signature: "sig_456"}},
				Usage:    protocol.Usage{InputTokens: 10, OutputTokens: 10}, Model: "claude-haiku-4-5"}},
		{name: "anthropic stream thinking signed in content_block_start", file: "anthropic_stream_thinking_signature_at_start.sse", client: "anthropic", estimated: true,
			want: &vendorTurn{Text: "Based on my analysis", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "Let me analyze this...", Signature: "sig_123"}},
				Usage:    protocol.Usage{InputTokens: 10, OutputTokens: 10}, Model: "claude-haiku-4-5"}},
		{name: "anthropic stream redacted_thinking", file: "anthropic_stream_redacted_thinking.sse", client: "anthropic",
			want: &vendorTurn{Text: "Response", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingRedacted, Data: "encrypted_xyz"}},
				Usage:    protocol.Usage{InputTokens: 10, OutputTokens: 5}, Model: "claude-haiku-4-5"}},
		{name: "anthropic stream thinking, text and tool_use interleaved", file: "anthropic_stream_thinking_interleaved_tool_use.sse", client: "anthropic", estimated: true,
			want: &vendorTurn{Text: "Hello world!",
				ToolCalls: []vendorCall{{ID: "toolu_id", Name: "get_weather", Arguments: `{"city":"Los Angeles"}`}},
				Thinking:  []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "Let me think.", Signature: "sig123"}},
				Model:     vendorRequestModel}},
		{name: "anthropic stream cache creation and read usage", file: "anthropic_stream_cache_usage.sse", client: "anthropic",
			want: &vendorTurn{Text: "Hello there!", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 40 + 12 + 7, OutputTokens: 8, CachedTokens: 7, CacheWriteTokens: 12, ReasoningTokens: 3},
				Model: "claude-sonnet-4-5"}},
		{name: "anthropic stream server_tool_use is no tool call", file: "anthropic_stream_server_tool_use.sse", client: "anthropic",
			want: &vendorTurn{Text: "Let me search for that.", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 42, OutputTokens: 40}, Model: "claude-sonnet-4-20250514"}},
		{name: "anthropic stream overloaded_error event", file: "anthropic_stream_overloaded_error.sse", client: "anthropic",
			err: &vendorError{Code: protocol.CodeProviderServer, Retryable: true}},

		// Anthropic, whole.
		{name: "anthropic thinking with signature", file: "anthropic_thinking.json", client: "anthropic", estimated: true,
			want: &vendorTurn{Text: "Based on my analysis, the answer is 42.", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "Let me think through this step by step...", Signature: "sig_abc123"}},
				Usage:    protocol.Usage{InputTokens: 20, OutputTokens: 15}, Model: "claude-haiku-4-5"}},
		{name: "anthropic redacted_thinking", file: "anthropic_redacted_thinking.json", client: "anthropic",
			want: &vendorTurn{Text: "Here is my conclusion.", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingRedacted, Data: "encrypted_thinking_data_xyz"}},
				Usage:    protocol.Usage{InputTokens: 20, OutputTokens: 10}, Model: "claude-haiku-4-5"}},
		{name: "anthropic cache creation and read usage", file: "anthropic_cache_usage.json", client: "anthropic",
			want: &vendorTurn{Text: "Response", FinishReason: "end_turn", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 100 + 50 + 25, OutputTokens: 10, CachedTokens: 25, CacheWriteTokens: 50},
				Model: "claude-haiku-4-5"}},
		{name: "anthropic pause_turn", file: "anthropic_pause_turn.json", client: "anthropic",
			want: &vendorTurn{FinishReason: "pause_turn", Finish: protocol.FinishPause,
				Usage: protocol.Usage{InputTokens: 1, OutputTokens: 1}, Model: "claude-haiku-4-5"}},
		{name: "anthropic max_tokens with a tool_use", file: "anthropic_max_tokens_tool_use.json", client: "anthropic",
			want: &vendorTurn{
				ToolCalls:    []vendorCall{{ID: "toolu_max_tokens", Name: "get_weather", Arguments: `{"location":"San Francisco, CA","units":"f"}`}},
				FinishReason: "max_tokens", Finish: protocol.FinishMaxTokens,
				Usage: protocol.Usage{InputTokens: 1, OutputTokens: 1}, Model: "claude-haiku-4-5"}},
		{name: "anthropic 429 rate_limit_error with x-should-retry true", file: "anthropic_error_rate_limit_429.json", client: "anthropic",
			err: &vendorError{Code: protocol.CodeRateLimited, Retryable: true}},
		{name: "anthropic 400 with x-should-retry false", file: "anthropic_error_invalid_request_400.json", client: "anthropic",
			err: &vendorError{Code: protocol.CodeProviderRequest, Retryable: false}},
		{name: "anthropic 400 credit balance too low", file: "anthropic_error_credit_balance_400.json", client: "anthropic",
			err: &vendorError{Code: protocol.CodeQuotaExhausted, Retryable: false}},

		// OpenAI, streamed.
		{name: "openai stream refusal", file: "openai_stream_refusal.sse", client: "openai",
			want: &vendorTurn{Text: "I'm sorry, I can't assist with that request.", FinishReason: protocol.FinishRefusal, Finish: protocol.FinishRefusal,
				Usage: protocol.Usage{InputTokens: 79, OutputTokens: 11}, Model: "gpt-4o-2024-08-06"}},
		{name: "openai stream usage in the final chunk", file: "openai_stream_usage_final_chunk.sse", client: "openai",
			want: &vendorTurn{Text: "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.",
				FinishReason: "stop", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 14, OutputTokens: 30}, Model: "gpt-4o-2024-08-06"}},
		{name: "openai stream usage split across two chunks", file: "openai_stream_usage_split.sse", client: "openai",
			want: &vendorTurn{Text: usageSplitText,
				ToolCalls:    []vendorCall{{ID: "call_FXoAjBUMcVv1k40fficJ9cSs", Name: "get_weather", Arguments: `{"location":"Santorini, Greece"}`}},
				FinishReason: "tool_calls", Finish: protocol.FinishToolCalls,
				Usage: protocol.Usage{InputTokens: 10 + 0, OutputTokens: 100 + 50, CachedTokens: 20 + 10, ReasoningTokens: 5 + 3},
				Model: "gpt-4o-2024-05-13"}},
		{name: "openai stream of three choices keeps choice 0", file: "openai_stream_multiple_choices.sse", client: "openai",
			want: &vendorTurn{Text: `{"city":"San Francisco","temperature":65,"units":"f"}`, FinishReason: "stop", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 79, OutputTokens: 42}, Model: "gpt-4o-2024-08-06"}},
		{name: "openai stream parallel tool calls", file: "openai_stream_parallel_tool_calls.sse", client: "openai",
			want: &vendorTurn{
				ToolCalls: []vendorCall{
					{ID: "call_JMW1whyEaYG438VE1OIflxA2", Name: "GetWeatherArgs", Arguments: `{"city":"Edinburgh","country":"GB","units":"c"}`},
					{ID: "call_DNYTawLBoN8fj3KN6qU9N1Ou", Name: "get_stock_price", Arguments: `{"ticker":"AAPL","exchange":"NASDAQ"}`},
				},
				FinishReason: "tool_calls", Finish: protocol.FinishToolCalls,
				Usage: protocol.Usage{InputTokens: 149, OutputTokens: 60}, Model: "gpt-4o-2024-08-06"}},

		// OpenAI, whole.
		{name: "openai refusal", file: "openai_refusal.json", client: "openai",
			want: &vendorTurn{Text: "I'm very sorry, but I can't assist with that.", FinishReason: protocol.FinishRefusal, Finish: protocol.FinishRefusal,
				Usage: protocol.Usage{InputTokens: 79, OutputTokens: 12}, Model: "gpt-4o-2024-08-06"}},
		{name: "openai three choices keeps choice 0", file: "openai_multiple_choices.json", client: "openai",
			want: &vendorTurn{Text: `{"city":"San Francisco","temperature":64,"units":"f"}`, FinishReason: "stop", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 79, OutputTokens: 44}, Model: "gpt-4o-2024-08-06"}},
		{name: "openai finish_reason length", file: "openai_length.json", client: "openai",
			want: &vendorTurn{Text: `{"`, FinishReason: "length", Finish: protocol.FinishMaxTokens,
				Usage: protocol.Usage{InputTokens: 79, OutputTokens: 1}, Model: "gpt-4o-2024-08-06"}},
		{name: "openai 429 insufficient_quota", file: "openai_error_insufficient_quota_429.json", client: "openai",
			err: &vendorError{Code: protocol.CodeQuotaExhausted, Retryable: false}},
		{name: "openai 500 with x-should-retry false", file: "openai_error_500_should_retry_false.json", client: "openai",
			err: &vendorError{Code: protocol.CodeProviderServer, Retryable: false}},
		{name: "openai 400 with x-should-retry true", file: "openai_error_400_should_retry_true.json", client: "openai",
			err: &vendorError{Code: protocol.CodeProviderRequest, Retryable: true}},
		{name: "openai 429 with rate-limit reset headers", file: "openai_error_429_ratelimit_reset.json", client: "openai",
			err: &vendorError{Code: protocol.CodeRateLimited, Retryable: true, RetryAfterMS: 360000}},

		// OpenRouter.
		{name: "openrouter stream usage with cost", file: "openrouter_stream_usage_cost.sse", client: "openrouter",
			want: &vendorTurn{Text: "Hello", FinishReason: "stop", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 10, OutputTokens: 20, CachedTokens: 5, ReasoningTokens: 8, ReportedCost: 0.0015},
				Model: "test-model"}},
		{name: "openrouter stream text on choice index 1", file: "openrouter_stream_choice_index_1.sse", client: "openrouter",
			want: &vendorTurn{Text: "Hello", FinishReason: "stop", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 17, OutputTokens: 227, ReportedCost: 0.0042}, Model: "gpt-3.5-turbo-0613"}},
		{name: "openrouter stream reasoning", file: "openrouter_stream_reasoning.sse", client: "openrouter",
			want: &vendorTurn{Text: "Hello! How can I help you today?", FinishReason: "stop", Finish: protocol.FinishStop,
				Thinking: []protocol.Thinking{{Kind: protocol.ThinkingSummary,
					Text: "I need to think about this step by step... First, I should analyze the request. Then I should provide a helpful response."}},
				Usage: protocol.Usage{InputTokens: 17, OutputTokens: 30}, Model: "gpt-3.5-turbo-0125"}},
		{name: "openrouter stream duplicate tool call ids", file: "openrouter_stream_duplicate_tool_ids.sse", client: "openrouter",
			want: &vendorTurn{
				ToolCalls: []vendorCall{
					{ID: "call_0", Name: "get_weather", Arguments: `{"city":"Tokyo"}`},
					{ID: "call_0_1", Name: "get_weather", Arguments: `{"city":"London"}`},
				},
				FinishReason: "tool_calls", Finish: protocol.FinishToolCalls,
				Usage: protocol.Usage{InputTokens: 10, OutputTokens: 15}, Model: "gemini-2.0"}},
		{name: "openrouter stream mid-stream 429 error", file: "openrouter_stream_error_midstream.sse", client: "openrouter",
			err: &vendorError{Code: protocol.CodeRateLimited, Retryable: true}},
		{name: "openrouter stream server_error chunk", file: "openrouter_stream_error_server.sse", client: "openrouter",
			err: &vendorError{Code: protocol.CodeProviderServer, Retryable: true}},
		{name: "openrouter error in a 200 body", file: "openrouter_error_in_200_body.json", client: "openrouter",
			err: &vendorError{Code: protocol.CodeRateLimited, Retryable: true}},
		{name: "openrouter 402 insufficient credits", file: "openrouter_error_402.json", client: "openrouter",
			err: &vendorError{Code: protocol.CodeQuotaExhausted, Retryable: false}},
		{name: "openrouter usage with cost and cache_write_tokens", file: "openrouter_usage_cache_write.json", client: "openrouter",
			want: &vendorTurn{Text: "The capital of France is Paris.", FinishReason: "stop", Finish: protocol.FinishStop,
				Usage: protocol.Usage{InputTokens: 194, OutputTokens: 2, CacheWriteTokens: 100, ReportedCost: 0.95},
				Model: "openai/gpt-4"}},
	}
}

// TestVendorFixturesListed checks that every fixture has a row and a line
// in SOURCES.md, and every row a fixture.
func TestVendorFixturesListed(t *testing.T) {
	dir := filepath.Join("testdata", "vendor")
	sources, err := os.ReadFile(filepath.Join(dir, "SOURCES.md"))
	if err != nil {
		t.Fatalf("read SOURCES.md: %v", err)
	}
	rows := map[string]bool{}
	for _, r := range vendorRows() {
		rows[r.file] = true
		if _, err := os.Stat(filepath.Join(dir, r.file)); err != nil {
			t.Errorf("row %q: %v", r.name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".sse", ".json":
			if !rows[name] {
				t.Errorf("fixture %s has no row in vendorRows", name)
			}
		case ".headers":
			base := strings.TrimSuffix(name, ".headers")
			if !rows[base+".json"] && !rows[base+".sse"] {
				t.Errorf("%s belongs to no fixture", name)
			}
			continue
		default:
			continue
		}
		if !bytes.Contains(sources, []byte("`"+name+"`")) {
			t.Errorf("fixture %s is not listed in SOURCES.md", name)
		}
	}
}
