// Command worker runs the harness worker role against a NATS server: it
// takes step tasks from its pools and answers them with its provider. A
// worker with tools of an embedder's own is this with command.Main given
// them (examples/custom-tool/worker).
//
// Usage: worker [--nats URL] [--id ID] [--pool NAME]... [--concurrency N] [--replay CASSETTE] [--metrics ADDR] [--version]
// The provider is --replay CASSETTE, else every vendor whose key is set
// (OPENAI_API_KEY with OPENAI_BASE_URL and OPENAI_MODEL for any
// OpenAI-compatible server, ANTHROPIC_API_KEY, OPENROUTER_API_KEY), chained
// in the order HARNESS_PROVIDERS gives and falling over on retryable
// failures.
package main

import "github.com/ioharness/harness/pkg/worker/command"

func main() { command.Main() }
