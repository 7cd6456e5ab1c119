package provider

import (
	"errors"
	"fmt"
	"strings"
)

// FromEnv builds the provider a worker (or the embedded default) runs with,
// from environment variables read through getenv: every vendor whose key is
// set, in the order HARNESS_PROVIDERS names them (default
// "openai,anthropic,openrouter"), chained with Fallback when there are
// several. It returns the provider and the name of the first, which is
// expected to serve.
//
//	OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_ORG_ID
//	ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
//	OPENROUTER_API_KEY, OPENROUTER_BASE_URL, OPENROUTER_MODEL
//
// Errors: no key is set, a vendor name is unknown, or a configuration does
// not validate.
func FromEnv(getenv func(string) string) (Provider, string, error) {
	order := getenv("HARNESS_PROVIDERS")
	if order == "" {
		order = "openai,anthropic,openrouter"
	}
	var chain []Provider
	for _, name := range strings.Split(order, ",") {
		var p Provider
		var err error
		switch strings.TrimSpace(name) {
		case "openai":
			if getenv("OPENAI_API_KEY") == "" {
				continue
			}
			p, err = NewOpenAI(OpenAIConfig{APIKey: getenv("OPENAI_API_KEY"), BaseURL: getenv("OPENAI_BASE_URL"),
				Model: getenv("OPENAI_MODEL"), Organization: getenv("OPENAI_ORG_ID")})
		case "anthropic":
			if getenv("ANTHROPIC_API_KEY") == "" {
				continue
			}
			p, err = NewAnthropic(AnthropicConfig{APIKey: getenv("ANTHROPIC_API_KEY"), BaseURL: getenv("ANTHROPIC_BASE_URL"),
				Model: getenv("ANTHROPIC_MODEL")})
		case "openrouter":
			if getenv("OPENROUTER_API_KEY") == "" {
				continue
			}
			p, err = NewOpenRouter(OpenRouterConfig{APIKey: getenv("OPENROUTER_API_KEY"), BaseURL: getenv("OPENROUTER_BASE_URL"),
				Model: getenv("OPENROUTER_MODEL")})
		case "":
			continue
		default:
			return nil, "", fmt.Errorf("HARNESS_PROVIDERS names %q; use openai, anthropic and openrouter", name)
		}
		if err != nil {
			return nil, "", err
		}
		chain = append(chain, p)
	}
	switch len(chain) {
	case 0:
		return nil, "", errors.New("no provider: set OPENAI_API_KEY (with OPENAI_BASE_URL for any OpenAI-compatible server), ANTHROPIC_API_KEY or OPENROUTER_API_KEY, or replay a cassette")
	case 1:
		return chain[0], chain[0].Name(), nil
	}
	return NewFallback(chain...), chain[0].Name(), nil
}
