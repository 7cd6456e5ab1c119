// Package provider turns a completion request into a model's turn. It holds
// the Provider interface, the plugin boundary between a worker and a model
// API, and its implementations:
//
//   - OpenAI, a client for the OpenAI chat completions API and the many
//     servers compatible with it;
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
//  1. builds a provider once (NewOpenAI with an OpenAIConfig whose APIKey
//     main read from OPENAI_API_KEY; LoadReplay with a cassette path), and
//     may wrap it in NewRecord to keep what it answers;
//  2. calls Complete with the whole transcript of a step, as many times and
//     from as many goroutines as it likes;
//  3. on success, records the turn: Served names who answered, Usage what
//     it cost;
//  4. on failure, gets a *protocol.Error with a provider code and decides
//     with (*protocol.Error).Retryable whether to try again, waiting at
//     least RetryAfterMS when it is set;
//  5. when recording, calls Record.Save (at any time, as often as it likes).
//
// # Errors
//
// Complete returns only *protocol.Error, classified in one place from the
// HTTP status or the failure. errors.Is(err, protocol.ErrRateLimited) and
// the like hold, also after the error crossed NATS. See Provider for the
// table of codes.
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
