// Package provider turns a completion request into a model's turn. It holds
// the Provider interface, the plugin boundary between a worker and a model
// API, and its implementations:
//
//   - OpenAI, a client for the OpenAI chat completions API and the many
//     servers compatible with it, through go-openai; NewOpenRouter builds
//     one for OpenRouter;
//   - Anthropic, a client for Anthropic's Messages API on net/http;
//   - Fallback, a chain of providers that falls over to the next on a
//     failure worth retrying;
//   - Scripted, which answers a fixed list of turns in order, for tests that
//     steer an agent through exact tool calls;
//   - Record, which wraps another provider and keeps each exchange, to be
//     saved as a cassette;
//   - Replay, which answers from a cassette by request content, for tests
//     and the offline demo, with no API key and no network.
//
// # Using a provider
//
// A worker, or a test standing in for one:
//
//  1. builds a provider once (NewOpenAI, NewOpenRouter or NewAnthropic
//     with a config whose APIKey main read from OPENAI_API_KEY,
//     OPENROUTER_API_KEY or ANTHROPIC_API_KEY; LoadReplay with a cassette
//     path), may chain several with NewFallback, and may wrap the result in
//     NewRecord to keep what it answers;
//  2. calls Complete with the whole transcript of a step, or Stream to see
//     the text as it arrives, as many times and from as many goroutines as
//     it likes;
//  3. on success, records the turn: Served names who answered (in a
//     Fallback chain, the member that did), Usage what it cost;
//  4. on failure, gets a *protocol.Error with a provider code and asks a
//     RetryPolicy whether and when to try again: only retryable codes
//     are, after RetryAfterMS when the provider set it, and never with a
//     wait that would outlast the run's deadline;
//  5. when recording, calls Record.Save (at any time, as often as it likes).
//
// No client retries by itself: one Complete is one HTTP request, and the
// caller's RetryPolicy decides the rest, so a worker can back off as a
// whole rather than per goroutine.
//
// # Errors
//
// Complete and CompleteStream return only *protocol.Error, classified in
// one place from the HTTP status, the error event of a stream, or the
// failure. errors.Is(err, protocol.ErrRateLimited) and the like hold, also
// after the error crossed NATS. See Provider for the table of codes and
// Streamer for the failures only a stream has.
//
// # Conformance
//
// Every HTTP client passes providertest.Run against an httptest server
// speaking its vendor's wire format; every provider passes the checks in
// conformance_test.go.
//
// # Cassettes
//
// A cassette is a JSON file, indented so it diffs well:
//
//	{
//	  "format": "harness.cassette/v1",
//	  "exchanges": [
//	    {"key": "<sha256 hex>", "request": {...}, "turn": {...}}
//	  ]
//	}
//
// The key is RequestKey of the request: a hash of its content in which the
// whitespace of tool arguments and schemas does not count. Replay answers a
// request with the turns recorded for its key, in recorded order, then
// repeats the last. A request it does not hold is CodeUnrecorded, never
// retried: re-record with `harness run --record FILE`. Only successful
// calls are recorded. See Replay for what a resumed run gets.
package provider
