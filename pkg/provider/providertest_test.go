package provider_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/provider/providertest"
)

// The conformance suite, run against every HTTP client, each pointed at a
// server speaking its vendor's wire format.

func TestConformanceOpenAIWire(t *testing.T) {
	providertest.Run(t, func(t *testing.T, srv *httptest.Server) provider.Provider {
		p, err := provider.NewOpenAI(provider.OpenAIConfig{
			APIKey:     providertest.APIKey,
			BaseURL:    srv.URL + "/v1",
			HTTPClient: srv.Client(),
			Timeout:    providertest.Timeout,
		})
		if err != nil {
			t.Fatalf("NewOpenAI: %v", err)
		}
		return p
	}, providertest.OpenAIWire{})
}

func TestConformanceOpenRouterWire(t *testing.T) {
	providertest.Run(t, func(t *testing.T, srv *httptest.Server) provider.Provider {
		p, err := provider.NewOpenRouter(provider.OpenRouterConfig{
			APIKey:     providertest.APIKey,
			BaseURL:    srv.URL + "/api/v1",
			Referer:    "https://harness.example",
			Title:      "harness",
			HTTPClient: srv.Client(),
			Timeout:    providertest.Timeout,
		})
		if err != nil {
			t.Fatalf("NewOpenRouter: %v", err)
		}
		if p.Name() != "openrouter" {
			t.Errorf("Name() = %q, want openrouter", p.Name())
		}
		return p
	}, providertest.OpenAIWire{
		BasePath: "/api/v1",
		Header:   http.Header{"Http-Referer": {"https://harness.example"}, "X-Title": {"harness"}},
	})
}

func TestConformanceAnthropicWire(t *testing.T) {
	providertest.Run(t, func(t *testing.T, srv *httptest.Server) provider.Provider {
		p, err := provider.NewAnthropic(provider.AnthropicConfig{
			APIKey:     providertest.APIKey,
			BaseURL:    srv.URL,
			HTTPClient: srv.Client(),
			Timeout:    providertest.Timeout,
		})
		if err != nil {
			t.Fatalf("NewAnthropic: %v", err)
		}
		return p
	}, providertest.AnthropicWire{})
}
